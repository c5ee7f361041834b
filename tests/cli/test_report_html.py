"""The HTML reports read as a person needs them: the verdict sentence first, human bytes, operator
names (never bare node numbers), remedies as code to paste, the old and new job drawn side by side
with the operators at risk marked, a fleet table (paged in the view, folded by verdict as a standalone file),
both colour themes, and nothing a browser would run or fetch. Rendered from real checks of the committed Flink
2.3 savepoints."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

from hashing.readers import parse_graph
from tests.browser_support import chromium_probe
from upgrade_gate.report.colours import UNKNOWN_COLOUR, colour
from upgrade_gate.report.fleet import fleet_rows, note_summary, render_fleet
from upgrade_gate.report.html import render_html, render_report
from upgrade_gate.report.sizes import human_bytes
from upgrade_gate.storage.check_inputs import check_upgrade
from upgrade_gate.vocabulary import Verdict

R23 = Path(__file__).resolve().parents[1] / "fixtures" / "restores" / "2.3.0"
MOVED = R23 / "map-inserted-before-uidless-keyed"


def _graph(path: Path):
    return parse_graph(json.loads(path.read_text()), origin=str(path))


def _text(fragment: str) -> str:
    """What a reader sees: tags dropped, entities decoded, whitespace collapsed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", fragment)).split())


def _boxes(page: str, side: str) -> list[tuple[str, bool]]:
    """(operator name, marked at risk) of every box in one column of the graph picture."""
    return [(html.unescape(name), "at-risk" in cls)
            for cls, name in re.findall(rf'<g class="(op[^"]*)" data-side="{side}" data-name="([^"]*)"', page)]


@pytest.fixture(scope="module")
def moved():
    """An uid-less keyed operator 'moved': a map inserted before it takes its id by position."""
    new, old = _graph(MOVED / "graph-b.json"), _graph(MOVED / "graph-a.json")
    res = check_upgrade(str(R23 / "savepoints" / "uids-but-keyed-p2"), new, old_graph=old)
    assert res.verdict is Verdict.STATE_MISROUTED
    return res, new, old, render_html(res, new_graph=new, old_graph=old)


def test_verdict_sentence_and_human_bytes_come_first(moved) -> None:
    _, _, _, page = moved
    body = page.split("<body", 1)[1].split(">", 1)[1]
    first = _text(body[:body.index("</p>")])
    assert first.startswith("STATE_MISROUTED " + Verdict.STATE_MISROUTED.meaning)
    assert "4.8 KiB of state at risk (of 7.5 KiB)" in first  # 4866 bytes, counted once
    assert "4866 B" not in page and re.search(r">\s*4866\s*<", page) is None


def test_names_not_node_numbers(moved) -> None:
    _, _, _, page = moved
    ops = page[page.index('<table id="operators">'):]
    ops = ops[:ops.index("</table>")]
    row = next(r for r in ops.split("<tr") if "3a434c34ffe2fe820735436a4ca97107" in r)
    assert _text("<tr" + row).startswith("keyed inserted generated 4.8 KiB 4.8 KiB keyed")
    # a node number appears only beside its name (in the simulator's evidence sentence)
    assert "new node" not in page and page.count("node 830") == page.count("&#39;inserted&#39; (node 830)")


def test_remedies_are_code_to_paste(moved) -> None:
    _, _, _, page = moved
    blocks = [html.unescape(b) for b in re.findall(r'<pre class="remedy[^"]*"><code>(.*?)</code></pre>', page, re.S)]
    assert blocks == ['// on operator "keyed"\n.setUidHash("3a434c34ffe2fe820735436a4ca97107")',
                      '// on operator "inserted"\n.uid("inserted")']
    assert '{"operator_id"' not in page  # no raw JSON anywhere


