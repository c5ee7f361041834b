"""The Airflow UI, in a real browser: what a person sees for a SAFE, a blocked and a crashed gate run.

`airflow standalone` on 127.0.0.1 (low parallelism, generated admin password), Debian's headless
Chromium driven by Selenium. Three runs of `flink_upgrade_gate` side by side:

* blocked, triggered from the form (its *Check* section; the form refuses an empty graph): fraud-scoring,
  whose keyed state real Flink hands to an operator that never reads it. A blocked upgrade is not a done
  one: the run is failed, the failed task is the gate, and the note "BLOCKED: STATE_MISROUTED, 4.8 KiB at
  risk — report: …" says why; the gate's "Upgrade report" extra link opens the report;
* SAFE (orders-enrichment, through the REST API): a green run and gate with the SAFE note;
* crashed (a graph that does not exist): a red failed `check`, tried once, a failed run, and the note
  "FAILED, no verdict: check failed …" that tells it from a blocked one.

The runs list and the DAG list show the same: SAFE green, blocked and crashed failed, each with its note.

Screenshots of the grid for each run, the trigger form, and every report page (single report, the
fleet summary) go to .work/airflow-screenshots/.
"""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
import uuid

import pytest

from demo import browser as browser_driver


@pytest.fixture(scope="module")
def standalone(stack):
    from demo import stack as st

    server = st.start_standalone(stack)
    yield server
    # SIGINT to the group; standalone's API server can take long to drain, so SIGKILL the group
    # after 20 s (every child is in it, so nothing is left behind either way)
    st.stop_process_group(server.proc, timeout=20)


@pytest.fixture(scope="module")
def browser():
    if not (browser_driver.CHROMIUM and browser_driver.CHROMEDRIVER):
        pytest.fail("Debian's chromium and chromium-driver are needed: apt-get install -y chromium chromium-driver")
    driver = browser_driver.start_chromium()
    yield driver
    driver.quit()


def _wait(driver, find, timeout=60.0, what="element"):
    return browser_driver.wait(driver, find, timeout, what, shots=_shot_dir())


def _shot_dir():
    from demo import stack as st

    d = st.WORK / "airflow-screenshots"
    d.mkdir(parents=True, exist_ok=True)
    return d


