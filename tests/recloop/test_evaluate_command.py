"""``recloop evaluate LOG --target TARGET`` (issue 37): the table and one sentence on the
terminal, report.md / report.html / estimates.csv / the figure on disk, the same bytes on
every run, exit 2 and nothing written on bad input, user strings inert in the report."""

import csv
import io
import os
import re

import numpy as np
import pytest

from recloop._cli import main
from tests.recloop import chromium

N = 200
#: Ids and column names a hostile (or unlucky) file may hold.
HOSTILE = ["<script>window.__pwned=1</script>", "[x](javascript:alert%281%29)",
           "![y](/etc/passwd)", "a|b`c", "**bold** _e_ # h"]


def _log_csv(path, *, actions=("hat", "scarf", "shoes"), context_name="age", seed=0, n=N,
             edit=None):
    g = np.random.default_rng(seed)
    rows = []
    for _ in range(n):
        a = int(g.integers(0, len(actions)))
        rows.append({"item_id": actions[a], "click": int(g.random() < 0.2 + 0.2 * (a == 0)),
                     "propensity_score": 1 / len(actions),
                     context_name: int(g.integers(18, 70))})
    if edit:
        edit(rows)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return path


def _run(*args):
    out, err = io.StringIO(), io.StringIO()
    import contextlib

    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["evaluate", *map(str, args)])
    return code, out.getvalue(), err.getvalue()


def _files(folder):
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


@pytest.fixture(scope="module")
def done(tmp_path_factory):
    base = tmp_path_factory.mktemp("evaluate")
    log = _log_csv(base / "log.csv")
    np.save(base / "t.npy", np.array([0.6, 0.2, 0.2]))
    code, out, err = _run(log, "--target", base / "t.npy", "--out", base / "ev")
    assert code == 0, err
    return base, out


def test_the_terminal_shows_the_table_and_one_sentence(done):
    base, out = done
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["estimator", "value", "stderr"]
    assert sum(ln.startswith("* ") for ln in lines) == 1
    sentence = next(ln for ln in lines if ln.startswith("Use "))
    assert re.match(r"Use \S+: -?[0-9.e-]+, 95% interval \[.*\]\. How sure: ", sentence)
    assert lines[-1] == f"report: {base / 'ev' / 'report.html'}"


def test_the_files_and_the_same_bytes_on_every_run(done, tmp_path):
    base, _ = done
    files = _files(base / "ev")
    assert set(files) == {"estimates.csv", "report.md", "report.html", "figures/estimates.png"}
    rows = list(csv.DictReader(io.StringIO(files["estimates.csv"].decode())))
    assert [r["selected"] for r in rows].count("yes") == 1
    assert float(rows[0]["value"]) == float(repr(float(rows[0]["value"])))
    # again, elsewhere (the reports differ by their command line only), and over the first
    code, _, err = _run(base / "log.csv", "--target", base / "t.npy", "--out", tmp_path / "b")
    assert code == 0, err
    other = _files(tmp_path / "b")
    for name in ("estimates.csv", "figures/estimates.png"):
        assert other[name] == files[name]
    strip = re.compile(rb"- command: .*")
    assert strip.sub(b"", other["report.md"]) == strip.sub(b"", files["report.md"])
    code, _, err = _run(base / "log.csv", "--target", base / "t.npy", "--out", base / "ev")
    assert code == 0 and _files(base / "ev") == files
    assert not [p for p in base.iterdir() if p.name.startswith(".")]  # no temporary left


def _edit_row(j, **values):
    def edit(rows):
        rows[j].update(values)
    return edit


@pytest.mark.parametrize(("edit", "target", "match"), [
    pytest.param(_edit_row(5, propensity_score=0), None, r"log\.csv:7: column "
                 r"'propensity_score'.*must be in \(0, 1\]; got 0\.0", id="pscore-zero"),
    pytest.param(_edit_row(9, click="yes"), None, r"log\.csv:11: column 'click' \(`reward`\) "
                 r"must hold numbers; got 'yes'", id="text-reward"),
    pytest.param(_edit_row(3, propensity_score=""), None, r"log\.csv:5: .*got no value",
                 id="nan-pscore"),
    pytest.param(None, [0.5, 0.6, 0.2], r"`target` must be probabilities .*sum 1\.3",
                 id="target-sum"),
    pytest.param(None, [0.5, 0.5], r"`target` must be action probabilities of shape",
                 id="target-shape"),
])
def test_bad_input_exits_2_and_writes_nothing(tmp_path, edit, target, match):
    log = _log_csv(tmp_path / "log.csv", edit=edit)
    np.save(tmp_path / "t.npy", np.array(target or [0.6, 0.2, 0.2]))
    code, out, err = _run(log, "--target", tmp_path / "t.npy", "--out", tmp_path / "ev")
    assert code == 2 and out == ""
    assert err.startswith("recloop evaluate: ") and len(err.splitlines()) == 1
    assert re.search(match, err), err
    assert not (tmp_path / "ev").exists() and not list(tmp_path.glob(".ev*"))


