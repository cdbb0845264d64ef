"""A report as one structured document, rendered to Markdown and to one HTML page.

Every report recloop writes (``report.md`` and ``report.html`` of a run directory, and any
other command that reports) is built as a list of *blocks* -- :class:`Heading`,
:class:`Paragraph`, :class:`Note`, :class:`Bullets`, :class:`Table`, :class:`Figure`,
:class:`Side` (a figure beside the table it draws), :class:`Gallery` (figures side by
side), :class:`Contents` -- whose text is data:
plain strings, or the few inline marks recloop itself chooses (:class:`Code`,
:class:`Strong`, :class:`Em`, :class:`Term`, :class:`Link`). :func:`to_markdown` and
:func:`to_html` render the same blocks, escaping every string for their format, so that
nothing a string says -- a scenario's description, a name, a parameter, a command line, an
error message, a received run directory's files -- can become a link, an image, a heading,
a table row or a script (issue 36). The two outputs say the same things in the same order.

How text is made safe:

* :func:`clean` (both formats): line breaks of any kind become spaces (a string cannot start
  a block), other control characters and the Unicode bidirectional controls are shown as
  ``<U+202E>`` (they cannot reorder what follows), and a string longer than
  :data:`MAX_TEXT` characters is cut, saying how long it was;
* Markdown: the characters that open inline syntax (`` ` * [ ] < > & | # \\ ~``, and ``_`` at
  a word's edge) are backslash-escaped, and a character that would start a block at the
  start of a line (``-``, ``+``, ``=``, ``1.``) too; code spans are fenced with more
  backticks than they hold; raw HTML cannot appear (``<`` and ``&`` are escaped);
* HTML: every string is escaped (``html.escape``, quotes included); links only ever point
  to a file of the run directory or an anchor of the page (:data:`SAFE_HREF`), and figures
  are embedded only from the PNGs recloop wrote under ``figures/`` (:func:`read_figure`).

``report.html`` carries a Content-Security-Policy: no request of any kind (``default-src
'none'``), ``data:`` images only, and only its own inline style and script (by their
SHA-256 hashes).
"""

from __future__ import annotations

import base64
import hashlib
import html
import os
import re
import stat
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence, Union

__all__ = ["Bullets", "Code", "Contents", "Em", "Figure", "Gallery", "Heading", "Link", "Note",
           "Paragraph", "Side", "Strong", "Table", "Term", "clean", "from_lines",
           "read_figure", "to_html", "to_markdown", "write_document"]

#: Characters of one string at most (longer ones are cut, saying how long they were).
MAX_TEXT = 2000
#: Largest figure embedded (recloop's are 30-300 KiB).
MAX_FIGURE_BYTES = 8 * 2**20
#: A figure's file name under ``figures/``.
FIGURE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,245}\.png")
#: Where a link may point: a file of the run directory, or an anchor of the page.
SAFE_HREF = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,100}|#[a-z0-9][a-z0-9-]{0,100}")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

_BREAKS = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"
#: Bidirectional controls: they reorder the text that follows them on screen.
_BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"


def clean(text, limit: int = MAX_TEXT) -> str:
    """``text`` as one line of visible text: line breaks become spaces, control and
    bidirectional characters are shown as ``<U+XXXX>``, at most ``limit`` characters."""
    s = str(text)
    n = len(s)
    if n > limit:
        s = s[:limit]
    out = []
    for c in s:
        if c in _BREAKS or c == "\t":
            out.append(" ")
        elif c in _BIDI or unicodedata.category(c) in ("Cc", "Cs"):
            out.append(f"<U+{ord(c):04X}>")
        else:
            out.append(c)
    s = "".join(out)
    return s + (f"... ({n:,} characters in all)" if n > limit else "")


# --- inline marks (chosen by recloop; their text is data) -------------------------------------

@dataclass(frozen=True)
class Code:
    """A name or a value as code (monospace)."""
    text: str


@dataclass(frozen=True)
class Strong:
    text: str


@dataclass(frozen=True)
class Em:
    text: str


@dataclass(frozen=True)
class Term:
    """A name with its definition (the glossary's): shown on hover in HTML."""
    text: str
    definition: str


