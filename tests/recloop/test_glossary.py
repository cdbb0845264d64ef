"""Every metric, variant and row label a built-in scenario emits is defined (issue 34):
in ``recloop._glossary`` (report.html shows it on hover and in its Glossary section) and in
docs/results.md. Each built-in scenario is run once at its smallest size for the check: here,
or in tests/test_figures.py for those whose figures it checks (``FIGURES_RUN``)."""

import re
from pathlib import Path

import pytest

import recloop
from recloop._glossary import COLUMNS, GLOSSARY, define, scenario_names
from recloop._scenario import builtin_scenarios
from tests.builtin_data import overrides
from tests.recloop.smallest import smallest
from tests.test_figures import RULED

DOCS = Path(__file__).resolve().parents[2] / "docs" / "results.md"


def undefined_names(res) -> list:
    """The metric and variant names a finished run emitted that neither the glossary nor its
    scenario defines."""
    from recloop import _rundir

    emitted = {r[k] for path in (_rundir.read_results, _rundir.read_estimates)
               for r in path(res.run_dir) for k in ("metric", "variant")} - {""}
    named = scenario_names(res.scenario)  # the scenario's own {name, factory, params}
    return sorted(n for n in emitted if define(n) is None and n not in named)


#: The built-in scenarios tests/test_figures.py runs at their smallest size (``RULED``): it
#: checks their names with :func:`undefined_names` on the same run (one run per scenario).
FIGURES_RUN = RULED


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(set(builtin_scenarios()) - set(FIGURES_RUN)))
def test_every_name_a_builtin_scenario_emits_is_defined(name, tmp_path):
    res = recloop.run(smallest(name), out=tmp_path, workers=1, set=overrides(name),
                      progress=False)
    undefined = undefined_names(res)
    assert not undefined, f"{name} emits names the glossary does not define: {undefined}"
    # ... and its report.html shows them: on hover in the summary, in the Glossary section
    page = (res.run_dir / "report.html").read_text()
    assert 'id="glossary"' in page


def test_every_builtin_scenario_has_its_names_checked():
    assert set(FIGURES_RUN) <= set(builtin_scenarios())


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