def test_bad_options_and_foreign_folders_exit_2(tmp_path):
    log = _log_csv(tmp_path / "log.csv")
    np.save(tmp_path / "t.npy", np.array([0.6, 0.2, 0.2]))
    code, _, err = _run(log, "--target", tmp_path / "t.npy", "--reward", "clik",
                        "--out", tmp_path / "ev")
    assert code == 2 and "no column 'clik'" in err and "Did you mean 'click'" in err
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    code, _, err = _run(log, "--target", tmp_path / "t.npy", "--out", tmp_path / "mine")
    assert code == 2 and "holds other files (notes.txt)" in err
    assert os.listdir(tmp_path / "mine") == ["notes.txt"]
    code, _, err = _run(tmp_path / "nope.csv", "--target", tmp_path / "t.npy")
    assert code == 2 and "nope.csv: no such file" in err
    code, _, err = _run(log, "--target", "pkg_missing_xyz:policy", "--out", tmp_path / "x")
    assert code == 2 and "`target` must be an importable" in err


def test_a_policy_by_import_path(tmp_path):
    (tmp_path / "mypolicy.py").write_text(
        "import numpy as np\n\ndef policy(context):\n"
        "    p = np.full((len(context), 3), 0.1)\n    p[:, 0] = 0.8\n    return p\n\n"
        "def broken(context):\n    raise KeyError('weights')\n\n"
        "def wrong(context):\n    return np.ones((len(context), 2))\n")
    log = _log_csv(tmp_path / "log.csv")
    code, out, err = _run(log, "--target", "mypolicy:policy", "--path", tmp_path,
                          "--out", tmp_path / "ev", "--select", "none")
    assert code == 0, err
    code, out, err = _run(log, "--target", "mypolicy:broken", "--path", tmp_path,
                          "--out", tmp_path / "ev2")
    assert code == 2 and "mypolicy:broken raised KeyError: 'weights'" in err
    code, out, err = _run(log, "--target", "mypolicy:wrong", "--path", tmp_path,
                          "--out", tmp_path / "ev2")
    assert code == 2 and "mypolicy:wrong(context)" in err and "shape" in err, err
    assert not (tmp_path / "ev2").exists()
    # the policy ran in a guest: recloop's own process never imported it
    import sys

    assert "mypolicy" not in sys.modules and str(tmp_path) not in sys.path


def test_a_policy_cannot_change_recloops_numbers_or_end_it(tmp_path):
    """A policy given by import path is users' code (issue 36): imported and called in a
    guest process, it can neither replace recloop's estimators nor end the command."""
    log = _log_csv(tmp_path / "log.csv")
    p = np.full(3, 0.1)
    p[0] = 0.8
    np.save(tmp_path / "t.npy", p)
    (tmp_path / "sneaky.py").write_text(
        "import numpy as np\nimport evaluators._ope as ope\n"
        "ope._mean_estimate = lambda *a, **k: (_ for _ in ()).throw(RuntimeError('x'))\n"
        "import evaluators\nevaluators.ips = lambda *a, **k: 42.0\n"
        "def policy(context):\n"
        "    p = np.full((len(context), 3), 0.1)\n    p[:, 0] = 0.8\n    return p\n"
        "def leave(context):\n    import os\n    os._exit(0)\n")
    code, _, err = _run(log, "--target", tmp_path / "t.npy", "--out", tmp_path / "plain",
                        "--select", "none")
    assert code == 0, err
    code, _, err = _run(log, "--target", "sneaky:policy", "--path", tmp_path,
                        "--out", tmp_path / "sneaky", "--select", "none")
    assert code == 0, err
    assert ((tmp_path / "plain" / "estimates.csv").read_bytes()
            == (tmp_path / "sneaky" / "estimates.csv").read_bytes())
    code, _, err = _run(log, "--target", "sneaky:leave", "--path", tmp_path,
                        "--out", tmp_path / "gone")
    assert code == 2 and "its process ended before returning probabilities" in err, err
    assert not (tmp_path / "gone").exists()


