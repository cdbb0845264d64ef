"""Cells cut into chunks of logs (issue 26, section 3): the plan, the merge whatever the
boundaries, and the same bytes as ``--workers 1`` on local workers and on Dask."""

import functools
import gzip
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recloop._cells import Cell, CellError, Chunk, _context, merge_chunks, plan_cells, plan_units
from recloop._registry import registry
from recloop._runner import _Assembly, run_scenario
from recloop._scenario import loads_scenario

PLUGINS = str(Path(__file__).resolve().parents[1] / "fixtures" / "plugins")

#: Cells of 6 cheap logs of every chunkable kind: the DR's ridge model draws its folds from
#: each log's stream, SLOPE's bootstrap of the logs is keyed by the target.
SMALL = {
    "ope": loads_scenario("""
[run]
name = "small"
[world]
preset = "bred_linear"
[[evaluations]]
kind = "ope"
logging = "softmax"
n_logs = 6
n_rounds = 40
estimators = ["ips", "doubly_robust"]
"""),
    "estimator_selection": loads_scenario("""
[run]
name = "small"
[world]
preset = "bred_linear"
[[evaluations]]
kind = "estimator_selection"
family = "doubly_robust"
values = [1.0, 10.0, 1000.0]
n_logs = 6
n_rounds = 40
n_resamples = 50
"""),
}


@functools.lru_cache(maxsize=None)
def _part(kind, a, b):
    """Logs [a, b) of the small cell of ``kind``, each in a fresh context (as a worker would
    compute them; a range computed once serves every example that cuts there)."""
    data = SMALL[kind].data
    chunks = registry().evaluations[kind].chunks
    return chunks.run(_context(data, plan_cells(data)[0], False), a, b)


def _merged(kind, bounds) -> str:
    """The cell's rows and per-log estimates computed as chunks ``bounds`` and merged."""
    data = SMALL[kind].data
    parts = [_part(kind, a, b) for a, b in zip(bounds, bounds[1:], strict=False)]
    ctx = _context(data, plan_cells(data)[0], False)
    rows = registry().evaluations[kind].chunks.merge(ctx, parts)
    return repr(rows) + repr(ctx.estimates)


_WHOLE: dict = {}


def _whole(kind) -> str:
    if kind not in _WHOLE:
        data = SMALL[kind].data
        ctx = _context(data, plan_cells(data)[0], False)
        rows = registry().evaluations[kind].run(ctx)  # Chunks.whole: one chunk of every log
        _WHOLE[kind] = repr(rows) + repr(ctx.estimates)
    return _WHOLE[kind]


@settings(max_examples=16, deadline=None)
@given(kind=st.sampled_from(sorted(SMALL)), cuts=st.sets(st.integers(1, 5), max_size=5))
def test_merged_chunks_equal_the_whole_cell_whatever_the_boundaries(kind, cuts):
    # log i's values depend on i alone (streams keyed by the log's index), and the merge
    # reads the parts as one list of logs: any cut points give the whole cell's rows and
    # per-log estimates, to the last bit (empty chunks included: [a, a))
    assert _merged(kind, [0, *sorted(cuts), 6]) == _whole(kind)


def test_every_chunkable_kind_is_tested_here():
    chunkable = sorted(k for k, v in registry().evaluations.items() if v.chunks is not None)
    assert chunkable == sorted(SMALL)


def test_chunks_that_disagree_on_the_truth_fail_their_cell():
    # a chunk whose set-up differs (hidden state in a user's agent, say) cannot be merged
    # with the others: the cell fails instead of mixing two answers
    data = SMALL["ope"].data
    cell = plan_cells(data)[0]
    chunks = registry().evaluations["ope"].chunks
    a = chunks.run(_context(data, cell, False), 0, 3)
    b = chunks.run(_context(data, cell, False), 3, 6)
    header = dict(b[0], truth={k: v + 1e-12 for k, v in b[0]["truth"].items()})
    with pytest.raises(CellError, match="chunk 1 of the cell computed another header"):
        merge_chunks(data, cell, [(a, 0.1, []), ((header, b[1]), 0.1, [])])


MIXED = """
[run]
name = "mixed"
[world]
preset = "bred_linear"

[[evaluations]]
kind = "ope"
name = "large"
logging = "softmax"
n_logs = 8
n_rounds = 300
estimators = ["ips", "snips", "doubly_robust", "hostile:huge_in_cell"]

[[evaluations]]
kind = "ope"
name = "small"
n_logs = 2
n_rounds = 120
estimators = ["ips", "direct_method"]
sweep = { beta = [1.0, 5.0] }
"""


@pytest.fixture
def mixed(monkeypatch):
    monkeypatch.syspath_prepend(PLUGINS)  # the user's estimator, as --path would
    # these cells take milliseconds: cut them anyway (the planner runs in this process)
    monkeypatch.setattr("recloop._cells.MIN_CHUNK_SECONDS", 0.0)
    return loads_scenario(MIXED)