def test_old_and_new_graph_side_by_side_with_the_moved_state_marked(moved) -> None:
    _, new, old, page = moved
    left, right = _boxes(page, "old"), _boxes(page, "new")
    assert sorted(n for n, _ in left) == sorted(n.name for n in old.graph.nodes)  # one box per operator
    assert sorted(n for n, _ in right) == sorted(n.name for n in new.graph.nodes)
    assert [n for n, risk in left if risk] == ["keyed"]  # the writer...
    assert [n for n, risk in right if risk] == ["inserted"]  # ...and where its state would land
    picture = page[page.index('<svg xmlns="http://www.w3.org/2000/svg" class="graphs'):]
    picture = picture[:picture.index("</svg>")]
    assert picture.count('class="edge"') == len(old.graph.edges) + len(new.graph.edges)
    assert picture.count('class="flow at-risk"') == 1 and picture.count('class="flow should"') == 1
    assert picture.count('class="frame"') >= 2  # chains drawn as groups


def test_from_check_json_alone_the_view_still_draws_both_columns(moved) -> None:
    """The view has only the published check.json: savepoint operators left, new job's nodes right."""
    res, new, _, _ = moved
    page = render_report(json.loads(json.dumps(res.to_json())), meta={"dag_id": "d", "run_id": "r"},
                         nav=[("all", "/x/")])
    left, right = _boxes(page, "old"), _boxes(page, "new")
    savepoint_ops = [o for o in res.operators if not str(o.get("note") or "").startswith("new operator")]
    assert len(left) == len(savepoint_ops) and len(right) == len(new.graph.nodes)  # a new operator is not on the left
    assert ("keyed", True) in left and ("inserted", True) in right
    assert '<a href="/x/">all</a>' in page and "<code>d</code>" in page


def test_rescale_shows_bytes_per_subtask() -> None:
    res = check_upgrade(str(R23 / "savepoints" / "uids-p2"), _graph(R23 / "rescale-up" / "graph-b.json"))
    page = render_html(res)
    assert res.verdict is Verdict.SAFE and "2 → 3 subtasks" in page
    keyed = page[page.index("<h3>keyed: 2 → 3 subtasks"):]
    keyed = keyed[:keyed.index("</table>")]
    subtasks = next(o for o in res.operators if o["name"] == "keyed")["rescale"]["subtasks"]
    assert sum(s["bytes"] for s in subtasks) > 0
    assert [_text(r) for r in re.findall(r"<tr>(.*?)</tr>", keyed, re.S)][1:] == [
        f"#{s['index']} {s['key_groups'][0]}..{s['key_groups'][1]} "
        f"{', '.join(str(i) for i in sorted({p['old_subtask'] for p in s['keyed_from']}))} {human_bytes(s['bytes'])}"
        for s in subtasks]


def test_hostile_names_are_text_and_nothing_runs_or_is_fetched() -> None:
    check = {"verdict": "STATE_LOSS", "graph": "<script>alert(1)</script>", "savepoint": "s3://b/<img src=x>",
             "operators": [{"operator_id": "ab" * 16, "name": "<b onclick=x>op</b>", "state_bytes": 2048,
                            "lost_bytes": 2048, "state_names": ["<i>s</i>"], "new_node_id": None}],
             "losses": [{"operator_id": "ab" * 16, "name": "<b onclick=x>op</b>", "bytes": 2048,
                         "state_names": ["<i>s</i>"], "reason": "<u>gone</u>"}],
             "remedies": [{"operator_id": "ab" * 16, "node_name": "<em>n</em>", "action": 'uid("</code>")',
                           "matched_by": "name", "reason": "r"}]}
    page = render_report(check)
    assert "<script" not in page and "<b onclick" not in page and "<img" not in page and "<em>" not in page
    assert "&lt;b onclick=x&gt;op&lt;/b&gt;" in page and "2.0 KiB" in page and "dropped" in page
    assert re.findall(r"https?://(?!www\.w3\.org/2000/svg)", page) == []


def test_both_themes_are_in_the_css() -> None:
    page = render_report({"verdict": "SAFE"})
    assert "@media (prefers-color-scheme: dark)" in page and ":root{--bg:#ffffff" in page
    assert 'name="color-scheme" content="light dark"' in page and "data-theme" not in page.split("<style>")[0]
    assert '<html lang="en" data-theme="dark">' in render_report({"verdict": "SAFE"}, theme="dark")
    assert '<html lang="en">' in render_report({"verdict": "SAFE"}, theme="<x>")


