"""Sizes as people read them, the same in every output: the text tables, the HTML report and the Airflow
plugin's alerts and fleet summaries."""

from __future__ import annotations

__all__ = ["human_bytes"]

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


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
