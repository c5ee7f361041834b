"""The fleet page: one row per job (verdict, bytes at risk), worst first; in the Airflow view sortable, filterable
and paged by query parameters; as a standalone file (published with the scan, opened from disk or a bucket, offline,
without JavaScript) folded by verdict: one `<details>` section per verdict with its count, the worst rows first and
at most `GROUP_ROWS` of them, and where the rest are. Rendered with the check report's templates and colours
(`upgrade_gate.report.html`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from upgrade_gate.report.html import render_page
from upgrade_gate.vocabulary import Verdict

__all__ = ["FLEET_PAGE", "GROUP_ROWS", "VerdictGroup", "fleet_rows", "note_summary", "render_fleet",
           "verdict_groups"]

FLEET_PAGE = 100  # fleet jobs per page in the view
GROUP_ROWS = 25  # rows listed per verdict in the standalone file: a 10,000-job scan stays a few screens and < 1 MB
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


def _severity(verdict: str) -> int:
    """A verdict's rank for "worst first" (`Verdict.severity`); a job that was not checked ranks above all."""
    try:
        return Verdict(verdict).severity
    except ValueError:
        return 9  # unchecked jobs (ERROR) first: nobody knows what they would lose


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
        return (_severity(str(r.get("verdict"))), int(r.get("bytes_at_risk") or 0))

    return sorted(out, key=key, reverse=order != "asc")


@dataclass(frozen=True)
class VerdictGroup:
    """One verdict's section of the standalone fleet file: how many jobs, their bytes at risk, the first rows."""

    verdict: str
    count: int
    bytes_at_risk: int
    rows: list[dict[str, Any]]

    @property
    def more(self) -> int:
        """Jobs of this verdict the file does not list."""
        return self.count - len(self.rows)

    @property
    def open(self) -> bool:
        """Blocked and unchecked jobs are what the reader came for; SAFE ones are folded."""
        return self.verdict != Verdict.SAFE

    @property
    def meaning(self) -> str:
        """The verdict's sentence for people (`Verdict.meaning`), beside its count in the section's heading."""
        return Verdict(self.verdict).meaning if self.verdict in Verdict.__members__ else "The job was not checked."


def verdict_groups(rows: list[dict[str, Any]], limit: int = GROUP_ROWS) -> list[VerdictGroup]:
    """`rows` (already sorted) split by verdict, worst verdict first, each keeping the order it had and its
    first `limit` rows."""
    by_verdict: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_verdict.setdefault(str(r.get("verdict")), []).append(r)
    return [VerdictGroup(v, len(rs), sum(int(r.get("bytes_at_risk") or 0) for r in rs), rs[:limit])
            for v, rs in sorted(by_verdict.items(), key=lambda item: -_severity(item[0]))]


def render_fleet(summary: dict[str, Any], rows: list[dict[str, Any]], *, links: dict[str, str] | None = None,
                 sort: str = "severity", order: str = "desc", verdict: str | None = None, q: str | None = None,
                 base_url: str | None = None, page_no: int = 1, per_page: int = FLEET_PAGE,
                 link_for: Callable[[str], str | None] | None = None, group_rows: int = GROUP_ROWS,
                 full_list: str | None = None, view_url: str | None = None, **page: Any) -> str:
    """The fleet summary table (job x verdict x bytes at risk). `base_url` (the view) turns the headers
    and verdict chips into sort/filter links, adds a search form and pages the rows (`page_no`, `per_page`:
    a 10,000-job scan is 100 pages, not one 60,000-pixel table); `link_for` names each shown job's report
    (asked only for the rows shown). Without `base_url` (the standalone file: no server to page, no script
    allowed) the rows fold by verdict, worst first, `group_rows` of each listed; the line under a longer
    group points to the whole list: `full_list` (the scan's `verdicts/` table) and `view_url` (the view)."""
    matching = fleet_rows(rows, sort=sort, order=order, verdict=verdict, q=q)
    pages = max(1, -(-len(matching) // per_page)) if base_url else 1
    page_no = min(max(1, page_no), pages)
    groups = [] if base_url else verdict_groups(matching, group_rows)
    shown = matching[(page_no - 1) * per_page: page_no * per_page] if base_url else [r for g in groups
                                                                                        for r in g.rows]
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
                       groups=groups, full_list=full_list, view_url=view_url, **page)
