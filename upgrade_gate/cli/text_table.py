"""Plain-text tables for the CLI: aligned columns, a header rule, no dependencies."""

from __future__ import annotations

from collections.abc import Sequence


def render(headers: Sequence[str], rows: Sequence[Sequence[object]], title: str | None = None) -> str:
    cells = [[("" if v is None else str(v)) for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, v in enumerate(row):
            widths[i] = max(widths[i], len(v))
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()
    out = [title, ""] if title else []
    out += [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in cells]
    return "\n".join(out)