@dataclass(frozen=True)
class Link:
    """A link to a file of the run directory or an anchor of the page; anything else is
    refused (a link's target never comes from data)."""
    text: str
    href: str

    def __post_init__(self):
        if not SAFE_HREF.fullmatch(self.href):
            raise ValueError(f"`href` must be a file of the run directory or an anchor; got "
                             f"{self.href!r}.")


Inline = Union[str, Code, Strong, Em, Term, Link]


def _parts(parts) -> tuple:
    if isinstance(parts, (str, Code, Strong, Em, Term, Link)):
        return (parts,)
    return tuple(parts)


# --- blocks -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Heading:
    text: str
    level: int = 2
    anchor: str | None = None


@dataclass(frozen=True)
class Paragraph:
    parts: tuple

    def __init__(self, *parts):
        object.__setattr__(self, "parts", tuple(p for x in parts for p in _parts(x)))


@dataclass(frozen=True)
class Note:
    """A remark set apart (a block quote): the kinds' caveats, which the terminal shows
    too."""
    parts: tuple

    def __init__(self, *parts):
        object.__setattr__(self, "parts", tuple(p for x in parts for p in _parts(x)))


@dataclass(frozen=True)
class Bullets:
    items: tuple

    def __init__(self, items):
        object.__setattr__(self, "items", tuple(_parts(i) for i in items))


@dataclass(frozen=True)
class Table:
    """``header`` strings and ``rows`` of cells (a string or inline marks each).

    ``key_rows``: the indices of the rows shown first when the table is long (report.html
    shows them, with a button for the rest, and a filter box; report.md lists every row).
    ``tips``: a definition per header cell, shown on hover."""
    header: tuple
    rows: tuple
    key_rows: tuple | None = None
    tips: tuple | None = None
    caption: str = ""

    def __init__(self, header, rows, *, key_rows=None, tips=None, caption=""):
        object.__setattr__(self, "header", tuple(header))
        object.__setattr__(self, "rows", tuple(tuple(_parts(c) for c in r) for r in rows))
        object.__setattr__(self, "key_rows", None if key_rows is None else tuple(key_rows))
        object.__setattr__(self, "tips", None if tips is None else tuple(tips))
        object.__setattr__(self, "caption", caption)


@dataclass(frozen=True)
class Figure:
    """A PNG recloop wrote under ``figures/`` (``name``: its file name), or a figure that
    could not be drawn (``name=None``: ``title`` says why)."""
    title: str
    name: str | None = None
    note: str = ""


@dataclass(frozen=True)
class Side:
    """A figure beside the table it draws (side by side on a wide page)."""
    figure: Figure
    table: Table


@dataclass(frozen=True)
class Gallery:
    """Figures side by side on a wide page (the figures of record)."""
    figures: tuple

    def __init__(self, figures):
        object.__setattr__(self, "figures", tuple(figures))


@dataclass(frozen=True)
class Contents:
    """The table of contents: the level-2 headings that follow it, as links."""


Block = Union[Heading, Paragraph, Note, Bullets, Table, Figure, Side, Gallery, Contents]


# --- figures: only recloop's own PNGs --------------------------------------------------------