FLEET = [{"job": "orders", "verdict": "SAFE", "bytes_at_risk": 0, "state_bytes": 10_000},
         {"job": "fraud", "verdict": "STATE_MISROUTED", "bytes_at_risk": 4866, "state_bytes": 7_700},
         {"job": "ledger", "verdict": "STATE_LOSS", "bytes_at_risk": 5 * 1024 ** 2, "state_bytes": 9 * 1024 ** 2},
         {"job": "payments", "verdict": "RESTORE_FAILS", "bytes_at_risk": 300, "state_bytes": 300},
         {"job": "broken", "verdict": "ERROR", "bytes_at_risk": 0, "state_bytes": None, "error": "no _metadata"}]
SUMMARY = {"gate": "BLOCK", "verdicts": {"SAFE": 1, "STATE_MISROUTED": 1, "STATE_LOSS": 1, "RESTORE_FAILS": 1},
           "errors": 1, "bytes_at_risk": 5 * 1024 ** 2 + 5166}


def _fleet_jobs(page: str) -> list[str]:
    return re.findall(r'<tr class="fleet-row[^"]*" data-job="([^"]*)"', page)


def test_fleet_summary_lists_every_job_worst_first() -> None:
    page = render_fleet(SUMMARY, FLEET)
    assert _fleet_jobs(page) == ["broken", "payments", "fraud", "ledger", "orders"]
    assert "5.0 MiB" in page and "4.8 KiB" in page and "no _metadata" in page
    assert _text(page.split('id="sentence">', 1)[1]).startswith(
        "5 jobs checked, 1 RESTORE_FAILS, 1 SAFE, 1 STATE_LOSS, 1 STATE_MISROUTED, 1 not checked")
    assert "<pre>" not in page and '"gate"' not in page  # a table, not a JSON dump


def test_a_long_flink_error_folds_so_a_fleet_row_stays_one_or_two_lines() -> None:
    """A RESTORE_FAILS row carries Flink's whole refusal (its savepoint path, the operator, the advice), hundreds
    of characters; on a page of 100 such rows the table was taller than the screen many times over. The row shows
    the start of the message, and the whole of it opens in place."""
    from upgrade_gate.flink.assignment.errors import non_restored_state

    error = non_restored_state("file:/a/very/long/path/" + "x" * 200, "516eaa7f18ad784cd25c9db2e7dca057").message
    page = render_fleet(SUMMARY, [{**FLEET[3], "flink_error": error}, {**FLEET[4], "error": "no _metadata"}])
    summary = re.search(r'<td class="row-note"><details><summary>(.*?)</summary>(.*?)</details></td>', page)
    assert summary is not None and len(summary.group(1)) <= 111
    # the cell starts with the reason, not Flink's preamble and the savepoint's path (the same on every row)
    assert summary.group(1).startswith("Cannot map checkpoint/savepoint state for operator 516eaa7f")
    assert summary.group(2) == error
    assert '<td class="row-note">no _metadata</td>' in page  # a short note stays plain text
    assert note_summary("word " * 40).endswith("word…") and len(note_summary("word " * 40)) <= 111


def test_fleet_sort_and_filter_by_query_parameters() -> None:
    assert [r["job"] for r in fleet_rows(FLEET, sort="job", order="asc")] == \
        ["broken", "fraud", "ledger", "orders", "payments"]
    assert [r["job"] for r in fleet_rows(FLEET, sort="bytes_at_risk")][:3] == ["ledger", "fraud", "payments"]
    assert [r["job"] for r in fleet_rows(FLEET, verdict="STATE_LOSS")] == ["ledger"]
    assert [r["job"] for r in fleet_rows(FLEET, q="PAY")] == ["payments"]
    page = render_fleet(SUMMARY, FLEET, base_url="/upgrade-gate/report/fleet-scan/r1", sort="job", order="asc",
                        verdict=None, links={"fraud": "/upgrade-gate/report/fraud/r1"})
    # the header link flips the order of the current sort; the chips keep the sort and filter
    assert 'href="/upgrade-gate/report/fleet-scan/r1?order=desc&amp;sort=job">job</a> ▲' in page
    assert 'href="/upgrade-gate/report/fleet-scan/r1?order=asc&amp;sort=job&amp;verdict=STATE_LOSS"' in page
    assert '<a href="/upgrade-gate/report/fraud/r1">fraud</a>' in page