def test_a_failed_write_leaves_the_previous_evaluation(done, monkeypatch):
    base, _ = done
    before = _files(base / "ev")
    import recloop._document

    def fail(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(recloop._document, "to_html", fail)
    code, _, err = _run(base / "log.csv", "--target", base / "t.npy", "--out", base / "ev",
                        "--seed", "5")
    assert code == 1 and "No space left on device" in err and "nothing was written" in err
    assert _files(base / "ev") == before
    assert not [p for p in base.iterdir() if p.name.startswith(".")]


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    base = tmp_path_factory.mktemp("hostile")
    log = _log_csv(base / "log.csv", actions=HOSTILE[:3], context_name=HOSTILE[3])
    np.save(base / "t.npy", np.array([0.6, 0.2, 0.2]))
    code, _, err = _run(log, "--target", base / "t.npy", "--out", base / "ev")
    assert code == 0, err
    return base / "ev"


def test_user_strings_are_inert_in_report_md(hostile):
    """report.md read by a CommonMark parser: no raw HTML, no link, the one image is the
    evaluation's own figure, and every hostile id reads back as the text it is."""
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark").enable(["table"]).parse((hostile / "report.md").read_text())
    text = []
    for t in tokens:
        assert t.type != "html_block", t.content[:80]
        for c in t.children or ():
            assert c.type not in ("html_inline", "link_open"), c
            if c.type == "image":
                assert c.attrs["src"] == "figures/estimates.png", c.attrs
            text.append(c.content)
    shown = "".join(text)
    for s in HOSTILE[:4]:  # the actions' ids and the context column's name
        assert s in shown, s


@pytest.mark.slow
@pytest.mark.skipif(chromium.find() is None and not os.environ.get("CI"),
                    reason="no chromium here (apt-get install chromium; CI installs it)")
def test_report_html_in_a_browser(hostile):
    with chromium.Browser() as browser:
        browser.send("Network.enable", session=browser.session)
        browser.open((hostile / "report.html").as_uri())
        assert browser.evaluate("typeof window.__pwned") == "undefined"
        assert browser.evaluate("document.querySelectorAll('a[href]').length") == 0
        images = browser.evaluate("Array.from(document.images, im => [im.src.slice(0, 22), "
                                  "im.naturalWidth])")
        assert images == [["data:image/png;base64,", images[0][1]]] and images[0][1] > 0
        text = browser.evaluate("document.body.innerText")
        for s in HOSTILE[:3]:
            assert s in text  # shown as text, exactly
        requests = [e["params"]["request"]["url"] for e in browser.events
                    if e.get("method") == "Network.requestWillBeSent"]
        assert all(u.startswith(("file:", "data:")) for u in requests), requests
        # the estimates table sorts like the run report's
        header = browser.evaluate("Array.from(document.querySelector('table').tHead.rows[0]"
                                  ".cells, c => c.textContent.trim())")
        assert header[:3] == ["estimator", "value", "stderr"]


@pytest.mark.parametrize(("n", "actions", "match"), [
    (1, ("hat", "scarf", "shoes"), r"`log` must be a log of at least 2 records"),
    (20, ("hat",), r"`log` must be a log of at least 2 actions"),
])
def test_logs_that_cannot_answer_exit_2(tmp_path, n, actions, match):
    log = _log_csv(tmp_path / "log.csv", actions=actions, n=n)
    np.save(tmp_path / "t.npy", np.full(len(actions), 1 / len(actions)))
    code, _, err = _run(log, "--target", tmp_path / "t.npy", "--out", tmp_path / "ev")
    assert code == 2 and re.search(match, err), err
    assert not (tmp_path / "ev").exists()


def test_a_10_gb_log_is_refused_by_its_size(tmp_path):
    big = tmp_path / "big.csv"
    with open(big, "wb") as fh:  # sparse: no disk used, and never read
        fh.truncate(10 * 2**30)
    np.save(tmp_path / "t.npy", np.array([0.5, 0.5]))
    code, _, err = _run(big, "--target", tmp_path / "t.npy", "--out", tmp_path / "ev")
    assert code == 2 and "big.csv is 10.00 GiB" in err and "--force" in err
    assert not (tmp_path / "ev").exists()
