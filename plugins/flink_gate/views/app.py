"""The "Upgrade gate" view: a FastAPI app the Airflow API server mounts at `/upgrade-gate`.

`/upgrade-gate/` lists the published reports by job and run (newest first, verdict colour-coded);
`/upgrade-gate/report/{job}/{run}` shows one: the verdict, Flink's error if the restore would
fail, the operator table (which id each operator's state lives under after the upgrade, bytes
kept and lost), a bar plot of state per operator, the remedies, and the core's full HTML report
(`.../report.html`). Server-rendered HTML with inline SVG: no build step, no JavaScript bundle.
Every route requires an authenticated Airflow user, and every response (errors included) carries
`SECURITY_HEADERS`: reports quote job, operator and state names that users chose, so the pages
run no script at all and may be framed only by the Airflow UI on the same origin.
"""

from __future__ import annotations

import html
import json
import logging
from typing import Any

from airflow.api_fastapi.core_api.security import requires_authenticated
from fastapi import Depends, FastAPI, HTTPException, Request, Response
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse

from flink_gate.alerts import operators_at_risk
from flink_gate.reports import ReportEntry, ReportStore

URL_PREFIX = "/upgrade-gate"
RISK_STYLE = ' class="at-risk" style="background:#ffebee"'
COLOURS = {"SAFE": "#2e7d32", "STATE_LOSS": "#e65100", "STATE_MISROUTED": "#8e24aa", "RESTORE_FAILS": "#b71c1c"}
STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5rem;color:#222}
table{border-collapse:collapse;margin:.5rem 0}td,th{border:1px solid #ccc;padding:.3rem .6rem;text-align:left}
th{background:#f3f3f3}.verdict{color:#fff;padding:.15rem .5rem;border-radius:4px;font-weight:600}
code{font-size:.9em}.muted{color:#777}iframe{width:100%;height:60vh;border:1px solid #ccc}
"""

# What the pages need and nothing more: inline <style> and style attributes (ours and the core's
# report), inline SVG, data: images, the report frame from this origin; no script, no plugin,
# no form target, no <base>. The Airflow UI embeds the view (its external view) from the same
# origin, so framing is allowed from 'self' only (CSP frame-ancestors, and X-Frame-Options for
# browsers without CSP level 2).
CONTENT_SECURITY_POLICY = ("default-src 'none'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
                           "frame-src 'self'; frame-ancestors 'self'; base-uri 'none'; form-action 'none'")
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


def _badge(verdict: str) -> str:
    colour = COLOURS.get(verdict, "#555")
    return f'<span class="verdict" data-verdict="{html.escape(verdict)}" style="background:{colour}">' \
           f"{html.escape(verdict)}</span>"


def _page(title: str, body: str) -> HTMLResponse:
    return HTMLResponse(f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
                        f"<style>{STYLE}</style></head><body>{body}</body></html>")


def _store() -> ReportStore:
    return ReportStore()


@app.get("/", response_class=HTMLResponse)
def index() -> HTMLResponse:
    entries = _store().entries()
    if not entries:
        return _page("Upgrade gate reports", "<h1>Upgrade gate reports</h1><p>No reports yet: trigger "
                     "<code>flink_upgrade_gate</code> or wait for <code>flink_fleet_scan</code>.</p>")
    by_job: dict[str, list[ReportEntry]] = {}
    for e in entries:
        by_job.setdefault(e.job, []).append(e)
    parts = ["<h1>Upgrade gate reports</h1>"]
    for job, runs in sorted(by_job.items()):
        rows = "".join(
            f"<tr><td><a href='{URL_PREFIX}/report/{html.escape(e.job)}/{html.escape(e.run)}'>"
            f"{html.escape(str(e.meta.get('run_id', e.run)))}</a></td><td>{_badge(e.verdict)}</td>"
            f"<td>{html.escape(str(e.meta.get('dag_id', '')))}</td>"
            f"<td>{html.escape(str(e.meta.get('published_at', '')))}</td>"
            f"<td><code>{html.escape(str(e.meta.get('savepoint', '')))}</code></td></tr>" for e in runs)
        parts.append(f"<h2 class='job'>{html.escape(job)}</h2><table><tr><th>run</th><th>verdict</th>"
                     f"<th>DAG</th><th>published</th><th>savepoint</th></tr>{rows}</table>")
    return _page("Upgrade gate reports", "".join(parts))


def _entry(job: str, run: str, version: str | None = None) -> ReportEntry:
    entry = _store().get(job, run, version)
    if entry is None:
        raise HTTPException(status_code=404, detail=f"no report for job {job!r}, run {run!r}")
    return entry


def _bar_plot(operators: list[dict[str, Any]]) -> str:
    """Horizontal bars: state bytes per operator, the part at risk in red."""
    ops = [o for o in operators if int(o.get("state_bytes") or 0) > 0] or operators
    if not ops:
        return ""
    top = max(int(o.get("state_bytes") or 0) for o in ops) or 1
    row_h, label_w, bar_w = 22, 260, 420
    bars = []
    for i, o in enumerate(ops):
        total = int(o.get("state_bytes") or 0)
        lost = min(int(o.get("lost_bytes") or 0), total)
        y = i * row_h
        w_total = bar_w * total / top
        w_lost = bar_w * lost / top
        bars.append(
            f"<text x='0' y='{y + 15}' font-size='12'>{html.escape(str(o.get('name') or o.get('operator_id')))[:40]}"
            f"</text><rect x='{label_w}' y='{y + 4}' width='{w_total:.1f}' height='14' fill='#90caf9'/>"
            f"<rect x='{label_w}' y='{y + 4}' width='{w_lost:.1f}' height='14' fill='#e53935'/>"
            f"<text x='{label_w + w_total + 4:.1f}' y='{y + 15}' font-size='11'>{total} B"
            f"{f' ({lost} B lost)' if lost else ''}</text>")
    height = row_h * len(ops) + 4
    return (f"<h3>State per operator</h3><svg class='plot' width='{label_w + bar_w + 160}' height='{height}' "
            f"xmlns='http://www.w3.org/2000/svg'>{''.join(bars)}</svg>"
            "<p class='muted'>blue: state bytes in the savepoint; red: bytes the upgrade would drop</p>")


def _rescale_summary(rescale: dict[str, Any] | None) -> str:
    """'2 → 4 (max 128)': the restore's parallelism change; the per-subtask detail is in the full report."""
    if not rescale:
        return ""
    old_max, new_max = rescale.get("old_max_parallelism"), rescale.get("max_parallelism")
    maxp = f"max {old_max}" if old_max == new_max else f"max {old_max} → {new_max}"
    return f"{rescale.get('old_parallelism')} → {rescale.get('new_parallelism')} ({maxp})"


@app.get("/report/{job}/{run}", response_class=HTMLResponse)
def report(job: str, run: str) -> HTMLResponse:
    entry = _entry(job, run)
    check = json.loads((entry.path / "check.json").read_text())
    meta = entry.meta
    ops = check.get("operators", [])
    risk = {o.operator_id for o in operators_at_risk(check)}
    rows = "".join(
        f"<tr{RISK_STYLE if o.get('operator_id') in risk else ''}>"
        f"<td>{html.escape(str(o.get('name')))}</td><td><code>{html.escape(str(o.get('operator_id')))}</code></td>"
        f"<td>{html.escape(str(o.get('matched_by')))}</td><td>{html.escape(str(o.get('new_node_id')))}</td>"
        f"<td>{o.get('state_bytes')}</td><td>{o.get('lost_bytes')}</td>"
        f"<td>{html.escape(', '.join(o.get('state_names') or []))}</td>"
        f"<td>{html.escape(_rescale_summary(o.get('rescale')))}</td></tr>"
        for o in ops)
    err = (f"<p><b>Flink would say:</b> <code>{html.escape(str(check['flink_error']))}</code></p>"
           if check.get("flink_error") else "")
    remedies = "".join(f"<li>{html.escape(r if isinstance(r, str) else json.dumps(r))}</li>"
                       for r in check.get("remedies", []))
    body = (
        f"<p><a href='{URL_PREFIX}/'>&larr; all reports</a></p>"
        f"<h1>{html.escape(str(meta.get('job', job)))} {_badge(str(check.get('verdict')))}</h1>"
        f"<p>DAG <code>{html.escape(str(meta.get('dag_id', '')))}</code>, run "
        f"<code>{html.escape(str(meta.get('run_id', run)))}</code>; savepoint "
        f"<code>{html.escape(str(meta.get('savepoint', '')))}</code>; new graph "
        f"<code>{html.escape(str(meta.get('graph', '')))}</code>; hasher {html.escape(str(meta.get('hasher', '')))}"
        f", matching {html.escape(str(meta.get('matching', '')))}, allowNonRestoredState "
        f"{html.escape(str(meta.get('allow_non_restored_state', '')))}</p>{err}"
        f"<h3>Operators in the savepoint</h3><table id='operators'><tr><th>operator</th><th>id</th>"
        f"<th>matched by</th><th>new node</th><th>state bytes</th><th>lost bytes</th><th>states</th>"
        f"<th>parallelism (max)</th></tr>"
        f"{rows}</table>{_bar_plot(ops)}"
        + (f"<h3>Remedies</h3><ul>{remedies}</ul>" if remedies else "")
        # the frame asks for this page's version: a retry publishing meanwhile cannot mix two reports
        + f"<h3>Full report</h3><iframe src='{URL_PREFIX}/report/{html.escape(job)}/{html.escape(run)}/report.html"
        f"?version={html.escape(entry.version)}'></iframe>")
    return _page(f"{job}: {check.get('verdict')}", body)


@app.get("/report/{job}/{run}/report.html", response_class=HTMLResponse)
def report_html(job: str, run: str, version: str | None = None) -> HTMLResponse:
    return HTMLResponse((_entry(job, run, version).path / "report.html").read_text())


@app.get("/api/reports")
def api_reports() -> JSONResponse:
    return JSONResponse([{"job": e.job, "run": e.run, "verdict": e.verdict, **e.meta} for e in _store().entries()])


@app.get("/api/report/{job}/{run}")
def api_report(job: str, run: str) -> JSONResponse:
    return JSONResponse(json.loads((_entry(job, run).path / "check.json").read_text()))
