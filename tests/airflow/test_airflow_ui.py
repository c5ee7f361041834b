"""The Airflow UI, in a real browser: log in, trigger the gate from its form, read the report view.

`airflow standalone` on 127.0.0.1 (low parallelism, generated admin password), Debian's headless
Chromium driven by Selenium. The run checks fraud-scoring's upgrade (real Flink keeps running and
its keyed state lands on an operator that never reads it), so the report view must show the core's
blocking verdict. A screenshot of the report is saved to .work/airflow-screenshots/ui-report.png.
"""

from __future__ import annotations

import json
import shutil
import time
import urllib.error
import urllib.request

import pytest

CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")


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
    if not (CHROMIUM and CHROMEDRIVER):
        pytest.fail("Debian's chromium and chromium-driver are needed: apt-get install -y chromium chromium-driver")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1400,1000"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    driver.implicitly_wait(0)
    yield driver
    driver.quit()


def _wait(driver, find, timeout=60.0, what="element"):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            found = find(driver)
            if found:
                return found
        except Exception as exc:  # the React UI re-renders; retry until the deadline
            last = exc
        time.sleep(0.5)
    driver.save_screenshot(str(_shot_dir() / f"timeout-{what.replace(' ', '-')}.png"))
    raise AssertionError(f"{what} did not appear in {timeout:.0f}s ({last})")


def _shot_dir():
    from demo import stack as st

    d = st.WORK / "airflow-screenshots"
    d.mkdir(parents=True, exist_ok=True)
    return d


def _api(standalone, path, method="GET", payload=None):
    body = json.dumps({"username": standalone.user, "password": standalone.password}).encode()
    req = urllib.request.Request(f"{standalone.url}/auth/token", data=body,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        token = json.loads(resp.read())["access_token"]
    req = urllib.request.Request(f"{standalone.url}{path}", method=method,
                                 data=json.dumps(payload).encode() if payload is not None else None,
                                 headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())


SET_VALUE_JS = """
const [el, value] = arguments;
const setter = Object.getOwnPropertyDescriptor(Object.getPrototypeOf(el), "value").set;
setter.call(el, value);
el.dispatchEvent(new Event("input", {bubbles: true}));
el.dispatchEvent(new Event("change", {bubbles: true}));
"""


def _set_text(driver, element_id, value):
    """Fill a form field the way React sees a paste: one input event with the whole value.

    (Typing key by key into the trigger form's fields dropped a character now and then in
    headless Chromium on a loaded machine; the submitted conf is asserted below anyway.)"""
    from selenium.webdriver.common.by import By

    field = _wait(driver, lambda d: d.find_element(By.ID, element_id), what=element_id)
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", field)
    field.click()
    driver.execute_script(SET_VALUE_JS, field, value)
    _wait(driver, lambda d: d.find_element(By.ID, element_id).get_attribute("value") == value, timeout=10,
          what=f"{element_id} value")


def _button(driver, text, scope="body"):
    """The enabled, visible button labelled `text` inside `scope` (a CSS selector)."""
    from selenium.webdriver.common.by import By

    buttons = [b for root in driver.find_elements(By.CSS_SELECTOR, scope)
               for b in root.find_elements(By.TAG_NAME, "button")
               if b.is_displayed() and b.text.strip() == text and b.is_enabled()]
    return buttons[-1] if buttons else None


def test_trigger_from_the_form_and_read_the_report(stack, standalone, browser):
    from selenium.webdriver.common.by import By

    from demo.stack import expected_verdict

    job = "fraud-scoring"
    driver = browser
    # log in through the Simple auth manager's form
    driver.get(f"{standalone.url}/")
    user = _wait(driver, lambda d: d.find_element(By.CSS_SELECTOR, "input[name=username]"), what="login form")
    user.send_keys(standalone.user)
    driver.find_element(By.CSS_SELECTOR, "input[type=password]").send_keys(standalone.password)
    driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()

    # the DAG is parsed by the standalone's dag processor
    _wait(driver, lambda d: _api(standalone, "/api/v2/dags/flink_upgrade_gate").get("dag_id"), timeout=120,
          what="dag parsed")
    _api(standalone, "/api/v2/dags/flink_upgrade_gate", "PATCH", {"is_paused": False})
    driver.get(f"{standalone.url}/dags/flink_upgrade_gate")
    _wait(driver, lambda d: _button(d, "Trigger"), what="trigger button").click()
    _set_text(driver, "element_job_name", job)
    _set_text(driver, "element_graph", stack.inputs[job]["graph"])
    driver.save_screenshot(str(_shot_dir() / "ui-trigger-form.png"))
    runs_path = "/api/v2/dags/flink_upgrade_gate/dagRuns?limit=100"
    # the stack's DB already holds the other tests' gate runs; the form's run is the one not among them
    before = {r["dag_run_id"] for r in _api(standalone, runs_path)["dag_runs"]}
    _wait(driver, lambda d: _button(d, "Trigger", "[role=dialog]"), what="trigger submit").click()

    # wait for the run the form started; it must fail at the gate (the verdict blocks the upgrade)
    def finished_run(_):
        new = [r for r in _api(standalone, runs_path)["dag_runs"] if r["dag_run_id"] not in before]
        assert len(new) <= 1, f"the form started {len(new)} runs"
        return new[0] if new and new[0]["state"] in ("success", "failed") else None

    run = _wait(driver, finished_run, timeout=240, what="dag run finished")
    assert run["conf"]["job_name"] == job and run["conf"]["graph"] == stack.inputs[job]["graph"]
    assert run["state"] == "failed"
    tis = {t["task_id"]: t["state"]
           for t in _api(standalone, f"/api/v2/dags/flink_upgrade_gate/dagRuns/{run['dag_run_id']}"
                                      "/taskInstances")["task_instances"]}
    assert tis["simulate_restore"] == "success" and tis["gate"] == "failed", tis

    # the report view: listed by job and run, one click to the report
    driver.get(f"{standalone.url}/upgrade-gate/")
    link = _wait(driver, lambda d: [a for a in d.find_elements(By.TAG_NAME, "a")
                                    if a.text == run["dag_run_id"]], what="report link")[0]
    link.click()
    badge = _wait(driver, lambda d: d.find_element(By.CSS_SELECTOR, "#verdict"), what="verdict")
    assert badge.text == expected_verdict(job) != "SAFE"
    rows = driver.find_elements(By.CSS_SELECTOR, "#operators tr.at-risk")
    assert rows and "keyed" in rows[0].text
    # the old and new job side by side: the state's writer and where it lands are outlined
    marked = driver.find_elements(By.CSS_SELECTOR, "svg.graphs g.op.at-risk")
    assert {m.get_attribute("data-side") for m in marked} == {"old", "new"}
    assert driver.find_elements(By.CSS_SELECTOR, "svg.bars")
    driver.save_screenshot(str(_shot_dir() / "ui-report.png"))

    # reports are for logged-in users only
    with pytest.raises(urllib.error.HTTPError) as denied:
        urllib.request.urlopen(f"{standalone.url}/upgrade-gate/", timeout=10)
    assert denied.value.code == 401

    # and the view is in Airflow's own navigation
    plugins = _api(standalone, "/api/v2/plugins")["plugins"]
    views = [v for p in plugins for v in p.get("external_views", [])]
    assert any(v["href"] == "/upgrade-gate/" for v in views), views
