"""Reports: paths, links and markup in user-controlled strings (issue 36, items 1 and 2).

A hostile trial found that a scenario's ``description`` line ``![x](/proc/self/environ)``
embedded the environment (secrets included) into report.html as a "PNG", that
``[x](javascript:...)`` became a link through the description, estimator parameters,
``--set`` and ``environment.json``, that a backtick in ``--out`` broke out of a code span, that
newlines in a description started a heading and a table row, and that report.md carried raw
HTML. Each hostile string below is put into *every* user-controlled field of one run
directory at once -- the scenario's name and description, the names of agents, evaluation,
estimator (variant) and metric, a parameter and its swept values, a kind's own section (a
plugin kind's Markdown lines), the command line, out dir and times of ``environment.json``
-- as a run directory received from someone else would,
and the report is rebuilt from it. Then:

* report.md, parsed by a CommonMark parser (``markdown-it-py``), has the same blocks as the
  report of a plain string (no heading, table row, list or HTML block was added), no image
  but recloop's own figures, no link but to the run's own files and anchors, no raw HTML,
  and the description reads back as exactly the string (line breaks as spaces);
* report.html has only the tags and attributes recloop writes (no event handler, no second
  script), its links and images are recloop's own (every ``data:`` image is byte for byte a
  PNG recloop drew under ``figures/``), the same elements as the plain report, and carries
  the Content-Security-Policy;
* in headless Chromium (DevTools protocol) the page makes no request but itself and its
  ``data:`` images, runs no script but its own, opens no dialog, and shows no secret.

A secret is set in this process's environment, so that reading ``/proc/self/environ``
anywhere would show it; a FIFO is among the paths (reading it would hang: an alarm ends the
test instead).
"""

from __future__ import annotations

import base64
import hashlib
import html.parser
import json
import os
import re
import shutil
import signal
import stat
import tomllib
from contextlib import contextmanager
from pathlib import Path

import pytest

from recloop import _document as D
from recloop import _rundir
from recloop._cli import main
from recloop._report import write_report
from recloop._toml import dumps_toml

SECRET = "hostile-report-secret-5e1f0c7a"
SECRET_VAR = "RECLOOP_HOSTILE_REPORT_SECRET"

SCENARIO = """
[run]
name = "hostile"
description = "a plain description"

[[agents]]
name = "a0"
kind = "fixed_arm"

[[agents]]
name = "a1"
kind = "fixed_arm"
arm = 1

[[evaluations]]
kind = "selfcheck"
agents = ["a0", "a1"]
ticks = 2
"""

#: The hostile strings, by readable id; ``{fifo}`` and ``{secret_file}`` are paths the
#: fixture makes.
HOSTILE = {
    "plain": "plain text",
    "javascript-link": "[click](javascript:alert(document.domain))",
    "data-link": "[x](data:text/html;base64,PHNjcmlwdD53aW5kb3cuX19wd25lZD0xPC9zY3JpcHQ+)",
    "image-proc-environ": "![x](/proc/self/environ)",
    "image-relative-path": "![x](../../../../etc/hostname)",
    "image-secret-file": "![x]({secret_file})",
    "image-fifo": "![x]({fifo})",
    "image-dev-zero": "![x](/dev/zero)",
    "image-figure-of-the-run": "![x](figures/selfcheck__mean_reward.png)",
    "autolink": "<javascript:alert(1)> <http://127.0.0.1:9/x.png>",
    "reference-link": "[x]\n\n[x]: javascript:alert(1)",
    "backticks": "``a`` ` `</code><script>window.__pwned=1</script>``` x",
    "newline-heading-table": "ok\n# injected heading\n\n| a | b |\n|---|---|\n| c | d |\n- item",
    "crlf-and-line-separators": "a\r\n## h2\u2028### h3\u2029> quote\x0b\x0c---\n===",
    "script-tag": "<script>window.__pwned=1</script>",
    "img-onerror": '<img src=x onerror="window.__pwned=1">',
    "style-tag": "<style>body{display:none}</style><link rel=stylesheet href=http://127.0.0.1:9/>",
    "attribute-breakout": "\" onmouseover=\"window.__pwned=1\" x='",
    "html-entities": "&lt;script&gt;window.__pwned=1&lt;/script&gt; &#106;avascript:&amp;",
    "unicode-bidi": "safe\u202egpj.exe\u202c \u2066x\u2069 \u200fy",
    "control-characters": "a\x00b\x1b[31mred\x1b[0m\x7f\x9b",
    "markdown-emphasis": "**bold** _em_ ~~strike~~ \\*esc\\* 1. 2) + - = *",
    "very-long": "A" * 100_000 + "<script>window.__pwned=1</script>",
}
IDS = list(HOSTILE)
#: What must never reach a report: control characters but tab and newline, the Unicode
#: bidirectional controls, line and paragraph separators.
INVISIBLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e"
                       "\u2066-\u2069\u2028\u2029]")