def test_plan_cuts_the_large_cells_into_chunks_covering_their_logs(mixed):
    data = mixed.data
    cells = plan_cells(data)
    assert plan_units(data, cells, 1) == cells  # one worker: whole cells, in cell order
    # a chunk must carry a second of estimated work (0.72 ms per log of 300 records, 3
    # targets, 4 estimators): these 8 logs stay whole, as do 1,000; 3,000 are cut in two
    assert plan_units(data, cells, 2, min_seconds=1.0) == cells
    for logs, count in [(1000, 1), (3000, 2)]:
        big = loads_scenario(MIXED.replace("n_logs = 8", f"n_logs = {logs}")).data
        assert len(plan_units(big, plan_cells(big), 2, min_seconds=1.0)) == count + 2
    units = plan_units(data, cells, 2)
    chunks = [u for u in units if isinstance(u, Chunk)]
    large = cells[0]
    # the large cell (8 logs of 300 records, 4 estimators) is 91% of the cost: cut into
    # chunks of consecutive logs covering 0..7 (at most one per 2 logs), in log order
    assert [c.cell for c in chunks] == [large] * 4
    assert [(c.start, c.stop) for c in chunks] == [(0, 2), (2, 4), (4, 6), (6, 8)]
    assert [(c.index, c.count) for c in chunks] == [(k, 4) for k in range(4)]
    assert chunks[0].id == "large/*/seed=0 [logs 0-1]"
    # the small cells (2 logs each) stay whole, after the chunks (largest first)
    assert units[4:] == cells[1:] and units[:4] == chunks
    # more workers, smaller chunks; never fewer logs than min_logs per chunk
    assert len(plan_units(data, cells, 8)) == 4 + 2
    ones = [u for u in plan_units(data, cells, 8, min_logs=1) if isinstance(u, Chunk)]
    assert [u.count for u in ones] == [8] * 8 + [2] * 4  # the small cells' logs too
    # kinds without chunks stay whole, first (their cost is unknown)
    tiny = loads_scenario(MIXED.replace(', "hostile:huge_in_cell"', "") + """
[[agents]]
name = "a0"
kind = "fixed_arm"

[[evaluations]]
kind = "selfcheck"
agents = ["a0"]
""").data
    units = plan_units(tiny, plan_cells(tiny), 2)
    assert units[0].evaluation == "selfcheck" and isinstance(units[0], Cell)


class _Reporter:
    quiet = False

    def __init__(self):
        self.seen = []

    def cell_progress(self, cell, fraction, label):
        self.seen.append((cell, fraction, label))


def test_progress_of_a_chunked_cell_weighs_its_chunks_by_their_logs():
    cell = Cell(0, "large", None)
    units = [Chunk(cell, 0, 2, 0, 6), Chunk(cell, 1, 2, 6, 8)]
    reporter = _Reporter()
    done, failed = [], []
    assembly = _Assembly({}, units, lambda c, *r: done.append(c),
                         lambda c, e: failed.append(e), reporter)
    assembly.progress(units[0], 0.5, "logs 3/6")
    assembly.progress(units[1], 0.5, "logs 1/2")
    assert reporter.seen[-1] == ("large/*/seed=0", 4 / 8, "logs 4/8 in 2 chunks")
    # a chunk that fails fails its cell once, naming its logs; the other chunk is then
    # ignored (no merge, no second failure)
    assembly.failed_unit(units[1], CellError(units[1].id, "the worker running it was killed "
                                             "by SIGKILL", ""))
    assembly.done(units[0], ("part", []), 1.0, [])
    assembly.progress(units[0], 1.0, "")
    assert done == [] and len(failed) == 1
    # the cell's chunks still queued are dropped, not run (a plugin that hangs would
    # otherwise hang every chunk in turn)
    assert assembly.skip(Chunk(cell, 0, 2, 0, 6)) and not assembly.skip(cell)
    assert not assembly.skip(Chunk(Cell(1, "large", None), 0, 2, 0, 6))
    assert failed[0].cell_id == "large/*/seed=0"
    assert failed[0].message == ("the worker running it was killed by SIGKILL (in logs 6-7, "
                                 "chunk 2 of 2)")


def _outputs(run_dir: Path) -> tuple:
    cells = {}
    for p in sorted((run_dir / "cells").glob("*.json")):
        payload = json.loads(p.read_text())
        payload.pop("seconds"), payload.pop("checksum")  # the time it took differs
        cells[p.name] = payload
    return ((run_dir / "results.csv").read_bytes(), (run_dir / "results.jsonl").read_bytes(),
            gzip.decompress((run_dir / "estimates.csv.gz").read_bytes()),
            (run_dir / "errors.log").read_bytes(), cells)


@pytest.mark.slow
def test_chunked_cells_give_the_bytes_of_one_worker_locally_and_on_dask(tmp_path, mixed):
    pytest.importorskip("dask.distributed")
    # one large cell cut into 4 chunks beside small whole cells; a user's estimator whose
    # impossible values in the cells are recorded as nan (the guards hold per chunk): its
    # errors are listed in the order of the logs whatever the chunks
    sc = mixed
    runs = {name: run_scenario(sc, out=tmp_path / name, quiet=True, report=False,
                               paths=[PLUGINS], **kw)
            for name, kw in [("one", dict(workers=1)), ("two", dict(workers=2)),
                             ("dask", dict(workers=2, executor="dask"))]}
    one = _outputs(runs["one"])
    lines = [x for x in one[3].decode().splitlines() if "'huge_in_cell'" in x]
    assert len(lines) == 8 * 3  # every log, every target
    assert len(set(lines)) > 3  # they name each log's own bounds: their order is checked
    assert _outputs(runs["two"]) == one
    assert _outputs(runs["dask"]) == one
