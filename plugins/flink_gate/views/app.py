"""The "Upgrade gate" view: a FastAPI app the Airflow API server mounts at `/upgrade-gate`.

`/upgrade-gate/` lists the published reports by job and run (newest first, verdict colour-coded);
`/upgrade-gate/report/{job}/{run}` shows one through the core's report templates
(`upgrade_gate.report`, the same ones `upgrade-gate check --format html` uses), so the
page and the standalone file read alike; a fleet scan's report is its summary table (job x verdict
x bytes at risk), sorted and filtered by query parameters (`sort`, `order`, `verdict`, `q`).
`theme=light|dark` forces a theme; otherwise the page follows the browser's colour scheme, as the
Airflow UI does. Server-rendered HTML with inline SVG: no build step, no JavaScript at all.
Every route requires an authenticated Airflow user, and every response (errors included) carries
`SECURITY_HEADERS`: reports quote job, operator and state names that users chose, so the pages
run no script at all and may be framed only by the Airflow UI on the same origin.
"""

from __future__ import annotations

import json
import logging
from typing import Any
from urllib.parse import urlencode

from airflow.api_fastapi.core_api.security import requires_authenticated
from fastapi import Depends, FastAPI, HTTPException, Request, Response
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse

from flink_gate.reports import ReportEntry, ReportStore, report_name
from upgrade_gate.report.fleet import render_fleet
from upgrade_gate.report.html import render_page, render_report

URL_PREFIX = "/upgrade-gate"
FLEET_REPORT_JOB = "fleet-scan"  # the pseudo-job flink_gate.fleet publishes the fleet summary under
SORT_KEYS = ("severity", "job", "bytes_at_risk", "state_bytes")

# What the pages need and nothing more: inline <style> and style attributes (ours and the core's
# report), inline SVG, data: images, the report frame from this origin; no script, no plugin, no
# <base>; forms only to this origin (the fleet page's search is a GET form: the view changes nothing).
# The Airflow UI embeds the view (its external view) from the same origin, so framing is allowed from
# 'self' only (CSP frame-ancestors, and X-Frame-Options for browsers without CSP level 2).
CONTENT_SECURITY_POLICY = ("default-src 'none'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
                           "frame-src 'self'; frame-ancestors 'self'; base-uri 'none'; form-action 'self'")
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Frame-Options": "SAMEORIGIN",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}

# Only users logged in to Airflow (its auth manager's JWT, cookie or bearer) see reports: they name
# jobs, savepoints and state layouts.
app = FastAPI(title="Flink Upgrade Gate reports", docs_url=None, redoc_url=None, openapi_url=None,
              dependencies=[Depends(requires_authenticated())])


@app.middleware("http")
async def security_headers(request: Request, call_next: Any) -> Response:
    """Every response the app sends, 401/404 included (the app's exception handlers run inside)."""
    response = await call_next(request)
    response.headers.update(SECURITY_HEADERS)
    return response


@app.exception_handler(Exception)
async def server_error(request: Request, exc: Exception) -> Response:
    """An unexpected error: Starlette answers it outside the middleware above, so set the headers
    here too, and keep the traceback (paths, file contents) in the server log, not the page."""
    logging.getLogger(__name__).error("upgrade-gate view: %s %s failed", request.method, request.url.path,
                                      exc_info=exc)
    return PlainTextResponse("Internal Server Error", status_code=500, headers=SECURITY_HEADERS)


def _html(text: str) -> HTMLResponse:
    return HTMLResponse(text)


def _theme(theme: str | None) -> str | None:
    return theme if theme in ("light", "dark") else None


def _nav(job: str | None = None, run: str | None = None, version: str | None = None) -> list[tuple[str, str]]:
    nav = [("← all reports", f"{URL_PREFIX}/")]
    if job and run:
        nav.append(("standalone report", f"{URL_PREFIX}/report/{job}/{run}/report.html?version={version or ''}"))
        nav.append(("JSON", f"{URL_PREFIX}/api/report/{job}/{run}"))
    return nav


def _store() -> ReportStore:
    return ReportStore()


INDEX_JOBS = 50  # jobs per index page
INDEX_RUNS = 5  # newest runs listed per job; `?job=<name>` lists them all


