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


def test_a_10000_job_fleet_summary_loads_searches_and_pages(stack, standalone, browser):
    """Issue 32: a 1,000-job summary page was 63,000 pixels tall with no search, filter or paging. A summary of
    10,000 jobs (the fleet_check row shape) opens at 100 rows a page, worst first; the search box, a verdict chip
    and the pager work in the browser, and the page stays short."""
    from flink_gate.fleet import FLEET_REPORT_JOB
    from flink_gate.reports import ReportStore
    from selenium.webdriver.common.by import By

    verdicts = ("SAFE", "STATE_LOSS", "STATE_MISROUTED", "RESTORE_FAILS")
    rows = [{"job": f"job-{i:05d}", "verdict": verdicts[i % 4], "bytes_at_risk": (i % 4 != 0) * (i * 37 % 100000),
             "state_bytes": i * 100, "verdict_with_remedies": None, "error": None, "flink_error": None}
            for i in range(10000)]
    counts = {v: sum(1 for r in rows if r["verdict"] == v) for v in verdicts}
    run = "scheduled__2026-11-26T00_00_00_00_00"
    summary = {"gate": "BLOCK", "jobs": len(rows), "verdicts": counts,
               "bytes_at_risk": sum(r["bytes_at_risk"] for r in rows)}
    store = ReportStore(stack.reports_dir)
    store.publish(FLEET_REPORT_JOB, run, {"verdict": "BLOCK", "operators": [], "losses": [], "remedies": [],
                                          "summary": summary, "jobs": rows}, "<p>fleet</p>",
                  {"dag_id": "flink_fleet_scan", "run_id": run})
    driver = browser
    _login(driver, standalone)
    base = f"{standalone.url}/upgrade-gate/report/{FLEET_REPORT_JOB}/{run}"
    started = time.monotonic()
    driver.get(base)
    pager = _wait(driver, lambda d: d.find_element(By.CSS_SELECTOR, "#pager-top"), what="fleet pager").text
    loaded = time.monotonic() - started
    shown = driver.find_elements(By.CSS_SELECTOR, "tr.fleet-row")
    assert len(shown) == 100 and "Jobs 1–100 of 10000" in pager and "page 1 of 100" in pager, pager
    assert shown[0].get_attribute("data-job") == max((r for r in rows if r["verdict"] == "RESTORE_FAILS"),
                                                     key=lambda r: r["bytes_at_risk"])["job"]  # worst first
    height = driver.execute_script("return document.body.scrollHeight")
    assert height < 10000, height  # one page of rows, not 10,000
    driver.save_screenshot(str(_shot_dir() / "ui-fleet-10000.png"))
    # the pager: next goes to rows 101-200
    driver.find_element(By.CSS_SELECTOR, "#pager-top a[rel=next]").click()
    _wait(driver, lambda d: "page 2 of 100" in d.find_element(By.CSS_SELECTOR, "#pager-top").text, what="page 2")
    assert len(driver.find_elements(By.CSS_SELECTOR, "tr.fleet-row")) == 100
    # the search box: a job name fragment, through the real form (GET, allowed by the view's CSP)
    box = driver.find_element(By.CSS_SELECTOR, "#search input[name=q]")
    box.send_keys("job-0999")
    driver.find_element(By.CSS_SELECTOR, "#search button[type=submit]").click()
    _wait(driver, lambda d: "q=job-0999" in d.current_url, what="search submitted")
    found = [r.get_attribute("data-job") for r in
             _wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "tr.fleet-row"), what="search results")]
    assert sorted(found) == [f"job-0999{i}" for i in range(10)], found
    # a verdict chip on top of the search keeps the search
    driver.find_element(By.CSS_SELECTOR, "#filters a.badge.v-RESTORE_FAILS").click()
    _wait(driver, lambda d: "verdict=RESTORE_FAILS" in d.current_url, what="verdict filter")
    found = [r.get_attribute("data-job") for r in driver.find_elements(By.CSS_SELECTOR, "tr.fleet-row")]
    assert found and all(rows[int(j[4:])]["verdict"] == "RESTORE_FAILS" and j.startswith("job-0999") for j in found)
    print(f"10,000-job fleet summary: first page in {loaded:.2f} s, {height} px tall")


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
