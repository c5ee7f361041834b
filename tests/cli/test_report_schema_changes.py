"""The HTML report and the text table show the state schema diff (`schema_changes[]`) and the Flink 2.x
configuration check (`config[]`), rendered from real checks of the savepoints and configurations real Flink ran.

Expected results are what real Flink did: tests/fixtures/savepoints/state-schemas/changes/outcomes.json (job A's
savepoint restored by job B whose state types changed, on 1.20.5 and 2.3.0, HashMap and RocksDB) and
tests/fixtures/savepoints/state-schemas/config/outcomes.json (jobs started on each configuration). A person reading
the report must find the state named, Flink's own error, and for a refused setting the YAML that replaces it.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

from hashing.readers.source import load_yaml
from tests.browser_support import chromium_probe
from tests.gate.test_config_rules import portable
from upgrade_gate.gate.check import CheckResult
from upgrade_gate.report.check_table import render_table
from upgrade_gate.report.colours import colour
from upgrade_gate.report.html import render_html, render_report
from upgrade_gate.storage.check_inputs import check_upgrade
from upgrade_gate.vocabulary import Verdict

ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "savepoints" / "state-schemas"
CHANGES = ROOT / "changes"
CONFIGS = ROOT / "config"
SCHEMA_OUTCOMES = json.loads((CHANGES / "outcomes.json").read_text())
CONFIG_OUTCOMES = json.loads((CONFIGS / "outcomes.json").read_text())
CHANGED_STATE = {"pojo": "account", "row": "row", "rowdata": "rowdata", "key": "(key)"}
FLINK = {"1.20.5": "1.20", "2.3.0": "2.3"}


def _text(fragment: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", fragment)).split())


def _section(page: str, anchor: str) -> str:
    start = page.index(f'<h2 id="{anchor}">')
    end = page.find("<h2 ", start + 10)
    return page[start:end if end > 0 else len(page)]


def _rows(page: str, anchor: str, cls: str) -> list[tuple[str, dict[str, str], str]]:
    """(class attribute, data-* attributes, the row's text) of each row of one section's table, top to bottom."""
    out = []
    for attrs, body in re.findall(rf'<tr (class="{cls}[^"]*"[^>]*)>(.*?)</tr>', _section(page, anchor), re.S):
        data = {k: html.unescape(v) for k, v in re.findall(r'(?:data-)?([\w-]+)="([^"]*)"', attrs)}
        out.append((data.pop("class"), data, _text(body)))
    return out


def _flink_error(status: str) -> str:
    """Flink's recorded error without the serializers' `@hash` (Object#toString)."""
    return re.sub(r"@[0-9a-f]+", "", status.removeprefix("FAILED: "))


@pytest.fixture(scope="module")
def graph(tmp_path_factory: pytest.TempPathFactory) -> str:
    """SchemaChanges.job's graph (uids as in the Java job, parallelism 1)."""
    path = tmp_path_factory.mktemp("graph") / "evolving.json"
    path.write_text(json.dumps({"name": "evolving", "max_parallelism": 128, "nodes": [
        {"id": 1, "name": "numbers", "uid": "numbers", "parallelism": 1, "factory": "source"},
        {"id": 2, "name": "throttle", "uid": "throttle", "parallelism": 1},
        {"id": 3, "name": "evolving", "uid": "evolving", "parallelism": 1},
        {"id": 4, "name": "sink", "parallelism": 1}],
        "edges": [{"source": 1, "target": 2}, {"source": 2, "target": 3, "partitioner": "hash"},
                  {"source": 3, "target": 4}]}))
    return str(path)


def _schema_check(outcome: dict, graph: str) -> CheckResult:  # type: ignore[type-arg]
    """What a user runs: the running job's savepoint, the new graph, the new job's staging savepoint, the backend."""
    return check_upgrade(str(CHANGES / outcome["old_savepoint"]), graph, flink_version=FLINK[outcome["release"]],
                         new_job_savepoint=str(CHANGES / outcome["new_savepoint"]),
                         settings=(("state.backend.type", outcome["backend"]),))


def _outcome(release: str, backend: str, change: str) -> dict:  # type: ignore[type-arg]
    return next(o for o in SCHEMA_OUTCOMES if (o["release"], o["backend"], o["change"]) == (release, backend, change))


@pytest.mark.parametrize("outcome", SCHEMA_OUTCOMES, ids=lambda o: f"{o['release']}-{o['backend']}-{o['change']}")
def test_highlighted_schema_rows_are_where_real_flink_failed(outcome: dict, graph: str) -> None:  # type: ignore[type-arg]
    """All 36 recorded pairs: the report's verdict, the highlighted state and Flink's error shown beside it are
    what real Flink did with the pair; a change Flink migrated is a note, not a highlight."""
    page = render_html(_schema_check(outcome, graph), states={})
    if outcome["change"] == "none":
        assert '<h2 id="schema-changes">' not in page and _text(page).startswith("SAFE")
        return
    rows = _rows(page, "schema-changes", "schema-row")
    highlighted = [(data, text) for cls, data, text in rows if "at-risk v-RESTORE_FAILS" in cls]
    if outcome["status"] == "RUNNING":
        assert not highlighted and '<div class="verdict v-SAFE"' in page
        [(_, data, text)] = rows
        assert data["state"] == "account" and data["compat"] == "MIGRATION"
        assert "Note: compatible after migration, Flink rewrites the state on restore." in text
        return
    assert '<div class="verdict v-RESTORE_FAILS"' in page
    data, text = highlighted[0]
    assert data["state"] == CHANGED_STATE[outcome["change"].split("-")[0]]
    assert text.endswith(f"incompatible the restore fails: {_flink_error(outcome['status'])}")
    assert f"Flink would fail with: {_flink_error(outcome['status'])}" in _text(page)


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_a_retyped_pojo_field_reads_as_flink_reports_it(backend: str, graph: str) -> None:
    """What a person reads: operator, state, serializer role, the field with its old and new serializer, and
    the error real Flink threw on that backend (IllegalArgumentException on the heap, StateMigrationException on
    RocksDB). The text table says the same in one line."""
    outcome = _outcome("2.3.0", backend, "pojo-field-retyped")
    res = _schema_check(outcome, graph)
    page = render_html(res)
    [(cls, data, text)] = _rows(page, "schema-changes", "schema-row")
    error = _flink_error(outcome["status"])
    assert error.startswith("java.lang.IllegalArgumentException" if backend == "hashmap"
                            else "org.apache.flink.util.StateMigrationException")
    assert text == f"evolving account (value) value amount : field type changed: Long → String " \
                   f"incompatible the restore fails: {error}"
    assert "at-risk v-RESTORE_FAILS" in cls and data["compat"] == "INCOMPATIBLE"
    assert "Highlighted rows are incompatible: the restore fails with the error shown." in \
        _text(_section(page, "schema-changes"))
    table = " ".join(render_table(res).split())
    assert f"schema change (the restore fails): operator evolving: state 'account' (value): amount: field type " \
           f"changed (Long -> String). Flink: {error}" in table


def test_a_migrated_field_is_a_note_and_not_repeated_as_a_warning(graph: str) -> None:
    res = _schema_check(_outcome("2.3.0", "rocksdb", "pojo-field-added"), graph)
    assert res.verdict is Verdict.SAFE and any("field added" in w for w in res.warnings)
    page = render_html(res)
    [(cls, _, text)] = _rows(page, "schema-changes", "schema-row")
    assert "at-risk" not in cls and text.startswith("evolving account (value) value extra : field added: (none) → Int")
    assert "field added" not in " ".join(re.findall(r"<p><b>Warning:</b>(.*?)</p>", page))
    assert "schema change" not in render_table(res)


def _config_check(case: str, release: str, graph: str, *settings: tuple[str, str]) -> CheckResult:
    """A 1.20 savepoint upgraded to `release` with the case's configuration directory (as FLINK_CONF_DIR)."""
    return check_upgrade(str(CHANGES / "1.20.5" / "hashmap" / "none"), graph, flink_version=FLINK[release],
                         flink_config=str(CONFIGS / case), settings=settings)


@pytest.mark.parametrize("outcome", CONFIG_OUTCOMES, ids=lambda o: f"{o['release']}-{o['case']}")
def test_refused_settings_are_the_ones_real_flink_refused(outcome: dict, graph: str) -> None:  # type: ignore[type-arg]
    """Every recorded start: a refused row (the RESTORE_FAILS colour, Flink's error from the recorded chain)
    exactly where Flink did not start the job; a refused state backend comes with the YAML that replaces it."""
    page = render_html(_config_check(outcome["case"], outcome["release"], graph), states={})
    if outcome["release"] == "1.20.5":  # 1.x: none of 2.x's changes apply, and 1.20 ran every case
        assert outcome["status"] == "RUNNING" and '<h2 id="config">' not in page
        return
    if outcome["status"] == "RUNNING":  # `state.backend.type: hashmap`: nothing to say
        assert '<h2 id="config">' not in page and '<div class="verdict v-RESTORE_FAILS"' not in page
        return
    refused = [(data, text) for cls, data, text in _rows(page, "config", "config-row") if "v-RESTORE_FAILS" in cls]
    chain = [_flink_error(s).strip() for s in outcome["status"].removeprefix("FAILED: ").split(" <- ")]
    data, text = refused[0]
    shown = re.search(r"Flink fails with: (.*?)(?: state\.backend\.type: \w+)? (?:set|convert) ", text).group(1)
    assert portable(shown) in [portable(c) for c in chain]
    if outcome["case"] != "legacy-file-filesystem":
        assert data["kind"] == "refused" and "state.backend.type: hashmap" in text


def test_state_backend_filesystem_crossing_to_2_3(graph: str) -> None:
    """`state.backend: filesystem` (the 1.x key) on the way from 1.20 to 2.3: the refused row first, with the
    option, its value, Flink's refusal and the replacement as YAML; real Flink 2.3 ran that replacement
    (backend-type-hashmap), and the gate passes it. Then the removed and renamed options, as warnings."""
    res = _config_check("legacy-key-filesystem", "2.3.0", graph, ("state.checkpoints.dir", "s3://ckpt/evolving"),
                        ("jobmanager.heap.size", "1g"))
    assert res.verdict is Verdict.RESTORE_FAILS
    page = render_html(res)
    rows = _rows(page, "config", "config-row")
    assert [(d["key"], d["kind"]) for _, d, _ in rows] == [
        ("state.backend", "refused"), ("jobmanager.heap.size", "removed"), ("state.backend", "renamed"),
        ("state.checkpoints.dir", "renamed")]
    cls, _, text = rows[0]
    assert "at-risk v-RESTORE_FAILS" in cls
    assert text.startswith("state.backend filesystem ") and text.endswith(
        "refused state.backend: filesystem is refused by Flink 2.3: the job will not start Flink fails with: "
        "org.apache.flink.util.DynamicCodeLoadingException: Cannot find configured state backend factory class: "
        "filesystem state.backend.type: hashmap set state.backend.type: hashmap (state in the JobManager's or "
        "TaskManagers' heap, as 'filesystem' was); checkpoints go to execution.checkpointing.storage: filesystem "
        "with execution.checkpointing.dir")
    recorded = next(o for o in CONFIG_OUTCOMES if (o["case"], o["release"]) == ("legacy-key-filesystem", "2.3.0"))
    assert "Cannot find configured state backend factory class: filesystem" in recorded["status"]
    yaml = html.unescape(re.findall(r'<pre class="remedy v-RESTORE_FAILS"><code>(.*?)</code></pre>', page, re.S)[0])
    ran = next(o for o in CONFIG_OUTCOMES if (o["case"], o["release"]) == ("backend-type-hashmap", "2.3.0"))
    assert ran["status"] == "RUNNING"
    assert load_yaml(yaml, "report") == load_yaml((CONFIGS / "backend-type-hashmap" / "config.yaml").read_text(), "x")
    # the renamed spelling of the refused key gets no YAML of its own: `state.backend.type: filesystem` is refused
    assert rows[2][2].endswith("rename it to state.backend.type (Flink 2.3 refuses this value under either key: "
                               "paste the refused row's replacement instead.)")
    assert rows[3][2].endswith("execution.checkpointing.dir: s3://ckpt/evolving "
                               "rename it to execution.checkpointing.dir")
    assert "jobmanager.memory.process.size" in rows[1][2] and "silently has no effect" in rows[1][2]
    warnings = " ".join(re.findall(r"<p><b>Warning:</b>(.*?)</p>", page))
    assert "deprecated spelling" not in warnings and "was removed" not in warnings  # shown once, in the table
    table = " ".join(render_table(res).split())
    assert "config (the job will not start): state.backend: filesystem is refused by Flink 2.3" in table


def test_the_replacement_yaml_passes_the_gate(graph: str, tmp_path: Path) -> None:
    """Paste the report's YAML into the job's config.yaml: the gate no longer refuses the configuration."""
    page = render_html(_config_check("nested-filesystem", "2.3.0", graph), states={})
    yaml = html.unescape(re.findall(r'<pre class="remedy v-RESTORE_FAILS"><code>(.*?)</code></pre>', page, re.S)[0])
    (tmp_path / "config.yaml").write_text(yaml + "\n")
    fixed = check_upgrade(str(CHANGES / "1.20.5" / "hashmap" / "none"), graph, flink_version="2.3",
                          flink_config=str(tmp_path))
    assert not [c for c in fixed.config if c["blocking"]] and fixed.verdict is not Verdict.RESTORE_FAILS


def test_view_from_check_json_shows_the_same_sections(graph: str) -> None:
    """The Airflow view renders the published check.json: the same two sections as the standalone file."""
    outcome = _outcome("2.3.0", "hashmap", "pojo-field-retyped")
    res = check_upgrade(str(CHANGES / outcome["old_savepoint"]), graph, flink_version="2.3",
                        new_job_savepoint=str(CHANGES / outcome["new_savepoint"]),
                        flink_config=str(CONFIGS / "backend-type-jobmanager"))
    page = render_html(res)
    view = render_report(json.loads(json.dumps(res.to_json())), theme="dark")
    for anchor in ("config", "schema-changes"):
        assert _section(view, anchor) == _section(page, anchor)
    assert 'data-theme="dark"' in view


def test_hostile_values_are_text() -> None:
    check = {"verdict": "RESTORE_FAILS", "schema_changes": [
        {"operator_id": "ab" * 16, "operator": "<b>op</b>", "state": "<script>s</script>", "kind": "value",
         "serializer": "VALUE_SERIALIZER", "compatibility": "INCOMPATIBLE",
         "changes": [{"path": "<i>", "change": "x", "old": "<img src=x>", "new": "y", "compatibility": "INCOMPATIBLE"}],
         "flink_error": "<svg onload=1>"}],
        "config": [{"key": "state.backend", "value": "<script>v</script>", "origin": "-D", "blocking": False,
                    "text": "t", "remedy": "r", "flink_error": None}]}
    page = render_report(check)
    for raw in ("<script>", "<img", "<svg onload", "<b>op", "<i>"):
        assert raw not in page
    assert "&lt;script&gt;s&lt;/script&gt;" in page
    yaml = html.unescape(re.search(r'<pre class="remedy plain"><code>(.*?)</code></pre>', page, re.S).group(1))
    assert yaml == 'state.backend.type: "<script>v</script>"'  # quoted: YAML reads the value back as given


_PROBE = """<pre id="probe"></pre><script>
const rows = [...document.querySelectorAll("tr.schema-row, tr.config-row")].map(tr => ({
  row: tr.className.split(" ")[0], key: tr.dataset.state || tr.dataset.key, flagged: tr.classList.contains("at-risk"),
  shadow: getComputedStyle(tr.cells[0]).boxShadow, bg: getComputedStyle(tr.cells[0]).backgroundColor,
  badge: (b => b ? getComputedStyle(b).backgroundColor : null)(tr.querySelector(".badge.v-RESTORE_FAILS")),
  yaml: (p => p ? getComputedStyle(p).borderLeftColor : null)(tr.querySelector("pre.remedy")),
  shown: tr.getBoundingClientRect().height > 0}));
document.getElementById("probe").textContent = JSON.stringify({body: getComputedStyle(document.body).backgroundColor,
                                                                rows});
</script>"""


def _rgb(hex_colour: str) -> str:
    r, g, b = (int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgb({r}, {g}, {b})"


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_headless_chromium_draws_refusals_in_the_restore_fails_colour(theme: str, graph: str, tmp_path: Path) -> None:
    """The page as a browser lays it out (Debian's chromium, headless), in both themes: the incompatible state and
    the refused setting carry the RESTORE_FAILS colour (left bar, badge, the YAML's border) on the risk background;
    the migrated state and the renamed option do not. The probe script goes into a copy of the page only."""
    check = _config_check("legacy-key-filesystem", "2.3.0", graph).to_json()
    retyped = _schema_check(_outcome("2.3.0", "rocksdb", "pojo-field-retyped"), graph).to_json()
    added = _schema_check(_outcome("2.3.0", "rocksdb", "pojo-field-added"), graph).to_json()
    check["schema_changes"] = retyped["schema_changes"] + added["schema_changes"]
    page = render_report(check, theme=theme)
    probe = chromium_probe(page, _PROBE, tmp_path)
    assert probe["body"] == ("rgb(255, 255, 255)" if theme == "light" else "rgb(26, 32, 44)")
    rows = probe["rows"]
    assert [(r["row"], r["key"], r["flagged"]) for r in rows] == [
        ("config-row", "state.backend", True), ("config-row", "state.backend", False),
        ("schema-row", "account", True), ("schema-row", "account", False)]
    fails = _rgb(colour("RESTORE_FAILS"))
    for r in rows:
        assert r["shown"]
        if r["flagged"]:
            assert r["shadow"].startswith(fails) and "inset" in r["shadow"] and r["badge"] == fails
            assert r["bg"] not in (probe["body"], "rgba(0, 0, 0, 0)")
        else:
            assert r["shadow"] == "none" and r["badge"] is None
    assert rows[0]["yaml"] == fails


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_without_the_new_jobs_savepoint_a_safe_says_it_compared_no_state_types(backend: str, graph: str) -> None:
    """Real Flink refused this restore (a POJO field retyped). Without a savepoint of the new job the gate cannot
    see the new type: its SAFE must say it compared less, in every output; with one, it is RESTORE_FAILS."""
    outcome = _outcome("2.3.0", backend, "pojo-field-retyped")
    assert outcome["status"].startswith("FAILED")
    alone = check_upgrade(str(CHANGES / outcome["old_savepoint"]), graph, flink_version="2.3",
                          settings=(("state.backend.type", backend),))
    assert alone.verdict is Verdict.SAFE and not alone.state_types_compared
    assert alone.to_json()["state_types_compared"] is False
    table = " ".join(render_table(alone).split())
    assert table.startswith("VERDICT: SAFE (state types not compared)")
    assert "--new-job-savepoint" in table
    assert table.endswith("SAFE: the upgrade may proceed (state types not compared).")
    assert any(w.startswith("state types not compared: ") and "evolving" in w for w in alone.warnings)
    assert '<p id="types-not-compared">' in render_html(alone)
    compared = _schema_check(outcome, graph)
    assert compared.verdict is Verdict.RESTORE_FAILS and compared.state_types_compared
