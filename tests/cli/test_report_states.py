"""The HTML report's State section, rendered from real checks of real Flink 1.20 and 2.3 savepoints.

Per operator: every state (the ones Flink's own proxies read, flink-state-meta.json), its kind, serializer
and TTL; the states the gate's Kryo rule flags (STATE_CORRUPTED) marked with the rule's reason, and those
are exactly the states real Flink 2.3 restored wrong (restores.json, recorded by restoring the savepoints).
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

from tests.browser_support import chromium_probe
from upgrade_gate.gate.check import CheckResult
from upgrade_gate.report.colours import colour
from upgrade_gate.report.html import render_html, render_report
from upgrade_gate.report.states import state_map
from upgrade_gate.storage.check_inputs import check_upgrade
from upgrade_gate.storage.state_files import read_savepoint_states
from upgrade_gate.vocabulary import Verdict

ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "savepoints" / "state-schemas"
KEYED = "f4268aa2b91cfb64b42fde656d3e73a0"  # schema-keyed


def _text(fragment: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", fragment)).split())


def _check(release: str, case: str, flink: str) -> CheckResult:
    return check_upgrade(str(ROOT / release / case), str(ROOT / "graph-2.3.0.json"), flink_version=flink)


def _page(res: CheckResult) -> str:
    """The report as `upgrade-gate check --format html` writes it: the command reads the states, the renderer
    shows them."""
    return render_html(res, states=_states(res.savepoint))


def _states(savepoint: str) -> dict[str, list[dict[str, object]]]:
    return state_map(read_savepoint_states(savepoint))


def _section(page: str) -> str:
    start = page.index('<h2 id="states">')
    end = page.find("<h2 ", start + 10)
    return page[start:end if end > 0 else len(page)]


def _rows(page: str, operator_id: str) -> dict[str, tuple[bool, str]]:
    """state name -> (marked corrupted, the row's text) in one operator's state table."""
    table = _section(page).split(f'data-operator="{operator_id}"', 1)[1].split("</table>", 1)[0]
    return {html.unescape(name): ("v-STATE_CORRUPTED" in cls, _text(row))
            for cls, name, row in re.findall(r'<tr class="(state-row[^"]*)" data-state="([^"]*)">(.*?)</tr>', table,
                                             re.S)}


def _flink_state_names(d: Path) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for op in json.loads((d / "flink-state-meta.json").read_text())["operators"]:
        for s in op["subtasks"]:
            for k in s["keyed"]:
                out.setdefault(op["operator_id"], set()).update(st["name"] for st in k["states"])
            for o in s["operator"]:
                out.setdefault(op["operator_id"], set()).update(
                    st["name"] for st in (*o["operator_states"], *o["broadcast_states"]))
    return {k: v for k, v in out.items() if v}


@pytest.fixture(scope="module")
def crossing() -> tuple[CheckResult, str]:
    """A 1.20 RocksDB savepoint checked for Flink 2.3: the Kryo 2 -> 5 line is crossed."""
    res = _check("1.20.5", "rocksdb-canonical-p1", "2.3")
    assert res.verdict is Verdict.STATE_CORRUPTED
    return res, _page(res)


def test_every_state_of_every_operator_is_listed(crossing) -> None:
    _, page = crossing
    section = _section(page)
    expected = _flink_state_names(ROOT / "1.20.5" / "rocksdb-canonical-p1")
    listed = {op: set(_rows(page, op)) for op in re.findall(r'<table class="states" data-operator="(\w+)"', section)}
    assert listed == expected
    keyed = _rows(page, KEYED)
    assert keyed["pojo-collections"][1].startswith(
        "pojo-collections value Pojo(StateSchemas$CollectionPojo){counts: Kryo(java.util.HashMap), "
        "history: Kryo(java.util.ArrayList), id: Long} Pojo v2")
    assert keyed["ttl-value"][1] == "ttl-value value Long Ttl v3 TTL"
    assert keyed["pojo-map"][1].startswith("pojo-map map Map<String, Pojo(StateSchemas$PlainPojo){")
    assert keyed["_timer_state/event_user-timers"][1].startswith("_timer_state/event_user-timers timers Timer<Long")
    assert "schema-keyed f4268aa2b91cfb64b42fde656d3e73a0 · key serializer Long" in _text(section)


def test_flagged_states_are_the_ones_real_flink_restored_wrong(crossing) -> None:
    """restores.json: what the 1.20 savepoint held after a real restore on 2.3 (keyed states of this case)."""
    res, page = crossing
    recorded = next(r for r in json.loads((ROOT / "restores.json").read_text())
                    if r["savepoint"] == "1.20.5/rocksdb-canonical-p1" and r["restored_on"] == "2.3.0"
                    and r["states"])
    bad = {n for n, outcome in recorded["states"].items() if outcome != "OK"}
    keyed = _rows(page, KEYED)
    assert bad and {n for n, (flagged, _) in keyed.items() if flagged} == bad
    flagged_everywhere = {n for op in _flink_state_names(ROOT / "1.20.5" / "rocksdb-canonical-p1")
                          for n, (flagged, _) in _rows(page, op).items() if flagged}
    assert flagged_everywhere == {n for x in res.losses if x.get("corrupted") for n in x["state_names"]}
    text = keyed["pojo-collections"][1]
    assert "STATE_CORRUPTED counts: Kryo-serialized Java collection java.util.HashMap" in text
    assert "history: Kryo-serialized Java collection java.util.ArrayList" in text
    assert "STATE_CORRUPTED custom Kryo serializer (ugate.savepoints.StateSchemas$Tagged" in \
        keyed["kryo-custom-serializer"][1]
    assert keyed["kryo-opaque"][1].endswith("Kryo v2 Kryo")  # named, not flagged: Kryo 5 reads it
    assert "Marked rows restore corrupted" in _text(_section(page))


def test_same_release_flags_nothing_but_still_names_the_kryo_collections() -> None:
    res = _check("2.3.0", "hashmap-canonical-p2", "2.3")
    page = _page(res)
    keyed = _rows(page, KEYED)
    assert res.verdict is Verdict.SAFE and "STATE_CORRUPTED" not in _section(page)
    assert keyed["pojo-collections"][1].endswith("Pojo v2 Kryo collection")
    assert keyed["kryo-custom-serializer"][1].endswith("custom Kryo serializer")


def test_view_from_check_json(crossing) -> None:
    """The Airflow view renders the published check.json: with a `states` map in it, the same section; without
    it, the flagged states (from the check's losses) are still shown, with their reasons."""
    res, page = crossing
    check = json.loads(json.dumps(res.to_json()))
    states = _states(str(ROOT / "1.20.5" / "rocksdb-canonical-p1"))
    with_states = render_report({**check, "states": json.loads(json.dumps(states))}, theme="dark")
    assert _section(with_states) == _section(page) and 'data-theme="dark"' in with_states
    bare = render_report(check)
    flagged = {n for x in res.losses if x.get("corrupted") for n in x["state_names"]}
    shown = {html.unescape(n) for n in re.findall(r'<tr class="state-row at-risk v-STATE_CORRUPTED" '
                                                  r'data-state="([^"]*)"', _section(bare))}
    assert shown == flagged and "only the states the gate flags are listed" in _text(_section(bare))
    assert "restores CORRUPTED on Flink 2.3" in _text(_section(bare))


def test_hostile_state_names_are_text() -> None:
    check = {"verdict": "STATE_CORRUPTED", "operators": [{"operator_id": "ab" * 16, "name": "op", "state_bytes": 1}],
             "losses": [{"operator_id": "ab" * 16, "name": "op", "bytes": 1, "corrupted": True,
                         "state_names": ["<script>x</script>"], "reason": "<img src=x>"}]}
    page = render_report(check)
    assert "<script>x" not in page and "<img" not in page and "&lt;script&gt;x&lt;/script&gt;" in _section(page)


_PROBE = """<pre id="probe"></pre><script>
const rows = [...document.querySelectorAll("table.states tr.state-row")].map(tr => ({
  state: tr.dataset.state, flagged: tr.classList.contains("at-risk"),
  shadow: getComputedStyle(tr.cells[0]).boxShadow, bg: getComputedStyle(tr.cells[0]).backgroundColor,
  badge: (b => b ? getComputedStyle(b).backgroundColor : null)(tr.querySelector(".badge")),
  shown: tr.getBoundingClientRect().height > 0}));
document.getElementById("probe").textContent = JSON.stringify({body: getComputedStyle(document.body).backgroundColor,
                                                                rows});
</script>"""


def _rgb(hex_colour: str) -> str:
    r, g, b = (int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgb({r}, {g}, {b})"


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_headless_chromium_draws_the_flagged_rows_in_both_themes(crossing, theme: str, tmp_path: Path) -> None:
    """The page as a browser lays it out (Debian's chromium, headless): every state row is shown; flagged rows
    carry the STATE_CORRUPTED colour (left bar and badge) on the risk background; the theme's background holds.
    The probe script is added to a copy of the page only (reports carry no JavaScript)."""
    res, _ = crossing
    page = render_report(res.to_json(), None, _states(str(ROOT / "1.20.5" / "rocksdb-canonical-p1")), theme=theme)
    probe = chromium_probe(page, _PROBE, tmp_path)
    assert probe["body"] == ("rgb(255, 255, 255)" if theme == "light" else "rgb(26, 32, 44)")
    flagged = {n for x in res.losses if x.get("corrupted") for n in x["state_names"]}
    rows = probe["rows"]
    assert len(rows) == sum(len(v) for v in _flink_state_names(ROOT / "1.20.5" / "rocksdb-canonical-p1").values())
    assert all(r["shown"] for r in rows) and {r["state"] for r in rows if r["flagged"]} == flagged
    corrupted = _rgb(colour("STATE_CORRUPTED"))
    for r in rows:
        if r["flagged"]:
            assert r["shadow"].startswith(corrupted) and "inset" in r["shadow"] and r["badge"] == corrupted
            assert r["bg"] not in (probe["body"], "rgba(0, 0, 0, 0)")
        else:
            assert r["shadow"] == "none" and r["badge"] is None
