"""``report.html``: the Markdown report as one self-contained HTML page.

The page is rendered from the very lines of ``report.md`` (the subset of Markdown the report
writes: headings, paragraphs, lists, block quotes, pipe tables, images, inline code, bold,
emphasis and links), so the two never say different things. Figures are embedded as
``data:`` URIs and the style and script are inline: the file can be mailed, archived and
opened offline. Every table sorts by any column on a click of its header (a few lines of
plain JavaScript: numbers as numbers -- ``0.43 ± 0.01`` sorts by 0.43 --, blanks last).
"""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

__all__ = ["render"]

_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 2em auto;
       max-width: 1200px; padding: 0 1em; color: #1b1b1b; line-height: 1.45; }
h1, h2, h3 { line-height: 1.2; } h2 { border-bottom: 1px solid #ddd; padding-bottom: .2em; }
code { background: #f3f3f3; padding: 0 .25em; border-radius: 3px; font-size: 90%; }
table { border-collapse: collapse; margin: .8em 0; font-size: 14px; }
th, td { border: 1px solid #d0d0d0; padding: .25em .6em; text-align: left; }
td { font-variant-numeric: tabular-nums; }
thead th { background: #f0f3f7; cursor: pointer; user-select: none; white-space: nowrap; }
thead th:hover { background: #e2e8f0; }
thead th[aria-sort="ascending"]::after { content: " \\25B2"; }
thead th[aria-sort="descending"]::after { content: " \\25BC"; }
tbody tr:nth-child(even) { background: #fafafa; }
blockquote { border-left: 4px solid #c9d3df; margin: .8em 0; padding: .1em 1em; color: #333; }
figure { margin: 1em 0; } img { max-width: 100%; height: auto; border: 1px solid #eee; }
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
      th.title = "sort by this column";
      th.addEventListener("click", function () { sortBy(table, col, th); });
    });
  });
})();
"""

_LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")
_BOLD = re.compile(r"\*\*(.+?)\*\*")
_EM = re.compile(r"(?<![\w*])\*([^*\s](?:[^*]*[^*\s])?)\*(?![\w*])")
_IMAGE = re.compile(r"!\[(.*)\]\(([^)\s]+)\)")
_HEADING = re.compile(r"(#{1,6}) (.*)")
_CELL_SPLIT = re.compile(r"(?<!\\)\|")


def _inline(text: str) -> str:
    """Inline Markdown: `code` (its content taken literally), links, bold and emphasis
    (which may hold code); everything else escaped."""
    codes: list[str] = []

    def keep(m):
        codes.append(f"<code>{html.escape(m.group(1))}</code>")
        return f"\x00{len(codes) - 1}\x00"

    s = re.sub(r"`([^`]*)`", keep, text.replace("\x00", ""))
    s = html.escape(s, quote=False)
    s = _LINK.sub(lambda m: f'<a href="{html.escape(m.group(2))}">{m.group(1)}</a>', s)
    s = _BOLD.sub(r"<strong>\1</strong>", s)
    s = _EM.sub(r"<em>\1</em>", s)
    return re.sub("\x00([0-9]+)\x00", lambda m: codes[int(m.group(1))], s)


def _cells(line: str) -> list[str]:
    body = line.strip()
    body = body[1:] if body.startswith("|") else body
    body = body[:-1] if body.endswith("|") and not body.endswith("\\|") else body
    return [c.strip().replace("\\|", "|") for c in _CELL_SPLIT.split(body)]


def _table(lines: list[str]) -> str:
    head = _cells(lines[0])
    rows = [_cells(x) for x in lines[1:] if not re.fullmatch(r"\|?(\s*:?-+:?\s*\|)+\s*", x)]
    out = ["<table>", "<thead><tr>" + "".join(f"<th>{_inline(c)}</th>" for c in head)
           + "</tr></thead>", "<tbody>"]
    for r in rows:
        r = (r + [""] * len(head))[:len(head)]
        out.append("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in r) + "</tr>")
    out += ["</tbody>", "</table>"]
    return "\n".join(out)


def _image(alt: str, src: str, run_dir: Path) -> str:
    path = (run_dir / src)
    try:
        data = base64.b64encode(path.read_bytes()).decode("ascii")
    except OSError:
        return f"<p><em>{html.escape(alt)}: figure missing ({html.escape(src)})</em></p>"
    return (f'<figure><img alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'
            "</figure>")


def render(lines: list[str], run_dir, *, title: str) -> str:
    """The HTML page of a report's Markdown ``lines`` (figures read from ``run_dir``)."""
    run_dir = Path(run_dir)
    body: list[str] = []
    para: list[str] = []
    j = 0

    def flush():
        if para:
            body.append(f"<p>{_inline(' '.join(para))}</p>")
            para.clear()

    while j < len(lines):
        line = lines[j]
        stripped = line.strip()
        m = _HEADING.fullmatch(stripped)
        img = _IMAGE.fullmatch(stripped)
        if not stripped:
            flush()
            j += 1
        elif m:
            flush()
            n = len(m.group(1))
            body.append(f"<h{n}>{_inline(m.group(2))}</h{n}>")
            j += 1
        elif img:
            flush()
            body.append(_image(img.group(1), img.group(2), run_dir))
            j += 1
        elif stripped.startswith("|"):
            flush()
            block = []
            while j < len(lines) and lines[j].strip().startswith("|"):
                block.append(lines[j])
                j += 1
            body.append(_table(block))
        elif stripped.startswith("- "):
            flush()
            items = []
            while j < len(lines) and lines[j].strip().startswith("- "):
                items.append(f"<li>{_inline(lines[j].strip()[2:])}</li>")
                j += 1
            body.append("<ul>\n" + "\n".join(items) + "\n</ul>")
        elif stripped.startswith(">"):
            flush()
            quote = []
            while j < len(lines) and lines[j].strip().startswith(">"):
                quote.append(lines[j].strip()[1:].strip())
                j += 1
            body.append(f"<blockquote><p>{_inline(' '.join(quote))}</p></blockquote>")
        else:
            para.append(stripped)
            j += 1
    flush()
    hint = ('<p class="hint">Click a column\'s header to sort its table by it; click again '
            "to reverse. This page is self-contained (figures embedded): it reads offline."
            "</p>")
    if body and body[0].startswith("<h1>"):
        body.insert(1, hint)
    else:
        body.insert(0, hint)
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{html.escape(title)}</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n"
            + "\n".join(body) + f"\n<script>{_SCRIPT}</script>\n</body>\n</html>\n")
