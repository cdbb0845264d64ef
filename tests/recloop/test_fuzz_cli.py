"""The command line under random arguments and damaged run directories (issue 16, section 4).

Each example copies a finished run directory, damages it in up to three ways (cell files
truncated, emptied, copied over one another or removed; ``environment.json``,
``scenario.toml`` or ``results.jsonl`` damaged or removed; temporary files and a stale lock
left behind; folders replaced by files) and calls ``recloop._cli.main`` in-process with a
random combination of commands and options. Whatever happens, the exit code is 0, 1 or 2,
nothing escapes as an exception, standard error holds no traceback, and no failure is an
unexpected one (those write their traceback to a ``recloop-errors-*.log`` file).
Users' plugins take part (issue 25, section 5): a scenario naming the hostile plugins of
``tests/fixtures/plugins`` that misbehave at validation (``sys.exit`` at import and in a
call, writes into shared inputs, impossible estimates), with or without their ``--path``,
and a ``--path`` folder whose ``logging.py`` would shadow the standard library. (The ones
that end the process with ``os._exit`` or hang are tested in a subprocess by
``test_guests.py``: in this process a failed guard would end pytest with a success.)
About a minute (200 examples; most run or resume a 6-cell selfcheck scenario).
"""

import contextlib
import io
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from recloop._cli import main

TINY = """
[run]
name = "tiny"
replicates = 2

[[agents]]
name = "a0"
kind = "fixed_arm"

[[evaluations]]
kind = "selfcheck"
ticks = 2
sweep = { n = [10, 20, 30] }
"""

OTHER = TINY.replace("ticks = 2", "ticks = 3")

PLUGINS = Path(__file__).resolve().parents[1] / "fixtures" / "plugins"

HOSTILE = """
[run]
name = "hostile"

[world]
preset = "bred_linear"

[[agents]]
name = "quitter"
kind = "python"
factory = "hostile:ExitsAtValidation"

[[evaluations]]
kind = "ope"
n_logs = 2
n_rounds = 200
estimators = ["ips", "hostile:exits", { name = "imported", factory = "exits_at_import:ips" },
              "hostile:writes_through_base", "hostile:huge", "hostile:inverted_interval",
              "hostile:negative_stderr", "hostile:writes_action_dist"]
"""


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    base = tmp_path_factory.mktemp("finished")
    (base / "tiny.toml").write_text(TINY)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert main(["run", str(base / "tiny.toml"), "--out", str(base / "out"), "-q",
                     "--workers", "1"]) == 0
    return base / "out" / "tiny"


def _cells(run_dir: Path) -> list[Path]:
    return sorted((run_dir / "cells").glob("*.json")) if (run_dir / "cells").is_dir() else []