def read_figure(run_dir, name: str | None) -> tuple[bytes | None, str | None]:
    """The bytes of ``figures/NAME`` of ``run_dir``: ``(data, None)``, or ``(None, why
    not)``. Refused: a name that is not a plain ``*.png`` file name, a ``figures`` folder or
    file that is a symbolic link or not a regular file (a FIFO, a device), a file larger
    than :data:`MAX_FIGURE_BYTES`, bytes without the PNG signature. Never follows a link,
    never blocks on a FIFO."""
    if name is None:
        return None, "not drawn"
    if not isinstance(name, str) or not FIGURE_NAME.fullmatch(name):
        return None, "not a figure name"
    folder = Path(run_dir) / "figures"
    try:
        if not stat.S_ISDIR(os.lstat(folder).st_mode):
            return None, "figures/ is not a folder"
        st = os.lstat(folder / name)
    except FileNotFoundError:
        return None, "missing"
    except OSError as exc:
        return None, f"unreadable ({exc.strerror or exc})"
    if stat.S_ISLNK(st.st_mode):
        return None, "a symbolic link"
    if not stat.S_ISREG(st.st_mode):
        return None, "not a regular file"
    if st.st_size > MAX_FIGURE_BYTES:
        return None, f"too large ({st.st_size:,} bytes)"
    try:
        fd = os.open(folder / name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        return None, f"unreadable ({exc.strerror or exc})"
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None, "not a regular file"
        with os.fdopen(fd, "rb") as f:
            fd = None
            data = f.read(MAX_FIGURE_BYTES + 1)
    finally:
        if fd is not None:
            os.close(fd)
    if len(data) > MAX_FIGURE_BYTES:
        return None, "too large"
    if not data.startswith(PNG_SIGNATURE):
        return None, "not a PNG"
    return data, None


# --- Markdown ---------------------------------------------------------------------------------

_MD_SPECIAL = re.compile(r"([\\`*\[\]<>&|#~])")


def _md_text(text) -> str:
    s = _MD_SPECIAL.sub(r"\\\1", clean(text))
    # `_` opens emphasis only at a word's edge: snake_case names stay readable
    s = re.sub(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])", r"\\_", s)
    return s


def _md_code(text) -> str:
    s = clean(text)
    ticks = max((len(m) for m in re.findall(r"`+", s)), default=0)
    fence = "`" * (ticks + 1)
    pad = " " if s.startswith(("`", " ")) or s.endswith(("`", " ")) or not s else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def _md_inline(parts, *, cell: bool = False) -> str:
    out = []
    for p in parts:
        if isinstance(p, str):
            out.append(_md_text(p))
        elif isinstance(p, Code):
            out.append(_md_code(p.text))
        elif isinstance(p, Strong):
            out.append(f"**{_md_text(p.text)}**")
        elif isinstance(p, Em):
            out.append(f"*{_md_text(p.text)}*")
        elif isinstance(p, Term):
            out.append(_md_text(p.text))
        elif isinstance(p, Link):
            out.append(f"[{_md_text(p.text)}]({p.href})")
        else:
            raise TypeError(f"not an inline mark: {type(p).__name__}")
    s = "".join(out)
    if cell:
        # a `|` in a code span would still end a table cell
        s = re.sub(r"(?<!\\)\|", r"\\|", s)
    return s


def _md_line_start(s: str) -> str:
    """A paragraph's first characters that would open a block: escaped."""
    s = s.lstrip()
    if re.match(r"[-+=]", s):
        return "\\" + s
    m = re.match(r"([0-9]{1,9})([.)])", s)
    if m:
        return m.group(1) + "\\" + s[len(m.group(1)):]
    return s


def _anchor(text: str) -> str:
    s = re.sub(r"[^a-z0-9]+", "-", clean(text).lower()).strip("-")
    return s[:60] or "section"


def _anchors(blocks) -> dict[int, str]:
    """A unique anchor per heading (by position in ``blocks``)."""
    out, seen = {}, set()
    for j, b in enumerate(blocks):
        if isinstance(b, Heading):
            a = b.anchor or _anchor(b.text)
            base, k = a, 2
            while a in seen:
                a, k = f"{base}-{k}", k + 1
            seen.add(a)
            out[j] = a
    return out


def _contents(blocks, anchors, start: int):
    return [(blocks[j].text, anchors[j]) for j in range(start, len(blocks))
            if isinstance(blocks[j], Heading) and blocks[j].level == 2]


def _md_table(t: Table) -> list[str]:
    width = len(t.header)

    def row(cells):
        cells = (list(cells) + [()] * width)[:width]
        return "| " + " | ".join(_md_inline(c, cell=True) for c in cells) + " |"

    out = [row([(h,) for h in t.header]), "|" + "---|" * width]
    out += [row(r) for r in t.rows]
    if t.caption:
        out += ["", _md_line_start(_md_text(t.caption))]
    return out


def _md_figure(f: Figure, run_dir) -> list[str]:
    data, why = read_figure(run_dir, f.name) if run_dir is not None else (None, "no run")
    out = [f"**{_md_text(f.title)}**", ""]
    if data is None:
        out += [_md_line_start(_md_text(f"(figure {f.name or ''} {why})".replace("  ", " ")))
                if f.name else "(not drawn)"]
    else:
        out += [f"![{_md_text(f.title)}](figures/{f.name})"]
    if f.note:
        out += ["", _md_line_start(_md_text(f.note))]
    return out


