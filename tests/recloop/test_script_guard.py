"""``recloop.run`` from a plain script (issue 37): recloop's workers and guests never import
the script, so a call outside ``if __name__ == "__main__":`` works; a Dask LocalCluster's
workers do import it, and there recloop says so before any worker starts."""

import subprocess
import sys
import textwrap

import pytest

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]


def _script(tmp_path, body):
    path = tmp_path / "study.py"
    path.write_text(textwrap.dedent(body))
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                          cwd=tmp_path, timeout=300)


@pytest.mark.parametrize(("body", "unguarded"), [
    ("from recloop._api import _unguarded_script_call as f\nprint(f())\n", True),
    ("from recloop._api import _unguarded_script_call as f\n"
     "if __name__ == '__main__':\n    print(f())\n", False),
    ("from recloop._api import _unguarded_script_call as f\n"
     "def main():\n    print(f())\n\nmain()\n", True),
    ("from recloop._api import _unguarded_script_call as f\n"
     "def main():\n    print(f())\n\nif '__main__' == __name__:\n    main()\n", False),
])
def test_the_call_site_is_read_from_the_script(tmp_path, body, unguarded):
    out = _script(tmp_path, body)
    assert out.returncode == 0, out.stderr
    assert (out.stdout.strip() != "None") is unguarded, out.stdout


def test_an_unguarded_dask_run_is_refused_before_it_starts(tmp_path):
    out = _script(tmp_path, """
        import recloop
        recloop.run("quickstart", workers=2, executor="dask", progress=False)
    """)
    assert out.returncode == 1
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith('RuntimeError: recloop.run(executor="dask") is called at the top '
                           "level of the script")
    assert 'study.py, line 3, outside `if __name__ == "__main__":`' in last


@pytest.mark.slow
def test_an_unguarded_script_runs_with_workers_and_a_plugin(tmp_path):
    # the user's estimator runs in a guest and recloop's cells in two workers: none of them
    # imports the unguarded script, so nothing runs twice and every cell succeeds
    (tmp_path / "myest.py").write_text("import evaluators\n\ndef est(log, action_dist):\n"
                                       "    return evaluators.ips(log, action_dist)\n")
    out = _script(tmp_path, """
        import recloop
        print("script body ran")
        sc = {"run": {"name": "g"}, "world": {"preset": "bred_linear"},
              "evaluations": [{"kind": "ope", "n_rounds": 50, "n_logs": 2,
                               "targets": [{"name": "u", "policy": "uniform"}],
                               "estimators": ["ips", "myest:est"]}]}
        res = recloop.run(sc, workers=2, progress=False, out="runs")
        rows = res.full_summary()
        print(sorted(set(rows["variant"])), int(rows["n_nan"].sum()), rows["estimate"].nunique())
    """)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("script body ran") == 1
    # both estimators gave their numbers (the plugin is IPS itself: the same estimates)
    assert "['est', 'ips'] 0 1" in out.stdout, out.stdout
