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


FENCED = re.compile(r"^```([^\n]*)\n(.*?)^```", re.M | re.S)
MARKER = re.compile(r"<!-- output: (illustrative[^>]*|tested by (\S+)::(\w+)) -->\s*$")
COMMAND = re.compile(r"(\$ |\.venv/|python3? |recloop |pip |git |cd )")


def _output_blocks():
    """Every fenced block of README.md and docs/*.md without a language that is not a
    command: ``(page, line, marker or None, text)``."""
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = page.read_text()
        for m in FENCED.finditer(text):
            body = m.group(2)
            if m.group(1).strip() or not body.strip() or COMMAND.match(body.lstrip()):
                continue
            before = text[:m.start()].rstrip("\n").rsplit("\n", 1)[-1]
            marker = MARKER.fullmatch(before.strip())
            yield page, text[:m.start()].count("\n") + 1, marker, body


def test_every_output_in_the_docs_is_tested_or_marked_illustrative():
    """Issue 34: docs quoted outputs that no longer matched (8/9 where the example prints
    9/9). Each block that shows an output says which test produces it, or that it is
    illustrative; a named test exists."""
    unmarked = [f"{p.relative_to(ROOT)}:{line}" for p, line, marker, _ in _output_blocks()
                if marker is None]
    assert not unmarked, f"output blocks neither tested nor marked illustrative: {unmarked}"
    for page, line, marker, _ in _output_blocks():
        if marker.group(2):
            path = ROOT / marker.group(2)
            assert f"def {marker.group(3)}(" in path.read_text(), (page, line)


def _block(page: str, test: str) -> str:
    for p, _, marker, body in _output_blocks():
        if p == ROOT / page and marker and marker.group(3) == test:
            return body
    raise AssertionError(f"no block of {page} tested by {test}")


def test_the_readmes_first_screen_is_the_quickstarts(tmp_path):
    """Every line the README quotes of the quickstart's first screen is on it ("..." is
    lines left out)."""
    from recloop._cli import main
    from recloop._report import summary_lines

    assert main(["run", "quickstart", "--out", str(tmp_path), "--workers", "1", "-q"]) == 0
    screen = summary_lines(tmp_path / "quickstart")
    quoted = [ln for ln in _block("README.md", "test_the_readmes_first_screen_is_the_quickstarts")
              .splitlines() if ln.strip() != "..."]
    assert quoted and all(ln in screen for ln in quoted), [
        ln for ln in quoted if ln not in screen]
    assert screen.index(quoted[0]) == 0


def test_checking_estimators_shows_what_the_example_prints():
    import sys

    sys.path.insert(0, str(ROOT / "examples"))
    try:
        from test_my_estimator import my_ips
    finally:
        sys.path.remove(str(ROOT / "examples"))
    from recloop.testing import check_ope_estimator

    report = check_ope_estimator(my_ips, n_problems=3, n_logs=100, rng=0)
    assert str(report).strip() == _block(
        "docs/checking-estimators.md",
        "test_checking_estimators_shows_what_the_example_prints").strip()


#: A hash quoted in the docs: 8 or more hex digits in backticks (``4b436846...``).
HASH = re.compile(r"`([0-9a-f]{8,})(?:\.\.\.)?`")
HASH_MARKER = re.compile(r"<!-- hash: (illustrative, measured [^>]+|tested by (\S+)::(\w+)) -->")


def test_every_hash_in_the_docs_is_tested_or_says_where_it_was_measured():
    """Issue 34: the docs quoted a world's sha256 that `recloop calibrate` no longer printed.
    A paragraph that quotes a hash carries a marker: the test that computes it (and holds
    its digits), or where it was measured (data CI does not have: MovieLens)."""
    problems = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for paragraph in re.split(r"\n\s*\n", page.read_text()):
            quoted = HASH.findall(paragraph)
            if not quoted:
                continue
            marker = HASH_MARKER.search(paragraph)
            if marker is None:
                problems.append(f"{page.relative_to(ROOT)}: {quoted} without a marker")
            elif marker.group(2):
                test = (ROOT / marker.group(2)).read_text()
                assert f"def {marker.group(3)}(" in test, marker.group(0)
                problems += [f"{page.relative_to(ROOT)}: {h} not in {marker.group(2)}"
                             for h in quoted if h not in test]
    assert not problems, problems