def to_markdown(blocks: Sequence, run_dir=None) -> str:
    """The Markdown text of ``blocks`` (figures named only when :func:`read_figure`
    accepts them)."""
    blocks = list(blocks)
    anchors = _anchors(blocks)
    out: list[str] = []
    for j, b in enumerate(blocks):
        if isinstance(b, Heading):
            lines = ["#" * max(1, min(6, b.level)) + " " + _md_text(b.text)]
        elif isinstance(b, Paragraph):
            lines = [_md_line_start(_md_inline(b.parts))]
        elif isinstance(b, Note):
            lines = ["> " + _md_line_start(_md_inline(b.parts))]
        elif isinstance(b, Bullets):
            lines = ["- " + _md_line_start(_md_inline(i)) for i in b.items]
        elif isinstance(b, Table):
            lines = _md_table(b)
        elif isinstance(b, Figure):
            lines = _md_figure(b, run_dir)
        elif isinstance(b, Side):
            lines = _md_figure(b.figure, run_dir) + [""] + _md_table(b.table)
        elif isinstance(b, Gallery):
            lines = [x for f in b.figures for x in _md_figure(f, run_dir) + [""]][:-1]
        elif isinstance(b, Contents):
            lines = ["Contents: " + " · ".join(
                f"[{_md_text(text)}](#{a})" for text, a in _contents(blocks, anchors, j + 1))]
        else:
            raise TypeError(f"not a block: {type(b).__name__}")
        out += lines + [""]
    return "\n".join(out)


# --- HTML ----------------------------------------------------------------------------------------

_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 1.2em auto;
       max-width: 1280px; padding: 0 1em; color: #1b1b1b; line-height: 1.45; }