def _api(standalone, path, method="GET", payload=None, attempts=3):
    """One call to Airflow's REST API. `airflow standalone` keeps its metadata in SQLite, whose single writer can
    make the API server answer 500 while the scheduler writes: a read, a PATCH and a POST that names its own
    `dag_run_id` are asked again (a run the first POST created answers 409 and is read back); any other failure
    shows Airflow's own answer."""
    body = json.dumps({"username": standalone.user, "password": standalone.password}).encode()
    req = urllib.request.Request(f"{standalone.url}/auth/token", data=body,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        token = json.loads(resp.read())["access_token"]
    run_id = (payload or {}).get("dag_run_id") if method == "POST" else None
    for attempt in range(attempts):
        req = urllib.request.Request(f"{standalone.url}{path}", method=method,
                                     data=json.dumps(payload).encode() if payload is not None else None,
                                     headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")[:2000]
            if exc.code == 409 and run_id and attempt:
                return _api(standalone, f"{path}/{run_id}")
            if exc.code >= 500 and attempt + 1 < attempts and (method in ("GET", "PATCH") or run_id):
                time.sleep(2)
                continue
            raise AssertionError(f"{method} {path}: HTTP {exc.code}: {detail}") from None
    raise AssertionError("unreachable")


def _set_text(driver, element_id, value):
    browser_driver.set_text(driver, element_id, value, shots=_shot_dir())


_button = browser_driver.button


SECTION_CHECK = "Check: which upgrade to judge"
NOTE = re.compile(r"BLOCKED: STATE_MISROUTED, [\d.]+ (?:B|KiB|MiB) at risk — report: \S+")


def _login(driver, standalone):
    """Log in through Airflow's form (the module shares one browser session)."""
    browser_driver.login(driver, standalone.url, standalone.user, standalone.password, shots=_shot_dir())


def _red(css_colour: str) -> bool:
    """Chakra's red as the browser reports it: `oklch(L C H)` with a red hue, or an `rgb(...)`."""
    if re.fullmatch(r"#[0-9a-fA-F]{6}", css_colour):
        r, g, b = (int(css_colour[i:i + 2], 16) for i in (1, 3, 5))
        return r > 150 and g < 100 and b < 100
    nums = [float(x) for x in re.findall(r"[\d.]+", css_colour)]
    if css_colour.startswith("oklch") and len(nums) >= 3:
        return nums[1] > 0.1 and (nums[2] < 40 or nums[2] > 350)
    return len(nums) >= 3 and nums[0] > 150 and nums[1] < 100 and nums[2] < 100


def _colour(driver, badge) -> str:
    """A state badge's colour: its background, or (a task with a note gets a corner mark, drawn as a gradient
    over the same colour) Chakra's palette colour the gradient is made of."""
    plain = badge.value_of_css_property("background-color")
    if plain not in ("rgba(0, 0, 0, 0)", "transparent"):
        return plain
    return driver.execute_script("return getComputedStyle(arguments[0])"
                                 ".getPropertyValue('--chakra-colors-color-palette-solid').trim()", badge)


def _cell(driver, run_id, task_id):
    """The grid's square for one task of one run (its state badge)."""
    from selenium.webdriver.common.by import By

    return driver.find_element(By.CSS_SELECTOR, f'[id="grid-{run_id}-{task_id}"] [data-testid=task-state-badge]')


def _publish_fleet_summary(stack, run_id):
    """The fleet summary page, published as `flink_gate.fleet.publish` does, from the core's checks of the
    loaded jobs (the Spark scan itself is tested in test_airflow_dags.py; here only its page is read)."""
    from flink_gate.fleet import FLEET_REPORT_JOB
    from flink_gate.reports import ReportStore

    from demo.stack import RESTORES, SCENARIOS
    from upgrade_gate.gate import policy
    from upgrade_gate.report.fleet import render_fleet
    from upgrade_gate.report.html import render_report
    from upgrade_gate.storage.check_inputs import check_upgrade

    store = ReportStore(stack.reports_dir)
    rows, counts = [], {}
    for job, (release, scenario) in sorted(SCENARIOS.items()):
        case = RESTORES / release / scenario
        outcome = json.loads((case / "outcome.json").read_text())
        check = check_upgrade(str((case / outcome["savepoint"]["fixture"]).resolve()), case / "graph-b.json",
                              flink_version=release.rsplit(".", 1)[0]).to_json()
        at_risk = sum(int(x.get("bytes") or 0) for x in check["losses"])
        rows.append({"job": job, "verdict": check["verdict"], "bytes_at_risk": at_risk, "state_bytes": None})
        counts[check["verdict"]] = counts.get(check["verdict"], 0) + 1
        store.publish(job, run_id, check, render_report(check), {"dag_id": "flink_fleet_scan", "run_id": run_id})
    gate = "BLOCK" if any(policy.blocks(r["verdict"]) for r in rows) else "PASS"
    summary = {"gate": gate, "jobs": len(rows), "verdicts": counts, "bytes_at_risk": sum(r["bytes_at_risk"]
                                                                                          for r in rows)}
    store.publish(FLEET_REPORT_JOB, run_id, {"verdict": gate, "operators": [], "losses": [], "remedies": [],
                                             "summary": summary, "jobs": rows},
                  render_fleet(summary, rows), {"dag_id": "flink_fleet_scan", "run_id": run_id})
    return rows


def test_safe_blocked_and_crashed_runs_read_differently(stack, standalone, browser):
    from selenium.webdriver.common.by import By

    from demo.stack import expected_verdict, gate_conf

    job = "fraud-scoring"
    driver = browser
    shots = _shot_dir()
    _login(driver, standalone)

    # the DAG is parsed by the standalone's dag processor
    dag = "/api/v2/dags/flink_upgrade_gate"
    _wait(driver, lambda d: _api(standalone, dag).get("dag_id"), timeout=120, what="dag parsed")
    assert _api(standalone, dag)["description"].startswith("Check one Flink job's upgrade")
    _api(standalone, dag, "PATCH", {"is_paused": False})
    driver.get(f"{standalone.url}/dags/flink_upgrade_gate")
    _wait(driver, lambda d: _button(d, "Trigger"), what="trigger button").click()
    # check settings in their own section, apart from the upgrade settings
    _wait(driver, lambda d: _button(d, SECTION_CHECK, "[role=dialog]"), what="check section").click()
    assert _button(driver, "Upgrade: performed only after a SAFE verdict (mode = upgrade)", "[role=dialog]")
    _set_text(driver, "element_job_name", job)
    # an empty graph is refused before any run exists: the form will not submit
    _set_text(driver, "element_graph", "")
    _wait(driver, lambda d: _button(d, "Trigger", "[role=dialog]") is None, timeout=10, what="trigger refused")
    _set_text(driver, "element_graph", stack.inputs[job]["graph"])
    driver.save_screenshot(str(shots / "ui-trigger-form.png"))
    runs_path = f"{dag}/dagRuns?limit=100"
    # the stack's DB already holds the other tests' gate runs; the form's run is the one not among them
    before = {r["dag_run_id"] for r in _api(standalone, runs_path)["dag_runs"]}
    _wait(driver, lambda d: _button(d, "Trigger", "[role=dialog]"), what="trigger submit").click()
    form_run = _wait(driver, lambda _: [r for r in _api(standalone, runs_path)["dag_runs"]
                                        if r["dag_run_id"] not in before], what="the form's run")
    assert len(form_run) == 1, f"the form started {len(form_run)} runs"
    ids = {"blocked": form_run[0]["dag_run_id"]}
    # SAFE and crashed beside it, through the REST API
    missing = "s3://flink-graphs/no-such-job/graph.json"
    for name, conf in (("safe", gate_conf(stack, "orders-enrichment")),
                       ("crashed", gate_conf(stack, "orders-enrichment", graph=missing))):
        run = {"dag_run_id": f"ui-{name}-{uuid.uuid4().hex[:8]}", "logical_date": None, "conf": conf}
        ids[name] = _api(standalone, f"{dag}/dagRuns", "POST", run)["dag_run_id"]

    def finished(_):
        got = {k: _api(standalone, f"{dag}/dagRuns/{v}") for k, v in ids.items()}
        return got if all(r["state"] in ("success", "failed") for r in got.values()) else None

    runs = _wait(driver, finished, timeout=300, what="three runs finished")

    def tis(name):
        return {t["task_id"]: t for t in _api(standalone, f"{dag}/dagRuns/{ids[name]}/taskInstances")
                ["task_instances"]}

    blocked, safe, crashed = tis("blocked"), tis("safe"), tis("crashed")
    assert runs["blocked"]["conf"]["job_name"] == job and runs["blocked"]["conf"]["graph"] == stack.inputs[job]["graph"]
    assert expected_verdict(job) == "STATE_MISROUTED"
    assert runs["blocked"]["state"] == "failed" and blocked["gate"]["state"] == "failed", blocked["gate"]
    assert blocked["gate"]["try_number"] == 1  # a verdict is not retried
    assert all(blocked[t]["state"] == "upstream_failed" for t in ("decide", "approve", "upgrade", "verify"))
    assert NOTE.fullmatch(runs["blocked"]["note"]) and blocked["gate"]["note"] == runs["blocked"]["note"]
    assert runs["safe"]["state"] == "success" and safe["gate"]["state"] == "success"
    assert runs["safe"]["note"].startswith("SAFE: the upgrade may proceed")
    assert runs["crashed"]["state"] == "failed" and crashed["check"]["state"] == "failed"
    assert crashed["check"]["try_number"] == 1 and crashed["gate"]["state"] == "upstream_failed"
    assert runs["crashed"]["note"].startswith("FAILED, no verdict: check failed"), runs["crashed"]["note"]

    # the grid, as a person reads it: the note beside each run, the square of each task
    base = f"{standalone.url}/dags/flink_upgrade_gate/runs"
    driver.get(f"{base}/{ids['blocked']}/tasks/gate")
    _wait(driver, lambda d: "BLOCKED: STATE_MISROUTED" in d.find_element(By.TAG_NAME, "body").text,
          what="blocked note")
    header = driver.find_element(By.TAG_NAME, "body").text
    assert "Failed" in header and re.search(r"BLOCKED: STATE_MISROUTED, [\d.]+ KiB at risk — report:", header)
    driver.save_screenshot(str(shots / "ui-grid-blocked.png"))

    # the runs list, where people filter by state: SAFE success, blocked and crashed failed
    driver.get(f"{standalone.url}/dags/flink_upgrade_gate/runs")

    def rows(d):
        found = {}
        for tr in d.find_elements(By.CSS_SELECTOR, "tbody tr"):
            flat = "".join(tr.text.split())
            for name, run_id in ids.items():
                if "".join(run_id.split()) in flat:
                    found[name] = tr.text
        return found if len(found) == len(ids) else None

    listed = _wait(driver, rows, what="runs list")
    driver.save_screenshot(str(shots / "ui-runs-list.png"))
    assert "Success" in listed["safe"] and "Failed" not in listed["safe"], listed
    assert "Failed" in listed["blocked"] and "Failed" in listed["crashed"], listed
    # the DAG list's latest run is a failed one, not a green "success" for a blocked upgrade
    driver.get(f"{standalone.url}/dags")
    _wait(driver, lambda d: "flink_upgrade_gate" in d.find_element(By.TAG_NAME, "body").text, what="dag list")
    driver.save_screenshot(str(shots / "ui-dag-list.png"))

    driver.get(f"{base}/{ids['safe']}")
    _wait(driver, lambda d: "SAFE: the upgrade may proceed" in d.find_element(By.TAG_NAME, "body").text,
          what="SAFE note")
    driver.save_screenshot(str(shots / "ui-grid-safe.png"))
    # the grid's squares, read where none of them is the selected one: blocked is red like a crash, SAFE is not
    colours = {name: _colour(driver, _cell(driver, ids[name], task))
               for name, task in (("blocked", "gate"), ("safe", "gate"), ("crashed", "check"))}
    assert _red(colours["crashed"]) and _red(colours["blocked"]) and not _red(colours["safe"]), colours

    driver.get(f"{base}/{ids['crashed']}/tasks/check")
    _wait(driver, lambda d: f"{missing}: no such object" in d.find_element(By.TAG_NAME, "body").text,
          what="crash log")
    assert "Failed" in driver.find_element(By.TAG_NAME, "body").text
    assert _red(_cell(driver, ids["crashed"], "check").value_of_css_property("background-color"))
    driver.save_screenshot(str(shots / "ui-grid-crashed.png"))

    # the gate task's "Upgrade report" extra link leads to the report
    driver.get(f"{base}/{ids['blocked']}/tasks/gate/details")
    link = _wait(driver, lambda d: [a for a in d.find_elements(By.TAG_NAME, "a") if a.text == "Upgrade report"],
                 what="Upgrade report link")[0]
    href = link.get_attribute("href")
    assert href == runs["blocked"]["note"].rsplit("report: ", 1)[1] and "/upgrade-gate/report/fraud-scoring/" in href
    driver.save_screenshot(str(shots / "ui-extra-link.png"))
    driver.get(href)
    badge = _wait(driver, lambda d: d.find_element(By.CSS_SELECTOR, "#verdict"), what="verdict")
    assert badge.text == "STATE_MISROUTED"
    rows = driver.find_elements(By.CSS_SELECTOR, "#operators tr.at-risk")
    assert rows and "keyed" in rows[0].text
    # the old and new job side by side: the state's writer and where it lands are outlined
    marked = driver.find_elements(By.CSS_SELECTOR, "svg.graphs g.op.at-risk")
    assert {m.get_attribute("data-side") for m in marked} == {"old", "new"}
    assert driver.find_elements(By.CSS_SELECTOR, "svg.bars")
    driver.save_screenshot(str(shots / "ui-report-blocked.png"))

    # every report page: the SAFE report, the list, the fleet summary
    driver.get(f"{standalone.url}/upgrade-gate/report/orders-enrichment/"
               f"{runs['safe']['note'].rsplit('/', 1)[1]}")
    assert _wait(driver, lambda d: d.find_element(By.CSS_SELECTOR, "#verdict"), what="SAFE verdict").text == "SAFE"
    driver.save_screenshot(str(shots / "ui-report-safe.png"))
    driver.get(f"{standalone.url}/upgrade-gate/")
    _wait(driver, lambda d: [a for a in d.find_elements(By.TAG_NAME, "a") if a.text == ids["blocked"]],
          what="report list")
    driver.save_screenshot(str(shots / "ui-report-list.png"))
    fleet_run = "scheduled__2026-11-23T00_00_00_00_00"
    fleet = _publish_fleet_summary(stack, fleet_run)
    driver.get(f"{standalone.url}/upgrade-gate/report/fleet-scan/{fleet_run}")
    sentence = _wait(driver, lambda d: d.find_element(By.CSS_SELECTOR, "#sentence"), what="fleet sentence").text
    assert sentence.startswith(f"{len(fleet)} jobs checked")
    table = driver.find_element(By.TAG_NAME, "table").text
    assert all(r["job"] in table and r["verdict"] in table for r in fleet), table
    driver.save_screenshot(str(shots / "ui-report-fleet.png"))

    # reports are for logged-in users only
    with pytest.raises(urllib.error.HTTPError) as denied:
        urllib.request.urlopen(f"{standalone.url}/upgrade-gate/", timeout=10)
    assert denied.value.code == 401

    # and the view is in Airflow's own navigation
    plugins = _api(standalone, "/api/v2/plugins")["plugins"]
    views = [v for p in plugins for v in p.get("external_views", [])]
    assert any(v["href"] == "/upgrade-gate/" for v in views), views


def _real_fleet_rows(jobs: int) -> list[dict]:
    """`jobs` rows of `fleet_check`'s verdict table: each committed real-Flink scenario of the stack checked once
    by `spark_jobs.fleet_check.check_job` (the function the Spark scan maps over its jobs), then repeated under
    numbered job names (`<scenario job>-00042`) in turn, so the verdicts, bytes and errors are what the core said."""
    from demo.stack import RESTORES, SCENARIOS
    from spark_jobs.fleet_check import check_job

    checked = []
    for job, (release, scenario) in sorted(SCENARIOS.items()):
        case = RESTORES / release / scenario
        fixture = json.loads((case / "outcome.json").read_text())["savepoint"]["fixture"]
        row = check_job(str(case / "graph-b.json"), str((case / fixture).resolve()), hasher="v2", matching="fixed",
                        allow_non_restored_state=job == "ledger-rollup", flink_version=release.rsplit(".", 1)[0])
        checked.append((job, {**row, "error": None, "metadata": str(case / fixture), "spec": "graph-b.json"}))
    return [{**row, "job": f"{job}-{i:05d}"} for i in range(jobs) for job, row in [checked[i % len(checked)]]]


def test_a_10000_job_fleet_summary_loads_searches_and_pages(stack, standalone, browser):
    """Issue 32: a 1,000-job summary page was 63,000 pixels tall with no search, filter or paging. A summary of
    10,000 jobs, built as a fleet scan builds it (rows of `fleet_check` from real checks, `fleet_check.summarize`,
    `flink_gate.fleet.check_from_row` / `fleet_row`, served by the view through `render_fleet`), opens at 100 rows
    a page, worst first, in a sane time; the search box narrows it to one job, a verdict chip filters, and the
    pager pages, in the browser, and the page stays short."""
    from flink_gate.fleet import FLEET_REPORT_JOB, check_from_row, fleet_row
    from flink_gate.reports import ReportStore
    from selenium.webdriver.common.by import By

    from spark_jobs.fleet_check import summarize

    rows = _real_fleet_rows(10000)
    summary = summarize(rows)
    table = [fleet_row(r["job"], check_from_row(r)) for r in rows]
    counts = {v: n for v, n in summary["verdicts"].items() if n}
    assert len(counts) == 4 and sum(counts.values()) == 10000, counts  # SAFE and three blocking verdicts
    run = "scheduled__2026-11-26T00_00_00_00_00"
    ReportStore(stack.reports_dir).publish(
        FLEET_REPORT_JOB, run, {"verdict": summary["gate"], "operators": [], "losses": [], "remedies": [],
                                "summary": summary, "jobs": table}, "<p>fleet</p>",
        {"dag_id": "flink_fleet_scan", "run_id": run})
    driver = browser
    _login(driver, standalone)
    base = f"{standalone.url}/upgrade-gate/report/{FLEET_REPORT_JOB}/{run}"

    def pager(d):
        return d.find_element(By.CSS_SELECTOR, "#pager-top").text

    def shown(d):
        return [(r.get_attribute("data-job"), r.get_attribute("class")) for r in
                d.find_elements(By.CSS_SELECTOR, "tr.fleet-row")]

    started = time.monotonic()
    driver.get(base)
    first = _wait(driver, pager, what="fleet pager")
    loaded = time.monotonic() - started
    assert loaded < 30, f"the first page of 10,000 jobs took {loaded:.1f} s"  # seconds at any load, not minutes
    page1 = shown(driver)
    assert len(page1) == 100 and "Jobs 1–100 of 10000" in first and "page 1 of 100" in first, first
    assert "v-RESTORE_FAILS" in page1[0][1]  # worst first: Flink refuses these savepoints
    height = driver.execute_script("return document.body.scrollHeight")
    assert height < 10000, height  # one page of rows, not 10,000
    tallest = driver.execute_script(
        "return Math.max(...[...document.querySelectorAll('tr.fleet-row')].map(r => r.offsetHeight))")
    assert tallest < 70, tallest  # Flink's long refusal folds: a row is a line or three, not a paragraph
    driver.save_screenshot(str(_shot_dir() / "ui-fleet-10000.png"))
    # the pager: next goes to rows 101-200, last to the 100th page
    driver.find_element(By.CSS_SELECTOR, "#pager-top a[rel=next]").click()
    _wait(driver, lambda d: "page 2 of 100" in pager(d), what="page 2")
    assert "Jobs 101–200 of 10000" in pager(driver) and len(shown(driver)) == 100
    assert not {j for j, _ in shown(driver)} & {j for j, _ in page1}
    driver.find_element(By.LINK_TEXT, "last").click()
    _wait(driver, lambda d: "page 100 of 100" in pager(d), what="last page")
    assert "Jobs 9901–10000 of 10000" in pager(driver) and len(shown(driver)) == 100
    # a verdict chip: only those jobs, paged among themselves
    driver.get(base)
    _wait(driver, pager, what="fleet pager")
    driver.find_element(By.CSS_SELECTOR, "#filters a.badge.v-STATE_MISROUTED").click()
    _wait(driver, lambda d: "verdict=STATE_MISROUTED" in d.current_url, what="verdict filter")
    misrouted = counts["STATE_MISROUTED"]
    filtered = _wait(driver, pager, what="filtered pager")
    assert f"of {misrouted} matching (10000 in the scan)" in filtered, filtered
    assert all("v-STATE_MISROUTED" in cls for _, cls in shown(driver)) and len(shown(driver)) == 100
    # the search box narrows the whole scan to one job, through the real form (GET, allowed by the view's CSP)
    driver.get(base)
    box = _wait(driver, lambda d: d.find_element(By.CSS_SELECTOR, "#search input[name=q]"), what="search box")
    wanted = table[4321]
    box.send_keys(wanted["job"])
    driver.find_element(By.CSS_SELECTOR, "#search button[type=submit]").click()
    _wait(driver, lambda d: f"q={wanted['job']}" in d.current_url, what="search submitted")
    found = _wait(driver, shown, what="search result")
    assert [j for j, _ in found] == [wanted["job"]], found
    assert wanted["verdict"] == "SAFE" or f"v-{wanted['verdict']}" in found[0][1]
    print(f"10,000-job fleet summary (real checks): first page in {loaded:.2f} s, {height} px tall; "
          f"verdicts {counts}")


def test_the_report_index_searches_and_pages(stack, standalone, browser):
    """The index lists 50 jobs a page, the newest 5 runs of each, and searches by job name."""
    from flink_gate.reports import ReportStore
    from selenium.webdriver.common.by import By

    store = ReportStore(stack.reports_dir)
    for i in range(120):
        store.publish(f"idx-job-{i:03d}", "manual__1", {"verdict": "SAFE", "operators": [], "losses": [],
                                                         "remedies": []}, "<p/>", {"dag_id": "flink_upgrade_gate"})
    for r in range(7):  # one job with more runs than the index lists
        store.publish("idx-job-000", f"manual__{r + 2}", {"verdict": "SAFE", "operators": [], "losses": [],
                                                           "remedies": []}, "<p/>", {"dag_id": "flink_upgrade_gate"})
    driver = browser
    _login(driver, standalone)
    driver.get(f"{standalone.url}/upgrade-gate/?q=idx-job")
    pager = _wait(driver, lambda d: d.find_element(By.CSS_SELECTOR, "#pager-top"), what="index pager").text
    assert "120 jobs" in pager and "page 1 of 3" in pager, pager
    assert len(driver.find_elements(By.CSS_SELECTOR, "h2.job")) == 50
    older = driver.find_element(By.PARTIAL_LINK_TEXT, "every run of idx-job-000")
    older.click()
    _wait(driver, lambda d: "job=idx-job-000" in d.current_url, what="one job's runs")
    assert len(driver.find_elements(By.CSS_SELECTOR, "tbody tr")) == 8  # every run of that job
    driver.get(f"{standalone.url}/upgrade-gate/")
    box = _wait(driver, lambda d: d.find_element(By.CSS_SELECTOR, "#search input[name=q]"), what="index search")
    box.send_keys("idx-job-11")
    driver.find_element(By.CSS_SELECTOR, "#search button[type=submit]").click()
    _wait(driver, lambda d: "q=idx-job-11" in d.current_url, what="index search submitted")
    names = [h.text for h in driver.find_elements(By.CSS_SELECTOR, "h2.job")]
    assert names == [f"idx-job-{i}" for i in range(110, 120)], names


def test_the_verdict_appears_on_the_run_page_without_a_reload(stack, standalone, browser):
    """Issue 32: the run page showed the verdict note only after a reload. Airflow's run page copies the run note
    into its header when the page opens and never again, so the gate also names its task instance with the verdict
    (`map_index_template`): the page's task instance table, which polls until the run ends, shows it. Triggered
    from the form, the browser stays on the run page the UI opened (a marker set in that page would not survive a
    reload) until the verdict reads there, for a SAFE and a blocked upgrade."""
    from selenium.webdriver.common.by import By

    from demo.browser import trigger_from_form

    driver, api = browser, standalone.api()
    dag = "/api/v2/dags/flink_upgrade_gate"
    _wait(driver, lambda d: _api(standalone, dag).get("dag_id"), timeout=120, what="dag parsed")
    _api(standalone, dag, "PATCH", {"is_paused": False})
    _login(driver, standalone)
    # the SAFE sentence may carry a caveat before its link ("state types not compared …")
    safe = re.compile(r"SAFE: the upgrade may proceed, no state at risk[^\n]*? — report: \S+")
    expected = {"orders-enrichment": safe, "fraud-scoring": NOTE}
    for job, verdict in expected.items():
        run_id, _, clicked = trigger_from_form(driver, api, standalone.url, "flink_upgrade_gate", SECTION_CHECK,
                                               {"element_job_name": job, "element_graph": stack.inputs[job]["graph"]})
        # Airflow 3 takes the browser to the new run's page itself; nothing here opens or reloads it
        _wait(driver, lambda d, run_id=run_id: run_id in d.current_url, timeout=30, what="the run page")
        driver.execute_script("window.gateNoReload = arguments[0];", run_id)

        def shown(d, verdict=verdict):
            return verdict.search(d.find_element(By.TAG_NAME, "body").text)

        seen = _wait(driver, shown, timeout=300, what=f"{job} verdict on the run page")
        seen_s = time.monotonic() - clicked
        assert driver.execute_script("return window.gateNoReload;") == run_id, "the run page was reloaded"
        row = [tr.text for tr in driver.find_elements(By.CSS_SELECTOR, "tbody tr") if seen.group(0) in tr.text]
        assert row and row[0].startswith("gate"), row  # the gate task instance's row carries it
        run = _wait(driver, lambda _, run_id=run_id: (r := _api(standalone, f"{dag}/dagRuns/{run_id}"))["state"]
                    in ("success", "failed") and r, timeout=120, what="run ended")
        assert run["state"] == ("success" if job == "orders-enrichment" else "failed"), run
        # the same sentence as the run note the listener writes (clipped to the label's 250 characters)
        assert seen.group(0).split(" — report:")[0] in run["note"], (seen.group(0), run["note"])
        driver.save_screenshot(str(_shot_dir() / f"ui-verdict-live-{job}.png"))
        print(f"{job}: verdict on the run page {seen_s:.1f} s after the click, without a reload")
