"""The fleet page: one row per job (verdict, bytes at risk), worst first; in the Airflow view sortable, filterable
and paged by query parameters, as a standalone file every row. Rendered with the check report's templates and
colours (`upgrade_gate.report.html`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import urlencode

from upgrade_gate.report.html import render_page
from upgrade_gate.vocabulary import Verdict

__all__ = ["FLEET_PAGE", "fleet_rows", "note_summary", "render_fleet"]

FLEET_PAGE = 100  # fleet jobs per page in the view
NOTE_FOLD = 120  # a row note longer than this shows its start, and opens in place
_ROLLBACK = "Failed to rollback to checkpoint/savepoint "  # Flink's preamble to every load-validation refusal


def note_summary(note: str, width: int = NOTE_FOLD - 10) -> str:
    """The start of a long row note, for a folded cell. Flink's load-validation refusals open with
    "Failed to rollback to checkpoint/savepoint <path>." (`Checkpoints.loadAndValidateCheckpoint`): the same
    words on every row, and a path that, unbroken, fills the cell. The reason is the sentence after it."""
    if note.startswith(_ROLLBACK) and ". " in note:
        note = note.split(". ", 1)[1]
    if len(note) <= width:
        return note
    cut = note[:width].rsplit(" ", 1)[0] if " " in note[:width] else note[:width]
    return cut.rstrip(" ,.;:") + "…"


def fleet_rows(rows: Iterable[dict[str, Any]], *, sort: str = "severity", order: str = "desc",
               verdict: str | None = None, q: str | None = None) -> list[dict[str, Any]]:
    """The fleet summary's rows, filtered (verdict, a substring of the job name) and sorted: what the
    view's query parameters ask for."""
    out = [r for r in rows if (not verdict or str(r.get("verdict")) == verdict)
           and (not q or q.lower() in str(r.get("job", "")).lower())]

    def key(r: dict[str, Any]) -> Any:
        if sort == "job":
            return str(r.get("job", "")).lower()
        if sort in ("bytes_at_risk", "state_bytes"):
            return int(r.get(sort) or 0)
        try:
            sev = Verdict(str(r.get("verdict"))).severity
        except ValueError:
            sev = 9  # unchecked jobs first: nobody knows what they would lose
        return (sev, int(r.get("bytes_at_risk") or 0))

    return sorted(out, key=key, reverse=order != "asc")


def render_fleet(summary: dict[str, Any], rows: list[dict[str, Any]], *, links: dict[str, str] | None = None,
                 sort: str = "severity", order: str = "desc", verdict: str | None = None, q: str | None = None,
                 base_url: str | None = None, page_no: int = 1, per_page: int = FLEET_PAGE,
                 link_for: Callable[[str], str | None] | None = None, **page: Any) -> str:
    """The fleet summary table (job x verdict x bytes at risk). `base_url` (the view) turns the headers
    and verdict chips into sort/filter links, adds a search form and pages the rows (`page_no`, `per_page`:
    a 10,000-job scan is 100 pages, not one 60,000-pixel table); `link_for` names each shown job's report
    (asked only for the rows on the page). The standalone file lists every row, worst first."""
    matching = fleet_rows(rows, sort=sort, order=order, verdict=verdict, q=q)
    pages = max(1, -(-len(matching) // per_page)) if base_url else 1
    page_no = min(max(1, page_no), pages)
    shown = matching[(page_no - 1) * per_page: page_no * per_page] if base_url else matching
    links = dict(links or {})
    if link_for is not None:
        for r in shown:
            job = str(r.get("job", ""))
            if job not in links and (href := link_for(job)):
                links[job] = href
    current = {"sort": sort, "order": order, "verdict": verdict, "q": q}

    def q_url(**changes: Any) -> str:
        """This page's URL with some parameters changed (None drops one), keys in a stable order; a change of
        sort, filter or search starts again at page 1."""
        args = {k: v for k, v in sorted({**current, **changes}.items()) if v not in (None, "") and k != "page"}
        if changes.get("page", 1) != 1:
            args["page"] = changes["page"]
        return f"{base_url}?{urlencode(args)}"

    return render_page("fleet.html.j2", summary=summary, rows=shown, total=len(rows), matching=len(matching),
                       first=(page_no - 1) * per_page + 1, page_no=page_no, pages=pages, links=links,
                       sort=sort, order=order, verdict_filter=verdict, q=q, base_url=base_url, q_url=q_url,
                       gate=str(summary.get("gate") or "BLOCK"), note_summary=note_summary, note_fold=NOTE_FOLD,
                       **page)