h1, h2, h3 { line-height: 1.2; } h1 { margin: .2em 0 .3em; }
h2 { border-bottom: 1px solid #ddd; padding-bottom: .2em; margin-top: 1.6em; }
code { background: #f3f3f3; padding: 0 .25em; border-radius: 3px; font-size: 90%; }
table { border-collapse: collapse; margin: .5em 0; font-size: 14px; }
th, td { border: 1px solid #d0d0d0; padding: .2em .55em; text-align: left; }
td { font-variant-numeric: tabular-nums; }
thead th { background: #f0f3f7; cursor: pointer; user-select: none; white-space: nowrap; }
thead th:hover { background: #e2e8f0; }
thead th[aria-sort="ascending"]::after { content: " \\25B2"; }
thead th[aria-sort="descending"]::after { content: " \\25BC"; }
tbody tr:nth-child(even) { background: #fafafa; }
table.collapsed tr.more { display: none; }
tr.filtered { display: none; }
.tools { font-size: 13px; color: #555; margin-top: .6em; }
.tools input { font-size: 13px; padding: .1em .3em; width: 16em; }
.tools button { font-size: 13px; margin-left: .5em; }
blockquote { border-left: 4px solid #c9d3df; margin: .8em 0; padding: .1em 1em; color: #333; }
figure { margin: .6em 0; } figcaption { font-size: 13px; color: #444; }
img { max-width: 100%; height: auto; border: 1px solid #eee; }
.side { display: flex; flex-wrap: wrap; gap: 1.2em; align-items: flex-start; }
.side > figure { flex: 1 1 520px; max-width: 760px; }
.side > div { flex: 1 1 420px; overflow-x: auto; }
.gallery { display: flex; flex-wrap: wrap; gap: 1em; align-items: flex-start; }
.gallery > figure { flex: 0 1 620px; }
.term { text-decoration: underline dotted #888; cursor: help; }
.missing { color: #8a3b12; font-style: italic; }
nav.contents { font-size: 14px; margin: .8em 0; } nav.contents a { margin-right: 1em; }
.hint { color: #666; font-size: 13px; }
"""

_SCRIPT = """
(function () {
  function key(text) {
    var t = text.trim();
    if (t === "") { return null; }
    var x = Number(t.split(" ")[0]);
    return isNaN(x) ? t.toLowerCase() : x;
  }
  function sortBy(table, col, th) {
    var asc = th.getAttribute("aria-sort") !== "ascending";
    Array.prototype.forEach.call(th.parentNode.cells, function (c) {
      c.removeAttribute("aria-sort");
    });
    th.setAttribute("aria-sort", asc ? "ascending" : "descending");
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = key(a.cells[col].textContent), y = key(b.cells[col].textContent);
      if (x === null || y === null) { return (x === null) - (y === null); }
      if (typeof x !== typeof y) { return typeof x === "number" ? -1 : 1; }
      var d = x < y ? -1 : (x > y ? 1 : 0);
      return asc ? d : -d;
    });
    rows.forEach(function (r) { body.appendChild(r); });
  }
  document.querySelectorAll("table").forEach(function (table) {
    if (!table.tHead || !table.tBodies.length) { return; }
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, col) {
      if (!th.title) { th.title = "sort by this column"; }
      th.addEventListener("click", function () { sortBy(table, col, th); });
    });
  });
  document.querySelectorAll("div.tools").forEach(function (tools) {
    var table = document.getElementById(tools.getAttribute("data-table"));
    var input = tools.querySelector("input"), button = tools.querySelector("button");
    var more = table.tBodies[0].querySelectorAll("tr.more").length;
    function label() {
      button.textContent = table.classList.contains("collapsed")
        ? "show all " + table.tBodies[0].rows.length + " rows" : "show the key rows only";
    }
    if (button) {
      if (!more) { button.remove(); button = null; } else {
        label();
        button.addEventListener("click", function () {
          table.classList.toggle("collapsed"); label();
        });
      }
    }
    input.addEventListener("input", function () {
      var words = input.value.toLowerCase().split(/\\s+/).filter(Boolean);
      if (words.length && button && table.classList.contains("collapsed")) {
        table.classList.remove("collapsed"); label();
      }
      Array.prototype.forEach.call(table.tBodies[0].rows, function (r) {
        var t = r.textContent.toLowerCase();
        r.classList.toggle("filtered", !words.every(function (w) {
          return t.indexOf(w) >= 0; }));
      });
    });
  });
})();
"""


def _sha256(text: str) -> str:
    return base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")


#: No request of any kind; images only from data: URIs; only this page's own style and
#: script (their hashes).
CSP = ("default-src 'none'; img-src data:; style-src 'sha256-{style}'; "
       "script-src 'sha256-{script}'; base-uri 'none'; form-action 'none'")


def _esc(text, limit: int = MAX_TEXT) -> str:
    return html.escape(clean(text, limit), quote=True)


def _html_inline(parts) -> str:
    out = []
    for p in parts:
        if isinstance(p, str):
            out.append(_esc(p))
        elif isinstance(p, Code):
            out.append(f"<code>{_esc(p.text)}</code>")
        elif isinstance(p, Strong):
            out.append(f"<strong>{_esc(p.text)}</strong>")
        elif isinstance(p, Em):
            out.append(f"<em>{_esc(p.text)}</em>")
        elif isinstance(p, Term):
            out.append(f'<span class="term" title="{_esc(p.definition)}">{_esc(p.text)}</span>')
        elif isinstance(p, Link):
            out.append(f'<a href="{html.escape(p.href)}">{_esc(p.text)}</a>')
        else:
            raise TypeError(f"not an inline mark: {type(p).__name__}")
    return "".join(out)


#: Rows of a table from which report.html shows its key rows first, with a filter box.
LONG_TABLE = 25


def _html_table(t: Table, ident: str) -> str:
    width = len(t.header)
    tips = t.tips or ()
    head = "".join(
        f'<th title="{_esc(tips[j])}">{_esc(h)}</th>' if j < len(tips) and tips[j]
        else f"<th>{_esc(h)}</th>" for j, h in enumerate(t.header))
    long = len(t.rows) > LONG_TABLE
    keys = set(t.key_rows) if (long and t.key_rows is not None) else None
    body = []
    for j, r in enumerate(t.rows):
        cells = (list(r) + [()] * width)[:width]
        cls = ' class="more"' if keys is not None and j not in keys else ""
        body.append(f"<tr{cls}>" + "".join(f"<td>{_html_inline(c)}</td>" for c in cells)
                    + "</tr>")
    out = []
    if long:
        shown = (f"{len(keys)} key rows of {len(t.rows)} shown" if keys is not None
                 else f"{len(t.rows)} rows")
        out.append(f'<div class="tools" data-table="{ident}">{shown}; filter: '
                   '<input type="search" placeholder="words in a row, e.g. g1 weighted">'
                   + ("<button>show all rows</button>" if keys is not None else "")
                   + "</div>")
    cls = ' class="collapsed"' if keys is not None else ""
    out += [f'<table id="{ident}"{cls}>', f"<thead><tr>{head}</tr></thead>", "<tbody>",
            *body, "</tbody>", "</table>"]
    if t.caption:
        out.append(f'<p class="hint">{_esc(t.caption)}</p>')
    return "\n".join(out)


def _html_figure(f: Figure, run_dir) -> str:
    data, why = read_figure(run_dir, f.name) if run_dir is not None else (None, "no run")
    note = f"<figcaption>{_esc(f.note)}</figcaption>" if f.note else ""
    if data is None:
        what = f"{f.title}" + (f" (figure {f.name}: {why})" if f.name else "")
        return f'<figure><p class="missing">{_esc(what)}</p>{note}</figure>'
    src = "data:image/png;base64," + base64.b64encode(data).decode("ascii")
    return (f'<figure><figcaption><strong>{_esc(f.title)}</strong></figcaption>'
            f'<img alt="{_esc(f.title)}" src="{src}">{note}</figure>')


def to_html(blocks: Sequence, run_dir=None, *, title: str) -> str:
    """One self-contained HTML page of ``blocks``: figures embedded as ``data:`` URIs (only
    those :func:`read_figure` accepts), inline style and script, a Content-Security-Policy
    that allows nothing else."""
    blocks = list(blocks)
    anchors = _anchors(blocks)
    body: list[str] = []
    tables = 0
    for j, b in enumerate(blocks):
        if isinstance(b, Heading):
            n = max(1, min(6, b.level))
            body.append(f'<h{n} id="{anchors[j]}">{_esc(b.text)}</h{n}>')
        elif isinstance(b, Paragraph):
            body.append(f"<p>{_html_inline(b.parts)}</p>")
        elif isinstance(b, Note):
            body.append(f"<blockquote><p>{_html_inline(b.parts)}</p></blockquote>")
        elif isinstance(b, Bullets):
            body.append("<ul>\n" + "\n".join(f"<li>{_html_inline(i)}</li>" for i in b.items)
                        + "\n</ul>")
        elif isinstance(b, Table):
            tables += 1
            body.append(_html_table(b, f"table-{tables}"))
        elif isinstance(b, Figure):
            body.append(_html_figure(b, run_dir))
        elif isinstance(b, Side):
            tables += 1
            body.append('<div class="side">' + _html_figure(b.figure, run_dir) + "<div>"
                        + _html_table(b.table, f"table-{tables}") + "</div></div>")
        elif isinstance(b, Gallery):
            body.append('<div class="gallery">' + "".join(_html_figure(f, run_dir)
                                                          for f in b.figures) + "</div>")
        elif isinstance(b, Contents):
            body.append('<nav class="contents"><strong>Contents:</strong> ' + " ".join(
                f'<a href="#{a}">{_esc(text)}</a>'
                for text, a in _contents(blocks, anchors, j + 1)) + "</nav>")
        else:
            raise TypeError(f"not a block: {type(b).__name__}")
    csp = CSP.format(style=_sha256(_STYLE), script=_sha256(_SCRIPT))
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f'<meta http-equiv="Content-Security-Policy" content="{csp}">\n'
            '<meta name="referrer" content="no-referrer">\n'
            f"<title>{_esc(title, 200)}</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n"
            + "\n".join(body) + f"\n<script>{_SCRIPT}</script>\n</body>\n</html>\n")


def write_document(folder, blocks: Sequence, *, title: str, stem: str = "report") -> tuple:
    """Write ``STEM.md`` and ``STEM.html`` of ``blocks`` into ``folder`` (atomically; figures
    are read from ``folder/figures``). Returns both paths. The one way recloop writes a
    report: ``recloop run``/``report`` and any other command that reports."""
    from recloop._rundir import atomic_write

    folder = Path(folder)
    blocks = list(blocks)
    md, page = folder / f"{stem}.md", folder / f"{stem}.html"
    atomic_write(md, to_markdown(blocks, folder))
    atomic_write(page, to_html(blocks, folder, title=title))
    return md, page


# --- lines of Markdown from elsewhere (a kind's legacy section, fidelity.md) -----------------

def _legacy_inline(text: str) -> tuple:
    """``code`` and **bold** of a line; everything else (links, images, HTML) stays text."""
    parts: list = []
    for j, chunk in enumerate(re.split(r"(`[^`]*`)", text)):
        if j % 2:
            parts.append(Code(chunk[1:-1]))
            continue
        for k, piece in enumerate(re.split(r"\*\*(.+?)\*\*", chunk)):
            if piece:
                parts.append(Strong(piece) if k % 2 else piece)
    return tuple(parts)


def from_lines(lines: Sequence[str]) -> list:
    """Blocks from lines of simple Markdown written elsewhere (a plugin kind's section,
    ``fidelity.md`` of a received run directory): headings, paragraphs, ``- `` lists,
    ``> `` notes and pipe tables, with ``code`` and **bold**, and a line that is exactly
    ``![title](figures/NAME.png)`` as a figure (embedded only if :func:`read_figure`
    accepts it); any other link or image, and HTML, stays text. Each string is one line (a
    line break in it is a space)."""
    lines = [clean(x).rstrip() if isinstance(x, str) else x for x in lines]
    out: list = []
    para: list[str] = []

    def flush():
        if para:
            out.append(Paragraph(*_legacy_inline(" ".join(para))))
            para.clear()

    j = 0
    while j < len(lines):
        line = lines[j]
        if not isinstance(line, str):  # a block already
            flush()
            out.append(line)
            j += 1
            continue
        s = line.strip()
        m = re.fullmatch(r"(#{1,6}) (.*)", s)
        fig = re.fullmatch(r"!\[([^\]]*)\]\(figures/([^)\s]+)\)", s)
        if not s:
            flush()
        elif fig and FIGURE_NAME.fullmatch(fig.group(2)):
            # a figure of the run's own figures/ (read_figure still refuses anything but a
            # PNG recloop could have written); any other image stays text
            flush()
            out.append(Figure(fig.group(1), fig.group(2)))
        elif m:
            flush()
            out.append(Heading(m.group(2), level=min(6, len(m.group(1)) + 1)))
        elif s.startswith("|"):
            flush()
            block = []
            while j < len(lines) and isinstance(lines[j], str) \
                    and lines[j].strip().startswith("|"):
                block.append(lines[j].strip())
                j += 1
            cells = [[c.strip().replace("\\|", "|") for c in re.split(
                r"(?<!\\)\|", b.strip("|"))] for b in block
                if not re.fullmatch(r"\|?(\s*:?-+:?\s*\|)+\s*", b)]
            if cells:
                out.append(Table(cells[0], [[_legacy_inline(c) for c in r]
                                            for r in cells[1:]]))
            continue
        elif s.startswith("- "):
            flush()
            items = []
            while j < len(lines) and isinstance(lines[j], str) \
                    and lines[j].strip().startswith("- "):
                items.append(_legacy_inline(lines[j].strip()[2:]))
                j += 1
            out.append(Bullets(items))
            continue
        elif s.startswith(">"):
            flush()
            quote = []
            while j < len(lines) and isinstance(lines[j], str) \
                    and lines[j].strip().startswith(">"):
                quote.append(lines[j].strip()[1:].strip())
                j += 1
            out.append(Note(*_legacy_inline(" ".join(quote))))
            continue
        else:
            para.append(s)
        j += 1
    flush()
    return out


def plain(parts) -> str:
    """The text of inline marks, as a terminal shows it."""
    return "".join(clean(p) if isinstance(p, str) else
                   (f"`{clean(p.text)}`" if isinstance(p, Code) else clean(p.text))
                   for p in _parts(parts))