class Hung(BaseException):
    """A read that would hang (not an ``OSError``, which code under test may catch)."""


@contextmanager
def alarm(seconds: int):
    """End a read that would hang (a FIFO) with an error instead."""
    def ring(signum, frame):
        signal.alarm(seconds)  # again, should the code under test swallow this one
        raise Hung(f"no answer in {seconds} s (a FIFO read?)")

    old = signal.signal(signal.SIGALRM, ring)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A finished run of SCENARIO, a secret in the environment and in a file, a FIFO."""
    base = tmp_path_factory.mktemp("hostile-report")
    old = os.environ.get(SECRET_VAR)
    os.environ[SECRET_VAR] = SECRET
    (base / "secret.txt").write_text(f"{SECRET}\n")
    os.mkfifo(base / "fifo")
    (base / "s.toml").write_text(SCENARIO)
    assert main(["run", str(base / "s.toml"), "--out", str(base / "out"), "--workers", "1",
                 "-q"]) == 0
    yield {"base": base, "run": base / "out" / "hostile",
           "paths": {"fifo": str(base / "fifo"), "secret_file": str(base / "secret.txt")}}
    if old is None:
        os.environ.pop(SECRET_VAR, None)
    else:
        os.environ[SECRET_VAR] = old


def _hostile(world, case: str) -> str:
    return HOSTILE[case].replace("{fifo}", world["paths"]["fifo"]).replace(
        "{secret_file}", world["paths"]["secret_file"])


def _section(s: str):
    """A kind's own section with the string in every place of every block."""
    def report(rows, scenario, summary):
        return [D.Paragraph(s), D.Note("note: ", s), D.Table(
            (s, "note"), [[s, D.Code(s)], [D.Strong(s), D.Term(s, s)]]),
            D.Bullets([[s], [D.Em(s)]]), D.Paragraph(D.Strong(s), " ", D.Code(s)),
            D.Side(D.Figure(s, "selfcheck__mean_reward.png", note=s),
                   D.Table(("a",), [[s]]))]
    return report


def _received(world, case: str, dest: Path) -> Path:
    """A copy of the run with the hostile string in every user-controlled field."""
    s = _hostile(world, case)
    shutil.copytree(world["run"], dest)
    scenario = tomllib.loads((dest / "scenario.toml").read_text())
    names = {"a0": s, "a1": s + " 1", "selfcheck": s + " ev"}
    scenario["run"]["name"] = s
    scenario["run"]["description"] = s
    scenario["world"] = {"calibrate_from": s}
    for a in scenario["agents"]:
        a["name"] = names[a["name"]]
    ev = scenario["evaluations"][0]
    ev["name"] = names["selfcheck"]
    ev["agents"] = [names[a] for a in ev["agents"]]
    ev["note"] = s
    ev["sweep"] = {"note": [s, s + " 2"]}
    (dest / "scenario.toml").write_text(dumps_toml(scenario))

    def hostile_row(r):
        return dict(r, evaluation=names["selfcheck"], agent=names[r["agent"]], variant=s,
                    metric=s if r["tick"] else r["metric"],
                    params={"note": s if r["agent"] == "a0" else s + " 2"})

    rows = [hostile_row(r) for r in _rundir.read_results(dest)]
    estimates = [hostile_row(r) for r in _rundir.read_estimates(dest)]
    _rundir.write_tables(dest, [{"rows": rows, "estimates": estimates}])
    env = json.loads((dest / "environment.json").read_text())
    env.update(command=["recloop", "run", s, "--out", s, "--set", f"run.description={s}"],
               cwd=s, start=s, end=s, world_sha256=s, resumed=[s], cell_seconds={s: 1.5})
    (dest / "environment.json").write_text(json.dumps(env))
    (dest / "errors.log").write_text(f"an earlier error: {s}\n")
    return dest


