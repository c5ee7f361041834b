"""Terminal tables that fit the terminal: we decide the column widths, Rich draws them.

Narrow columns (operator IDs, counts, byte sizes, short enums) stay whole; free text (names, state
names, reasons, evidence) wraps inside its column, between words and never inside one. A table that
cannot fit that way (an 80-column terminal) becomes one block of lines per row instead, so no column
is dropped and no id is cut (issue 32). The width is the terminal's, or `COLUMNS`, or 100 when the
output is not a terminal, so a piped table still reads in an 100-column log viewer. No colour and no
box characters here: the text is the same on a terminal, in a file and in CI logs (`check` colours
only its verdict line, and only on a terminal)."""

from __future__ import annotations

import io
import shutil
import textwrap
from collections.abc import Collection, Sequence
from functools import cache
from typing import Any

__all__ = ["paragraph", "render", "terminal_width"]

DEFAULT_WIDTH = 100
_GAP = 2  # between two columns: the box's blank divider and one cell of padding


def terminal_width() -> int:
    return shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns


def paragraph(text: str, *, indent: str = "  ", width: int | None = None) -> str:
    """Free text (a warning, Flink's error, a title with a long path) wrapped to the terminal between words.
    Paths and ids are words that are never cut, even when longer than a line: users paste them (into
    `setUidHash`, a shell), so such a word overflows its line instead."""
    return textwrap.fill(text, width=width or terminal_width(), subsequent_indent=indent, break_on_hyphens=False,
                         break_long_words=False)


@cache
def _plain_box() -> Any:
    """A dashed header rule only. Rich is imported here, when a table is drawn: the paragraph helper serves
    text that is no table too, which needs none of it (docs/performance.md, "A check's own cost")."""
    from rich import box

    return box.Box("    \n    \n -- \n    \n    \n    \n    \n    \n", ascii=True)


def _longest_word(values: Sequence[str]) -> int:
    return max((len(w) for v in values for w in v.split()), default=0)


def render(headers: Sequence[str], rows: Sequence[Sequence[object]], title: str | None = None, *,
           wrap: Collection[str] = (), right: Collection[str] = (), width: int | None = None) -> str:
    """A table as text. `wrap`: headers of free-text columns that may wrap (the others never break);
    `right`: numeric columns, right-aligned. Without `wrap`, the widest column wraps if it must.

    Free text wraps between words, never inside one (an operator id in an evidence sentence is a word). When the
    columns cannot fit the terminal that way, every row becomes a block of `header  value` lines instead (as
    `psql`'s expanded display does): a narrow terminal loses the grid, never a column or a piece of an id."""
    cells = [["" if v is None else str(v) for v in row] for row in rows]
    width = width or terminal_width()
    if not wrap and cells:
        widest = max(range(len(headers)), key=lambda i: max(len(r[i]) for r in cells))
        wrap = {headers[widest]}
    narrowest, natural = [], []  # free text: its longest word; everything else: whole values
    for i, h in enumerate(headers):
        column = [r[i] for r in cells]
        natural.append(max([len(h), *(len(v) for v in column)]))
        narrowest.append(_longest_word([h, *column]) if h in wrap else natural[-1])
    gaps = _GAP * (len(headers) - 1)
    if cells and sum(narrowest) + gaps > width:
        return _records(headers, cells, title, width)
    widths = _share(narrowest, natural, width - gaps)
    from rich.console import Console
    from rich.table import Table

    table = Table(box=_plain_box(), show_edge=False, pad_edge=False, header_style=None, expand=False,
                  padding=(0, 1, 0, 0))
    for i, h in enumerate(headers):  # widths decided here: Rich's own shrinking can crop a line past the edge
        table.add_column(h, width=widths[i], overflow="fold", no_wrap=h not in wrap,
                         justify="right" if h in right else "left")
    for row in cells:
        table.add_row(*row)
    out = io.StringIO()
    console = Console(file=out, width=width, color_system=None, force_terminal=False,
                      highlight=False, markup=False, emoji=False, soft_wrap=False)
    console.print(table)
    lines = [line.rstrip() for line in out.getvalue().rstrip("\n").splitlines()]
    return "\n".join([paragraph(title, width=width), *lines] if title else lines)


def _share(narrowest: list[int], natural: list[int], room: int) -> list[int]:
    """Column widths within `room`: every column at least its narrowest; then the columns that lack least are made
    whole first (fewest wrapped cells: a short state note stays on its line while a long reason wraps); what is left
    goes to the others in proportion to what they lack."""
    widths = list(narrowest)
    spare = room - sum(widths)
    for i in sorted(range(len(widths)), key=lambda i: natural[i] - widths[i]):
        lack = natural[i] - widths[i]
        if 0 < lack <= spare:
            widths[i], spare = natural[i], spare - lack
    lacking = {i: natural[i] - widths[i] for i in range(len(widths)) if natural[i] > widths[i]}
    total = sum(lacking.values())
    for i, lack in lacking.items():
        add = min(lack, spare * lack // total) if total else 0
        widths[i] += add
    return widths


def _records(headers: Sequence[str], cells: list[list[str]], title: str | None, width: int) -> str:
    """Each row as its first header and cell on a line of their own, then one `header  value` line per other
    column, wrapped between words."""
    label = max(len(h) for h in headers[1:]) if len(headers) > 1 else 0
    lines = [paragraph(title, width=width)] if title else []
    for row in cells:
        lines.append(paragraph(f"{headers[0]} {row[0]}", width=width))  # a word wider than the terminal breaks
        for h, v in zip(headers[1:], row[1:], strict=True):
            if v:
                lines.append(paragraph(f"  {h.ljust(label)}  {v}", indent=" " * (label + 4), width=width))
        lines.append("")
    return "\n".join(lines).rstrip("\n")