def test_one_colour_per_verdict() -> None:
    colours = [colour(v) for v in Verdict]
    assert UNKNOWN_COLOUR not in colours and len(set(colours)) == len(colours)
    assert colour("PASS") == colour(Verdict.SAFE) and colour("BLOCK") == colour(Verdict.RESTORE_FAILS)


RESTORES = sorted((R23.parent).glob("*/*/outcome.json"))
BOX = re.compile(r'<g class="op[^"]*" data-side="old" data-name="([^"]*)">(.*?)</g>', re.S)


@pytest.mark.parametrize("outcome", RESTORES, ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}")
def test_the_picture_and_the_tables_never_contradict_each_other(outcome: Path) -> None:
    """Issue 32, checked on every committed real-Flink scenario: an operator drawn as dropped is one the loss table
    names and nothing restores; every state nothing restores is drawn dropped; the savepoint's column holds only
    the savepoint's operators; a rescaled operator's per-subtask keyed bytes add up to its keyed bytes."""
    d = outcome.parent
    sp = (d / json.loads(outcome.read_text())["savepoint"]["fixture"]).resolve()
    res = check_upgrade(str(sp), d / "graph-b.json", flink_version=".".join(d.parent.name.split(".")[:2]),
                        allow_non_restored_state=True)
    check = res.to_json()
    page = render_html(res, new_graph=_graph(d / "graph-b.json"), states={})
    in_savepoint = {html.escape(o["name"] or o["operator_id"][:8]) for o in check["operators"]
                    if not str(o.get("note") or "").startswith("new operator")}
    drawn = {name: 'class="drop"' in body for name, body in BOX.findall(page)}
    assert set(drawn) <= in_savepoint, set(drawn) - in_savepoint  # no new-job operator in the savepoint column
    lost = {html.escape(x["name"] or x["operator_id"][:8]) for x in check["losses"]}
    nowhere = {html.escape(o["name"] or o["operator_id"][:8]) for o in check["operators"]
               if o["state_bytes"] and o["matched_by"] == "none" and not str(o.get("note") or "")}
    dropped = {name for name, d_ in drawn.items() if d_}
    assert dropped <= lost, dropped - lost  # drawn dropped: named in the loss table
    assert nowhere & lost & set(drawn) <= dropped, (nowhere & lost & set(drawn)) - dropped  # lost, restored nowhere
    assert "nothing (dropped)" not in page or nowhere, "a stateless operator is not 'dropped'"
    for o in check["operators"]:
        r = o.get("rescale")
        if r and any(p for s in r["subtasks"] for p in s["keyed_from"]):
            keyed = sum(p["bytes"] for s in r["subtasks"] for p in s["keyed_from"])
            assert keyed <= o["state_bytes"], (o["name"], keyed, o["state_bytes"])


VERDICTS_DIR = "s3://gate/_fleet/scheduled__2026-11-26/verdicts"
VIEW = "http://airflow.example:8080/upgrade-gate/report/fleet-scan/scheduled__2026-11-26"


def _big_fleet(jobs: int) -> tuple[dict, list[dict]]:
    """A scan of `jobs` jobs built from FLEET's rows in turn (`<job>-00042`), each at-risk row a little worse than
    the one before it, RESTORE_FAILS rows carrying Flink's whole refusal as a fleet row does; and its summary."""
    from upgrade_gate.flink.assignment.errors import non_restored_state

    refusal = non_restored_state(f"{VERDICTS_DIR[:-9]}savepoints/payments/savepoint-3f2a-9a21c",
                                 "516eaa7f18ad784cd25c9db2e7dca057").message
    rows = []
    for i in range(jobs):
        base = FLEET[i % len(FLEET)]
        rows.append({**base, "job": f"{base['job']}-{i:05d}", "bytes_at_risk": base["bytes_at_risk"] and
                     base["bytes_at_risk"] + i, **({"flink_error": refusal} if base["verdict"] == "RESTORE_FAILS"
                                                   else {})})
    counts = {v: sum(r["verdict"] == v for r in rows) for v in SUMMARY["verdicts"]}
    return {**SUMMARY, "verdicts": counts, "errors": sum(r["verdict"] == "ERROR" for r in rows),
            "bytes_at_risk": sum(r["bytes_at_risk"] for r in rows)}, rows