_RENDERED: dict[str, tuple[Path, str, str]] = {}


@pytest.fixture
def rendered(world, monkeypatch, tmp_path_factory):
    """``render(case) -> (run_dir, report.md, report.html)``, once per case."""
    import dataclasses

    from recloop._registry import registry

    def render(case: str):
        if case not in _RENDERED:
            kind = registry().evaluations["selfcheck"]
            with monkeypatch.context() as m:
                m.setitem(registry().evaluations, "selfcheck",
                          dataclasses.replace(kind, report=_section(_hostile(world, case))))
                run_dir = _received(world, case, tmp_path_factory.mktemp(case[:20]) / "run")
                with alarm(60):
                    write_report(run_dir)
            _RENDERED[case] = (run_dir, (run_dir / "report.md").read_text(),
                               (run_dir / "report.html").read_text())
        return _RENDERED[case]

    return render


# --- report.md ------------------------------------------------------------------------------

def _markdown(text: str):
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").enable(["table", "strikethrough"]).parse(text)


def _block_types(tokens) -> list[str]:
    return [t.type if t.type != "heading_open" else f"{t.type}:{t.tag}" for t in tokens
            if t.type != "inline"]


def _inline_text(token) -> str:
    return "".join(c.content for c in token.children or () if c.type in ("text",
                                                                         "code_inline"))


def _own_figures(run_dir: Path) -> dict[str, bytes]:
    return {f"figures/{p.name}": p.read_bytes() for p in (run_dir / "figures").iterdir()
            if stat.S_ISREG(os.lstat(p).st_mode)}


@pytest.mark.parametrize("case", IDS)
def test_report_md_renders_the_string_as_text(case, world, rendered):
    run_dir, md, _ = rendered(case)
    plain = _markdown(rendered("plain")[1])
    tokens = _markdown(md)
    # the same blocks as the plain string's report: nothing started a heading, a table
    # row, a list, a quote or an HTML block
    assert _block_types(tokens) == _block_types(plain)
    figures = _own_figures(run_dir)
    for t in tokens:
        assert t.type != "html_block", t.content[:80]
        for c in t.children or ():
            assert c.type != "html_inline", c.content[:80]
            if c.type == "image":
                assert c.attrs["src"] in figures, c.attrs
            if c.type == "link_open":
                assert D.SAFE_HREF.fullmatch(c.attrs["href"]), c.attrs
    # the description reads back as the string itself, as one line of text
    s = D.clean(_hostile(world, case)).strip()
    paragraphs = [_inline_text(tokens[j + 1]) for j, t in enumerate(tokens)
                  if t.type == "paragraph_open"]
    assert s in paragraphs
    # the command line is one code span, whole
    assert any(D.clean(" ".join(["recloop", "run", _hostile(world, case), "--out",
                                  _hostile(world, case), "--set",
                                  f"run.description={_hostile(world, case)}"]))
               in _inline_text(t) for t in tokens if t.type == "inline")
    assert SECRET not in md
    assert not INVISIBLE.search(md)


# --- report.html ----------------------------------------------------------------------------

ALLOWED_TAGS = {"html", "head", "meta", "title", "style", "body", "h1", "h2", "h3", "h4", "p",
                "ul", "li", "table", "thead", "tbody", "tr", "th", "td", "code", "strong", "em",
                "a", "figure", "figcaption", "img", "blockquote", "div", "nav", "span", "input",
                "button", "script"}


class _Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []
        self.data: dict[str, list[str]] = {}
        self._open: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag not in ("meta", "img", "input"):
            self._open.append(tag)

    def handle_endtag(self, tag):
        if self._open and self._open[-1] == tag:
            self._open.pop()

    def handle_data(self, data):
        self.text.append(data)
        if self._open:
            self.data.setdefault(self._open[-1], []).append(data)


def _page(text: str) -> _Page:
    p = _Page()
    p.feed(text)
    p.close()
    return p


def _counts(page: _Page) -> dict:
    out: dict = {}
    for tag, _ in page.tags:
        out[tag] = out.get(tag, 0) + 1
    return out


