"""The README keeps its promises: two commands, the second the one CI runs, and links that lead
somewhere."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.M | re.S)
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def _install_commands(text):
    blocks = [b.strip() for b in FENCE.findall(text)]
    return [b for b in blocks if "pip install" in b and "python3 -m venv" in b]


def test_the_readme_holds_exactly_two_commands_and_ci_runs_the_second():
    readme = (ROOT / "README.md").read_text()
    commands = _install_commands(readme)
    assert len(commands) == 2, commands
    run, test = commands
    assert "\n" not in run and "\n" not in test
    assert run.endswith("recloop run quickstart")
    assert test.endswith("python -m pytest -q")
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert test in ci, "the README's test command is not the line .ci/run runs"


def _relative_links(path):
    for target in LINK.findall(path.read_text()):
        if "://" in target or target.startswith("mailto:"):
            continue
        yield target, (path.parent / target)


def test_every_relative_link_of_the_readme_and_docs_leads_to_a_file():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    broken = [f"{page.relative_to(ROOT)}: {target}"
              for page in pages for target, resolved in _relative_links(page)
              if not resolved.exists()]
    assert not broken, broken