@app.get("/", response_class=HTMLResponse)
def index(q: str | None = None, page: int = 1, job: str | None = None, theme: str | None = None) -> HTMLResponse:
    """Every job with a report, newest runs first: searched by name (`q`), 50 jobs a page, 5 runs a job (`job`
    lists one job's every run). A fleet of 10,000 jobs was one 140,000-pixel page before (issue 32)."""
    q = (q or "").strip()[:100] or None
    by_job: dict[str, list[dict[str, Any]]] = {}
    for e in _store().entries():
        if (job and e.job != job) or (q and q.lower() not in e.job.lower()):
            continue
        by_job.setdefault(e.job, []).append({
            "href": f"{URL_PREFIX}/report/{e.job}/{e.run}", "run_id": str(e.meta.get("run_id", e.run)),
            "verdict": e.verdict, "dag_id": str(e.meta.get("dag_id", "")),
            "published_at": str(e.meta.get("published_at", "")), "savepoint": str(e.meta.get("savepoint", ""))})
    jobs = sorted(by_job.items())
    pages = max(1, -(-len(jobs) // INDEX_JOBS))
    page = min(max(1, page), pages)
    shown = []
    for name, runs in jobs[(page - 1) * INDEX_JOBS: page * INDEX_JOBS]:
        runs.sort(key=lambda r: r["published_at"], reverse=True)
        limit = len(runs) if job else INDEX_RUNS
        shown.append((name, runs[:limit], len(runs) - min(limit, len(runs))))

    def url(**changes: Any) -> str:
        args = {k: v for k, v in {"q": q, "job": job, **changes}.items() if v not in (None, "", 1)}
        return f"{URL_PREFIX}/" + (f"?{urlencode(args)}" if args else "")

    return _html(render_page("index.html.j2", jobs=shown, total=len(jobs), page_no=page, pages=pages, q=q,
                             one_job=job, url=url, base=f"{URL_PREFIX}/", theme=_theme(theme)))


def _entry(job: str, run: str, version: str | None = None) -> ReportEntry:
    entry = _store().get(job, run, version)
    if entry is None:
        raise HTTPException(status_code=404, detail=f"no report for job {job!r}, run {run!r}")
    return entry


class BadStoredReport(Exception):
    """A stored report that cannot be read or shown (edited by hand, truncated, from a foreign tool)."""

    def __init__(self, entry: ReportEntry, what: str) -> None:
        super().__init__(what)
        self.entry, self.what = entry, what


@app.exception_handler(BadStoredReport)
async def bad_stored_report(request: Request, exc: BadStoredReport) -> Response:
    """An explicit page, not a bare 500: which report, and what is wrong with it (never its contents)."""
    logging.getLogger(__name__).warning("upgrade-gate view: stored report %s/%s: %s", exc.entry.job, exc.entry.run,
                                        exc.what)
    page = render_page("bad_report.html.j2", job=exc.entry.job, run=exc.entry.run, what=exc.what, nav=_nav())
    return HTMLResponse(page, status_code=422, headers=SECURITY_HEADERS)


def _stored_check(entry: ReportEntry) -> dict[str, Any]:
    """The report's check.json, or `BadStoredReport` saying what is wrong with it."""
    try:
        check = json.loads((entry.path / "check.json").read_text())
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise BadStoredReport(entry, f"check.json is not readable JSON ({type(exc).__name__})") from None
    if not isinstance(check, dict) or not isinstance(check.get("verdict"), str):
        raise BadStoredReport(entry, "check.json is not a gate check (no verdict)")
    for key in ("operators", "losses", "remedies", "jobs"):
        rows = check.get(key)
        if rows is not None and not (isinstance(rows, list) and all(isinstance(r, dict) for r in rows)):
            raise BadStoredReport(entry, f"check.json's {key!r} is not a list of records")
    return check


def _fleet_page(entry: ReportEntry, check: dict[str, Any], *, sort: str, order: str, verdict: str | None,
                q: str | None, page: int, theme: str | None) -> HTMLResponse:
    """The fleet summary: the scan's jobs, searched, filtered, sorted and paged, each linked to its own report of
    the same run (looked up for the shown page only: a 10,000-job scan is not 10,000 store reads per view)."""
    store = _store()

    def link_for(job: str) -> str | None:
        return (f"{URL_PREFIX}/report/{report_name(job)}/{entry.run}"
                if store.get(report_name(job), entry.run) is not None else None)

    return _html(render_fleet(
        check.get("summary") or {}, list(check.get("jobs") or []), link_for=link_for,
        sort=sort if sort in SORT_KEYS else "severity", order="asc" if order == "asc" else "desc",
        verdict=verdict or None, q=(q or "")[:100] or None, page_no=page,
        base_url=f"{URL_PREFIX}/report/{entry.job}/{entry.run}", nav=_nav(entry.job, entry.run, entry.version),
        theme=_theme(theme)))


@app.get("/report/{job}/{run}", response_class=HTMLResponse)
def report(job: str, run: str, sort: str = "severity", order: str = "desc", verdict: str | None = None,
           q: str | None = None, page: int = 1, theme: str | None = None) -> HTMLResponse:
    entry = _entry(job, run)
    check = _stored_check(entry)
    try:
        if job == FLEET_REPORT_JOB or "summary" in check:
            return _fleet_page(entry, check, sort=sort, order=order, verdict=verdict, q=q, page=page, theme=theme)
        return _html(render_report(check, check.get("graphs"),
                                   meta={**entry.meta, "run_id": entry.meta.get("run_id", run)},
                                   nav=_nav(job, run, entry.version), theme=_theme(theme)))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise BadStoredReport(entry, f"check.json lacks what the page shows ({type(exc).__name__}: "
                              f"{str(exc)[:120]})") from None


@app.get("/report/{job}/{run}/report.html", response_class=HTMLResponse)
def report_html(job: str, run: str, version: str | None = None) -> HTMLResponse:
    return HTMLResponse((_entry(job, run, version).path / "report.html").read_text())


@app.get("/api/reports")
def api_reports() -> JSONResponse:
    return JSONResponse([{"job": e.job, "run": e.run, "verdict": e.verdict, **e.meta} for e in _store().entries()])


@app.get("/api/report/{job}/{run}")
def api_report(job: str, run: str) -> JSONResponse:
    return JSONResponse(_stored_check(_entry(job, run)))