def test_a_10000_job_standalone_file_folds_by_verdict_worst_first_and_says_where_the_rest_are() -> None:
    """Issue 32: the standalone report.html of a 10,000-job scan listed every row (about 600,000 px). Without a
    server to page it or a script to filter it, it folds: a section per verdict, worst verdict first, with its
    count; the blocked and unchecked sections open, SAFE closed; each lists its worst GROUP_ROWS jobs, then how
    many more there are and where every job is (the scan's verdicts/ Parquet, the Airflow view)."""
    from upgrade_gate.report.fleet import GROUP_ROWS

    summary, rows = _big_fleet(10_000)
    page = render_fleet(summary, rows, full_list=VERDICTS_DIR, view_url=VIEW)
    assert len(page.encode()) < 200_000, len(page.encode())  # was every row: megabytes
    small = render_fleet(*_big_fleet(1_000), full_list=VERDICTS_DIR, view_url=VIEW)
    assert abs(len(page) - len(small)) < len(page) // 10  # ten times the jobs, the same file
    # the summary sentence stays, and each verdict's count is shown, in the jump line and on its section
    assert _text(page.split('id="sentence">', 1)[1]).startswith(
        "10000 jobs checked, 2000 RESTORE_FAILS, 2000 SAFE, 2000 STATE_LOSS, 2000 STATE_MISROUTED, 2000 not checked")
    order = ["ERROR", "RESTORE_FAILS", "STATE_MISROUTED", "STATE_LOSS", "SAFE"]
    sections = re.findall(r'<details class="fleet-group[^"]*" id="group-(\w+)" data-verdict="\w+" '
                          r'data-count="(\d+)"( open)?>\s*<summary>(.*?)</summary>', page, re.S)
    assert [(v, int(n), bool(o)) for v, n, o, _ in sections] == [(v, 2000, v != "SAFE") for v in order]
    assert [_text(s).split(" jobs")[0] for *_, s in sections] == [f"{v} 2000" for v in order]
    assert _text(page.split('id="groups">', 1)[1].split("</p>")[0]) == \
        "Jobs by verdict: " + " ".join(f"{v} 2000" for v in order)
    # worst first: within each verdict the listed rows are that verdict's most bytes at risk
    listed = _fleet_jobs(page)
    assert len(listed) == GROUP_ROWS * len(order)
    for k, v in enumerate(order):
        worst = [r["job"] for r in fleet_rows(rows, verdict=v)][:GROUP_ROWS]
        assert listed[k * GROUP_ROWS:(k + 1) * GROUP_ROWS] == worst
    assert listed[GROUP_ROWS * 3] == "ledger-09997"  # 5 MiB + 9997 B: the worst STATE_LOSS job
    # under each section, how many more and where they are
    for v in order:
        more = _text(page.split(f'id="more-{v}">', 1)[1].split("</p>")[0])
        assert more.startswith(f"Listed: {GROUP_ROWS} of 2000 {v} jobs")
        assert f"the other {2000 - GROUP_ROWS} are not in this file" in more
        assert f"verdicts/ table (Parquet) at {VERDICTS_DIR} and in the Airflow view, searchable and paged: " \
            f"{VIEW}" in more
        assert f'<a href="{VIEW}?verdict={v}">' in page
    # the rows keep the view's cells (bytes, folded Flink refusal)
    assert "5.0 MiB" in page and page.count('<td class="row-note"><details><summary>Cannot map') == GROUP_ROWS
    # nothing that runs or fetches
    assert "<script" not in page and re.findall(r'(?:src|action)=|https?://(?!airflow\.example)', page) == []