@pytest.mark.parametrize("case", IDS)
def test_report_html_renders_the_string_as_text(case, world, rendered):
    run_dir, _, text = rendered(case)
    page = _page(text)
    assert _counts(page) == _counts(_page(rendered("plain")[2]))
    figures = set(_own_figures(run_dir).values())
    for tag, attrs in page.tags:
        assert tag in ALLOWED_TAGS, tag
        for name in attrs:
            assert not name.startswith("on") and name != "style", (tag, name)
        if tag == "a":
            assert D.SAFE_HREF.fullmatch(attrs["href"]), attrs
        if tag == "img":
            src = attrs["src"]
            assert src.startswith("data:image/png;base64,"), src[:80]
            assert base64.b64decode(src.split(",", 1)[1]) in figures
    # one script and one style, those the policy names by their hashes
    (script,) = page.data["script"]
    (style,) = page.data["style"]
    (csp,) = [a["content"] for t, a in page.tags if t == "meta"
              and a.get("http-equiv") == "Content-Security-Policy"]
    for content in (script, style):
        digest = base64.b64encode(hashlib.sha256(content.encode()).digest()).decode()
        assert f"'sha256-{digest}'" in csp
    assert "default-src 'none'" in csp and "img-src data:" in csp
    # the string is on the page as text: the title, the description, the cells
    s = D.clean(_hostile(world, case))
    assert page.data["h1"] == [s]
    assert s in page.data["p"] and s in page.data["td"]
    assert SECRET not in text
    assert not INVISIBLE.search(text)


# --- in a browser ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def browser():
    from tests.recloop import chromium

    if chromium.find() is None and not os.environ.get("CI"):
        pytest.skip("no chromium here (apt-get install chromium; CI installs it)")
    with chromium.Browser() as b:
        b.send("Network.enable", session=b.session)
        b.send("Log.enable", session=b.session)
        yield b


def _visit(browser, path: Path) -> dict:
    url = path.resolve().as_uri()
    browser.open(url, width=1400, height=900)
    state = browser.evaluate(f"""({{pwned: typeof window.__pwned,
        scripts: document.scripts.length, secret: document.documentElement.outerHTML
            .includes({SECRET!r}) || document.body.innerText.includes({SECRET!r})}})""")
    events = list(browser.events)
    requests = [e["params"]["request"]["url"] for e in events
                if e.get("method") == "Network.requestWillBeSent"]
    state["requests"] = [u for u in requests if u != url
                         and not u.startswith("data:image/png;base64,")]
    state["dialogs"] = [e for e in events if e.get("method") == "Page.javascriptDialogOpening"]
    state["blocked"] = [e["params"] for e in events if e.get("method") == "Network.loadingFailed"]
    return state


@pytest.mark.parametrize("case", IDS)
def test_report_html_in_a_browser_requests_and_runs_nothing(case, rendered, browser):
    run_dir = rendered(case)[0]
    state = _visit(browser, run_dir / "report.html")
    assert state["requests"] == [] and state["dialogs"] == [] and state["blocked"] == []
    assert state["pwned"] == "undefined" and state["scripts"] == 1
    assert not state["secret"]


def test_the_policy_blocks_what_escaping_would_have_let_through(rendered, browser, tmp_path):
    """Defence in depth: markup planted into the page itself (as if escaping had failed)
    is stopped by the Content-Security-Policy -- no request, no script."""
    text = rendered("plain")[2].replace(
        "</body>", '<img src="http://127.0.0.1:9/x.png"><img src="file:///etc/hostname">'
        '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'
        '<link rel="stylesheet" href="http://127.0.0.1:9/s.css"></body>')
    (tmp_path / "planted.html").write_text(text)
    state = _visit(browser, tmp_path / "planted.html")
    assert state["pwned"] == "undefined"
    # the policy refuses before any request leaves: none sent, or each blocked
    for url in state["requests"]:
        assert any(b.get("blockedReason") == "csp" for b in state["blocked"]), url


# --- end to end: `recloop run` with hostile input, `recloop report` of a received run --------

