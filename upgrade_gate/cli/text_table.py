"""Terminal tables that fit the terminal: rich lays them out, we say which columns may wrap.

Narrow columns (operator IDs, counts, byte sizes, short enums) stay whole; free text (names, state
names, reasons, evidence) wraps inside its column. The width is the terminal's, or `COLUMNS`, or
100 when the output is not a terminal, so a piped table still reads in an 100-column log viewer.
No colour and no box characters: the text is the same on a terminal, in a file and in CI logs.
"""

from __future__ import annotations

import io
import shutil
import textwrap
from collections.abc import Collection, Sequence
from functools import cache
from typing import Any

__all__ = ["human_bytes", "paragraph", "render", "terminal_width"]

DEFAULT_WIDTH = 100
_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def terminal_width() -> int:
    return shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns


def human_bytes(n: int | None) -> str:
    """1536 -> "1.5 KiB": binary units, one decimal above a KiB, exact below it."""
    if n is None:
        return ""
    value = float(n)
    for unit in _UNITS:
        if abs(value) < 1024 or unit == _UNITS[-1]:
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def paragraph(text: str, *, indent: str = "  ", width: int | None = None) -> str:
    """Free text (a warning, Flink's error, a title with a long path) wrapped to the terminal; paths and
    ids are long words: they break only when a line cannot hold them at all."""
    return textwrap.fill(text, width=width or terminal_width(), subsequent_indent=indent, break_on_hyphens=False)


@cache
def _plain_box() -> Any:
    """A dashed header rule only. Rich is imported here, when a table is drawn: the byte and paragraph helpers
    serve JSON and HTML output too, which need none of it (docs/performance.md, "A check's own cost")."""
    from rich import box

    return box.Box("    \n    \n -- \n    \n    \n    \n    \n    \n", ascii=True)


def render(headers: Sequence[str], rows: Sequence[Sequence[object]], title: str | None = None, *,
           wrap: Collection[str] = (), right: Collection[str] = (), width: int | None = None) -> str:
    """A table as text. `wrap`: headers of free-text columns that may wrap (the others never break);
    `right`: numeric columns, right-aligned. Without `wrap`, the widest column wraps if it must."""
    cells = [["" if v is None else str(v) for v in row] for row in rows]
    if not wrap and cells:
        widest = max(range(len(headers)), key=lambda i: max(len(r[i]) for r in cells))
        wrap = {headers[widest]}
    from rich.console import Console
    from rich.table import Table

    table = Table(box=_plain_box(), show_edge=False, pad_edge=False, header_style=None, expand=False,
                  padding=(0, 1, 0, 0))
    for i, h in enumerate(headers):
        if h in wrap:  # wider content gets a larger share of the room left by the fixed columns
            longest = max([len(h), *(len(r[i]) for r in cells)])
            table.add_column(h, overflow="fold", ratio=max(1, min(longest, 60) // 6),
                             min_width=min(longest, max(len(h), 10)))
        else:
            table.add_column(h, no_wrap=True, justify="right" if h in right else "left")
    for row in cells:
        table.add_row(*row)
    out = io.StringIO()
    console = Console(file=out, width=width or terminal_width(), color_system=None, force_terminal=False,
                      highlight=False, markup=False, emoji=False, soft_wrap=False)
    console.print(table)
    lines = [line.rstrip() for line in out.getvalue().rstrip("\n").splitlines()]
    return "\n".join([paragraph(title, width=width), *lines] if title else lines)
