"""``render(lines, run_dir, *, title)``: lines of simple Markdown as one HTML page, through
:mod:`recloop._document` (the one renderer). Kept for the code that still builds its report
as lines (``recloop evaluate``); new code builds blocks and calls
:func:`recloop._document.write_document`. What the lines say is read as text
(:func:`recloop._document.from_lines`): headings, paragraphs, lists, notes, pipe tables,
``code``, **bold**, and ``![title](figures/NAME.png)`` lines as figures of ``run_dir``; any
other link, image or HTML stays text. The page carries the Content-Security-Policy of every
report."""

from __future__ import annotations

from recloop import _document

__all__ = ["render"]


def render(lines, run_dir, *, title: str) -> str:
    """The HTML page of the Markdown ``lines`` (figures read from ``run_dir/figures``)."""
    return _document.to_html(_document.from_lines(list(lines)), run_dir, title=title)