def _replace_with_file(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()
    path.write_text("not a folder")


DAMAGES = {
    "truncate-cell": lambda d, j: _cells(d) and _cells(d)[j % len(_cells(d))].write_bytes(
        _cells(d)[j % len(_cells(d))].read_bytes()[: 37 * (j + 1)]),
    "empty-cell": lambda d, j: _cells(d) and _cells(d)[j % len(_cells(d))].write_bytes(b""),
    "garbage-cell": lambda d, j: _cells(d) and _cells(d)[j % len(_cells(d))].write_bytes(
        b"\xff\x00[{\"" * j),
    "copy-cell": lambda d, j: len(_cells(d)) > 1 and shutil.copy(
        _cells(d)[0], _cells(d)[1 + j % (len(_cells(d)) - 1)]),
    "remove-cell": lambda d, j: _cells(d) and _cells(d)[j % len(_cells(d))].unlink(),
    "stray-cell": lambda d, j: (d / "cells").is_dir() and (d / "cells" / "x.json").write_text(
        "{\"cell\": 1}"),
    "damage-env": lambda d, j: (d / "environment.json").write_text("{\"start\": [" * j),
    "remove-env": lambda d, j: (d / "environment.json").unlink(missing_ok=True),
    "damage-scenario": lambda d, j: (d / "scenario.toml").write_text("[run\nname = " * j),
    "other-scenario": lambda d, j: (d / "scenario.toml").write_text(OTHER),
    "remove-scenario": lambda d, j: (d / "scenario.toml").unlink(missing_ok=True),
    "truncate-results": lambda d, j: (d / "results.jsonl").exists() and (
        d / "results.jsonl").write_bytes((d / "results.jsonl").read_bytes()[: 50 * j]),
    "remove-results": lambda d, j: (d / "results.jsonl").unlink(missing_ok=True),
    "wrong-results": lambda d, j: (d / "results.jsonl").write_text("{\"a\": 1}\n[1]\n"),
    "temporary-files": lambda d, j: [(p / f".f{j}.json.{j}.tmp").write_text("half")
                                     for p in (d, d / "cells") if p.is_dir()],
    "stale-lock": lambda d, j: (d / ".lock").write_text(f"{999_000_000 + j}\n"),
    "lock-garbage": lambda d, j: (d / ".lock").write_text("not a pid" * j),
    "cells-is-a-file": lambda d, j: _replace_with_file(d / "cells"),
    "figures-is-a-file": lambda d, j: _replace_with_file(d / "figures"),
    "report-is-a-folder": lambda d, j: not (d / "report.md").is_dir() and (
        (d / "report.md").unlink(missing_ok=True), (d / "report.md").mkdir()),
}


@st.composite
def arguments(draw, base: Path, run_dir: Path):
    scenario = str(base / "tiny.toml")
    command = draw(st.sampled_from(["run", "run", "run", "report", "report", "validate",
                                    "list", "frobnicate", None]))
    if command is None:
        return draw(st.sampled_from([[], ["--version"], ["--help"], ["-x"]]))
    if command == "list":
        return ["list"]
    if command == "report":
        target = draw(st.sampled_from([str(run_dir), str(run_dir), str(base), str(base / "no"),
                                       scenario]))
        return ["report", target]
    files = draw(st.one_of(
        st.just([scenario]), st.just([scenario]), st.just([scenario]),
        st.lists(st.sampled_from([scenario, str(base / "other.toml"),
                                  str(base / "missing.toml"), str(base), "/dev/null",
                                  "quickstart", str(base / "hostile.toml")]),
                 min_size=1, max_size=2)))
    if command == "validate":
        path = draw(st.sampled_from([[], [], ["--path", str(PLUGINS)],
                                     ["--path", str(base / "shadow")]]))
        return ["validate", *files, *path]
    args = ["run", *files]
    if "quickstart" in files:  # a real run of it is too slow here: plan it only
        args.append("--dry-run")
    args += draw(st.sampled_from([["--out", str(base / "out")]] * 6
                                 + [["--out", scenario], ["--out", str(base / "new" / "x")]]))
    for option, values, p in (("--resume", None, 0.6), ("--dry-run", None, 0.1),
                              ("--force", None, 0.2), ("-q", None, 0.5),
                              ("--workers", ["1", "1", "1", "0", "x"], 0.3),
                              ("--seed", ["0", "3", "3", "-1", str(2**70), "s"], 0.2),
                              ("--path", [str(base), str(base), str(base / "nope"),
                                          str(PLUGINS), str(PLUGINS), str(base / "shadow")],
                               0.3)):
        if draw(st.floats(0, 1)) < p:
            args += [option] if values is None else [option, draw(st.sampled_from(values))]
    if draw(st.integers(0, 9)) == 0:
        # only malformed addresses: a well-formed one would wait for a scheduler
        args += ["--executor", draw(st.sampled_from(["dask", "local", "spark"])),
                 "--scheduler", draw(st.sampled_from(["not an address", "tcp://h:99999",
                                                      "tcp://[::1"]))]
    if "--workers" not in args:
        args += ["--workers", "1"]
    return args


@pytest.mark.slow
@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_random_arguments_on_damaged_run_directories(finished, data):
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        (base / "tiny.toml").write_text(TINY)
        (base / "other.toml").write_text(OTHER)
        (base / "hostile.toml").write_text(HOSTILE)
        (base / "shadow").mkdir()
        (base / "shadow" / "logging.py").write_text("raise RuntimeError('shadowed')\n")
        run_dir = base / "out" / "tiny"
        shutil.copytree(finished, run_dir)
        for name, j in data.draw(st.lists(st.tuples(st.sampled_from(sorted(DAMAGES)),
                                                    st.integers(0, 5)), max_size=3),
                                 label="damages"):
            DAMAGES[name](run_dir, j)
        argv = data.draw(arguments(base, run_dir), label="argv")
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
        stderr = err.getvalue()
        event(f"{argv[0] if argv else 'none'} exit {code}")
        assert code in (0, 1, 2), (argv, code, stderr)
        assert "Traceback" not in stderr, (argv, stderr)
        assert "recloop-errors-" not in stderr, (argv, stderr)  # no unexpected failure
