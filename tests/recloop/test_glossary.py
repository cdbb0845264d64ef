"""Every metric, variant and row label a built-in scenario emits is defined (issue 34):
in ``recloop._glossary`` (report.html shows it on hover and in its Glossary section) and in
docs/results.md."""

import re
from pathlib import Path

import pytest

import recloop
from recloop._glossary import COLUMNS, GLOSSARY, define, scenario_names
from recloop._scenario import builtin_scenarios
from tests.builtin_data import overrides
from tests.recloop.smallest import smallest

DOCS = Path(__file__).resolve().parents[2] / "docs" / "results.md"


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(builtin_scenarios()))
def test_every_name_a_builtin_scenario_emits_is_defined(name, tmp_path):
    res = recloop.run(smallest(name), out=tmp_path, workers=1, set=overrides(name),
                      progress=False)
    from recloop import _rundir

    emitted = {r[k] for path in (_rundir.read_results, _rundir.read_estimates)
               for r in path(res.run_dir) for k in ("metric", "variant")} - {""}
    named = scenario_names(res.scenario)  # the scenario's own {name, factory, params}
    undefined = sorted(n for n in emitted if define(n) is None and n not in named)
    assert not undefined, f"{name} emits names the glossary does not define: {undefined}"
    # ... and its report.html shows them: on hover in the summary, in the Glossary section
    page = (res.run_dir / "report.html").read_text()
    assert 'id="glossary"' in page


def test_docs_results_md_holds_the_glossary():
    text = DOCS.read_text()
    section = text.split("## Glossary", 1)[1]
    for pattern, definition in GLOSSARY:
        if pattern == "*":
            continue
        assert f"| `{pattern}` | {_cell(definition)} |" in section, pattern
    for column, definition in COLUMNS.items():
        assert f"| `{column}` | {_cell(definition)} |" in section, column


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def test_a_name_is_matched_whole():
    assert define("loo_hit@5") and define("loo_hit@10_sampled") and define("item42")
    assert define("loo_hit@") is None and define("item") is None and define("ipsx") is None
    assert define("weighted_p5") and define("weighted_pall") and define("clip=inf")
    assert re.fullmatch(r"[^*]+", "".join(p for p, _ in GLOSSARY if p != "*"))