def test_recloop_run_with_a_hostile_description_set_and_out_name(world, tmp_path):
    s = "![x](/proc/self/environ) [y](javascript:alert(1)) <img src=x onerror=alert(1)>"
    scenario = SCENARIO.replace('"a plain description"', json.dumps(s + "\n# heading"))
    (tmp_path / "s.toml").write_text(scenario)
    out = tmp_path / "o`ut ``x [z](javascript:alert(1))"
    with alarm(120):
        assert main(["run", str(tmp_path / "s.toml"), "--out", str(out), "--workers", "1",
                     "-q", "--set", f"run.description={s} {world['paths']['fifo']}"]) == 0
    run_dir = out / "hostile"
    md, text = (run_dir / "report.md").read_text(), (run_dir / "report.html").read_text()
    assert SECRET not in md and SECRET not in text
    tokens = _markdown(md)
    codes = [c.content for t in tokens for c in t.children or () if c.type == "code_inline"]
    assert any(c.startswith("recloop run ") and str(out) in c and c.endswith("-q --set "
               f"run.description={s} {world['paths']['fifo']}") for c in codes), codes
    assert not [c for t in tokens for c in t.children or () if c.type == "link_open"
                and not D.SAFE_HREF.fullmatch(c.attrs["href"])]
    assert [t.tag for t in tokens if t.type == "heading_open"].count("h1") == 1
    assert not [tag for tag, attrs in _page(text).tags
                if tag == "img" and not attrs["src"].startswith("data:image/png")]


def test_recloop_report_of_a_received_run_embeds_none_of_the_readers_files(world, tmp_path):
    """A run directory from someone else whose files point at the reader's: symbolic
    links to a secret, to the environment, to a FIFO; ``recloop report`` reads none of
    them into the report and writes through none of them."""
    run_dir = tmp_path / "received"
    shutil.copytree(world["run"], run_dir)
    secret = world["paths"]["secret_file"]
    mine = tmp_path / "readers-file.txt"
    mine.write_text("the reader's own file\n")
    figures = run_dir / "figures"
    for p in figures.iterdir():  # every figure the report will name, and some it won't
        p.unlink()
        p.symlink_to(secret)
    (figures / "planted.png").symlink_to("/proc/self/environ")
    (figures / "fifo.png").symlink_to(world["paths"]["fifo"])
    (run_dir / "fidelity.md").symlink_to("/proc/self/environ")
    (run_dir / "errors.log").symlink_to(mine)
    with alarm(120):
        assert main(["report", str(run_dir)]) == 0
    md, text = (run_dir / "report.md").read_text(), (run_dir / "report.html").read_text()
    assert SECRET not in md and SECRET not in text
    assert "fitted world" not in md  # fidelity.md is a link: not read
    assert mine.read_text() == "the reader's own file\n"
    images = [a["src"] for t, a in _page(text).tags if t == "img"]
    drawn = {p.read_bytes() for p in figures.iterdir() if not p.is_symlink()}
    assert images and all(base64.b64decode(s.split(",", 1)[1]) in drawn for s in images)


def test_an_error_message_reaches_errors_log_not_the_report(world, tmp_path, monkeypatch):
    import dataclasses

    from recloop._registry import registry

    s = "[x](javascript:alert(1))\n# heading <script>window.__pwned=1</script>"

    def figures(rows, out_dir, world_table):
        raise ValueError(s)

    def report(rows, scenario, summary):
        raise RuntimeError(s)

    kind = dataclasses.replace(registry().evaluations["selfcheck"], figures=figures,
                               report=report)
    monkeypatch.setitem(registry().evaluations, "selfcheck", kind)
    run_dir = tmp_path / "run"
    shutil.copytree(world["run"], run_dir)
    write_report(run_dir)
    md = (run_dir / "report.md").read_text()
    assert "figures failed (ValueError" in md and "section failed: RuntimeError" in md
    assert "javascript" not in md and "javascript" not in (run_dir / "report.html").read_text()
    assert s in (run_dir / "errors.log").read_text()


# --- figures: only recloop's own PNGs -----------------------------------------------------------