def test_a_small_scan_lists_every_job_and_points_nowhere() -> None:
    """Fewer jobs than a section holds: every one listed, no "more" line; without a known location the line
    still says how many are missing."""
    from upgrade_gate.report.fleet import GROUP_ROWS

    page = render_fleet(SUMMARY, FLEET, full_list=VERDICTS_DIR, view_url=VIEW)
    assert _fleet_jobs(page) == ["broken", "payments", "fraud", "ledger", "orders"] and 'class="more' not in page
    summary, rows = _big_fleet(500)
    page = render_fleet(summary, rows)
    more = _text(page.split('id="more-SAFE">', 1)[1].split("</p>")[0])
    assert more == f"Listed: {GROUP_ROWS} of 100 SAFE jobs; the other {100 - GROUP_ROWS} are not in this file."


def test_hostile_job_names_and_verdicts_in_the_standalone_fleet_file_are_text() -> None:
    rows = [{"job": "<script>alert(1)</script>", "verdict": '"><img src=x onerror=alert(1)>', "bytes_at_risk": 1,
             "state_bytes": None},
            {"job": "<b onclick=x>j</b>", "verdict": "SAFE", "bytes_at_risk": 0, "state_bytes": 5,
             "error": "<iframe src=//x>"}]
    page = render_fleet({"gate": "BLOCK", "verdicts": {}}, rows * 60, full_list="<img src=y>",
                        view_url='"><script>x</script>')
    assert "<script" not in page and "<img" not in page and "<b onclick" not in page and "<iframe" not in page
    assert 'data-verdict="&#34;&gt;&lt;img src=x onerror=alert(1)&gt;"' in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


_FLEET_PROBE = """<pre id="probe"></pre><script>
const measure = () => ({height: document.documentElement.scrollHeight,
  groups: [...document.querySelectorAll("details.fleet-group")].map(d => ({verdict: d.dataset.verdict, open: d.open,
    rows: [...d.querySelectorAll("tr.fleet-row")].filter(r => r.checkVisibility()).length,
    more: (m => m ? m.checkVisibility() : null)(d.querySelector("p.more"))}))});
const closed = measure();
document.getElementById("group-SAFE").open = true;  // what a click on the SAFE section's summary does
document.getElementById("probe").textContent = JSON.stringify({closed, opened: measure(),
                                                               screen: window.innerHeight});
</script>"""


def test_headless_chromium_the_10000_job_file_is_a_few_screens_with_safe_closed(tmp_path: Path) -> None:
    """The standalone file of a 10,000-job scan as a browser lays it out (Debian's chromium, headless, a 1400x1000
    window, opened from disk): a few screens tall with SAFE closed, every blocked section's rows and its "more"
    line shown; opening SAFE shows its rows. The probe goes into a copy of the page only."""
    from upgrade_gate.report.fleet import GROUP_ROWS

    page = render_fleet(*_big_fleet(10_000), full_list=VERDICTS_DIR, view_url=VIEW)
    probe = chromium_probe(page, _FLEET_PROBE, tmp_path, window=(1400, 1000))
    closed, opened, screen = probe["closed"], probe["opened"], probe["screen"]
    assert [(g["verdict"], g["open"], g["rows"], g["more"]) for g in closed["groups"]] == [
        ("ERROR", True, GROUP_ROWS, True), ("RESTORE_FAILS", True, GROUP_ROWS, True),
        ("STATE_MISROUTED", True, GROUP_ROWS, True), ("STATE_LOSS", True, GROUP_ROWS, True), ("SAFE", False, 0, False)]
    assert closed["height"] < 6 * screen, (closed["height"], screen)  # every row listed was ~600,000 px
    assert opened["groups"][-1] == {"verdict": "SAFE", "open": True, "rows": GROUP_ROWS, "more": True}
    assert opened["height"] > closed["height"] + GROUP_ROWS * 15
    print(f"standalone fleet file of 10,000 jobs: {closed['height']} px with SAFE closed, {opened['height']} px "
          f"open, {len(page.encode())} bytes")