def _figure_case(name: str, tmp: Path, world) -> tuple[Path, str]:
    """A run directory whose figures/ holds one planted entry; the name asked for."""
    run = tmp / "run"
    (run / "figures").mkdir(parents=True)
    png = D.PNG_SIGNATURE + b"\x00" * 64
    f = run / "figures"
    if name == "symlink-to-secret":
        (f / "a.png").symlink_to(world["paths"]["secret_file"])
    elif name == "symlink-to-png":
        (tmp / "real.png").write_bytes(png)
        (f / "a.png").symlink_to(tmp / "real.png")
    elif name == "fifo":
        os.mkfifo(f / "a.png")
    elif name == "folder":
        (f / "a.png").mkdir()
    elif name == "not-a-png":
        (f / "a.png").write_text(f"{SECRET}\n")
    elif name == "too-large":
        with open(f / "a.png", "wb") as out:
            out.write(png)
            out.truncate(D.MAX_FIGURE_BYTES + 1)
    elif name == "figures-folder-is-a-link":
        (f).rmdir()
        (tmp / "elsewhere").mkdir()
        (tmp / "elsewhere" / "a.png").write_bytes(png)
        f.symlink_to(tmp / "elsewhere")
    elif name in ("parent-path", "absolute-path", "proc-environ", "no-extension"):
        pass
    else:
        raise AssertionError(name)
    asked = {"parent-path": "../secret.png", "absolute-path": "/etc/hostname",
             "proc-environ": "/proc/self/environ", "no-extension": "a"}.get(name, "a.png")
    return run, asked


FIGURE_CASES = ["symlink-to-secret", "symlink-to-png", "fifo", "folder", "not-a-png",
                "too-large", "figures-folder-is-a-link", "parent-path", "absolute-path",
                "proc-environ", "no-extension"]


@pytest.mark.parametrize("case", FIGURE_CASES)
def test_a_figure_is_embedded_only_from_recloops_own_png(case, world, tmp_path):
    run, name = _figure_case(case, tmp_path, world)
    with alarm(30):
        data, why = D.read_figure(run, name)
        md = D.to_markdown([D.Figure("t", name)], run)
        page = D.to_html([D.Figure("t", name)], run, title="t")
    assert data is None and why
    assert "![" not in md and "<img" not in page and why in page
    assert SECRET not in md and SECRET not in page


def test_a_figure_recloop_wrote_is_embedded(tmp_path):
    (tmp_path / "figures").mkdir()
    png = D.PNG_SIGNATURE + b"\x00" * 64
    (tmp_path / "figures" / "a.png").write_bytes(png)
    assert D.read_figure(tmp_path, "a.png") == (png, None)
    assert "![t](figures/a.png)" in D.to_markdown([D.Figure("t", "a.png")], tmp_path)
    assert base64.b64encode(png).decode() in D.to_html([D.Figure("t", "a.png")], tmp_path,
                                                       title="t")


def test_a_link_never_points_outside_the_run():
    for href in ("javascript:alert(1)", "data:text/html,x", "/etc/passwd", "../x",
                 "http://127.0.0.1/", "//host/x", "results.csv#x y", " results.csv"):
        with pytest.raises(ValueError, match="href"):
            D.Link("x", href)
    assert re.fullmatch(D.SAFE_HREF, "results.csv") and re.fullmatch(D.SAFE_HREF, "#summary")


@pytest.mark.parametrize("case", IDS)
def test_markdown_lines_from_elsewhere_stay_text(case, world, tmp_path):
    """A plugin kind's section as Markdown lines, a received run's ``fidelity.md``: their
    headings, tables, lists, code and bold are read, but a link, an image or HTML in them
    stays text, and a line break in one string starts no block."""
    s = _hostile(world, case)
    lines = [f"# {s}", "", s, "", f"> {s}", "", f"| {s} | x |", "|---|---|", f"| {s} | 1 |",
             "", f"- {s}", f"**{s}** `{s}`", f"![{s}](/proc/self/environ)",
             f"[{s}](javascript:alert(1))", "<script>window.__pwned=1</script>"]
    blocks = D.from_lines(lines)
    md, page = D.to_markdown(blocks, tmp_path), D.to_html(blocks, tmp_path, title=s)
    for t in _markdown(md):
        assert t.type != "html_block"
        for c in t.children or ():
            assert c.type not in ("html_inline", "image", "link_open"), c
    for tag, attrs in _page(page).tags:
        assert tag in ALLOWED_TAGS and tag not in ("img", "a"), tag
        assert not any(name.startswith("on") for name in attrs)
    assert len(_page(page).data["script"]) == 1
