"""The Airflow UI in Debian's headless Chromium, driven through Selenium as a person uses it.

Shared by the UI test (tests/airflow/test_airflow_ui.py) and the click -> verdict benchmark
(bench/bench_gate_click.py), so the benchmark measures the same clicks the test proves work.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")

SET_VALUE_JS = """
const [el, value] = arguments;
const setter = Object.getOwnPropertyDescriptor(Object.getPrototypeOf(el), "value").set;
setter.call(el, value);
el.dispatchEvent(new Event("input", {bubbles: true}));
el.dispatchEvent(new Event("change", {bubbles: true}));
"""


def start_chromium() -> Any:
    """A headless Chromium session (a 1400x1000 window, as the screenshots are read)."""
    if not (CHROMIUM and CHROMEDRIVER):
        raise RuntimeError("Debian's chromium and chromium-driver are needed: apt-get install -y chromium "
                           "chromium-driver")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1400,1000"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    driver.implicitly_wait(0)
    return driver


def wait(driver: Any, find: Callable[[Any], Any], timeout: float = 60.0, what: str = "element",
         shots: Path | None = None, poll: float = 0.5) -> Any:
    """What `find` returns once it is truthy; a screenshot into `shots` and an AssertionError after `timeout`."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            found = find(driver)
            if found:
                return found
        except Exception as exc:  # the React UI re-renders; retry until the deadline
            last = exc
        time.sleep(poll)
    if shots is not None:
        driver.save_screenshot(str(shots / f"timeout-{what.replace(' ', '-')}.png"))
    raise AssertionError(f"{what} did not appear in {timeout:.0f}s ({last})")


def set_text(driver: Any, element_id: str, value: str, shots: Path | None = None) -> None:
    """Fill a form field the way React sees a paste: one input event with the whole value.

    (Typing key by key into the trigger form's fields dropped a character now and then in
    headless Chromium on a loaded machine.)"""
    from selenium.webdriver.common.by import By

    field = wait(driver, lambda d: d.find_element(By.ID, element_id), what=element_id, shots=shots)
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", field)
    field.click()
    driver.execute_script(SET_VALUE_JS, field, value)
    wait(driver, lambda d: d.find_element(By.ID, element_id).get_attribute("value") == value, timeout=10,
         what=f"{element_id} value", shots=shots)


def button(driver: Any, text: str, scope: str = "body") -> Any:
    """The enabled, visible button labelled `text` inside `scope` (a CSS selector), or None."""
    from selenium.webdriver.common.by import By

    buttons = [b for root in driver.find_elements(By.CSS_SELECTOR, scope)
               for b in root.find_elements(By.TAG_NAME, "button")
               if b.is_displayed() and b.text.strip() == text and b.is_enabled()]
    return buttons[-1] if buttons else None


def login(driver: Any, url: str, user: str, password: str, shots: Path | None = None) -> None:
    """Log in through Airflow's form, unless this browser session already is (Airflow's Simple auth manager
    keeps the session's token in the `_token` cookie)."""
    from selenium.webdriver.common.by import By

    driver.get(f"{url}/")
    if driver.get_cookie("_token"):
        return
    field = wait(driver, lambda d: d.find_element(By.CSS_SELECTOR, "input[name=username]"), what="login form",
                 shots=shots)
    field.send_keys(user)
    driver.find_element(By.CSS_SELECTOR, "input[type=password]").send_keys(password)
    driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait(driver, lambda d: d.get_cookie("_token"), what="logged in", shots=shots)


def trigger_from_form(driver: Any, api: Callable[..., Any], url: str, dag: str, section: str,
                      fields: dict[str, str], timeout: float = 60) -> tuple[str, float, float]:
    """Trigger `dag` as a person does: its page, Trigger, the form's `section`, `fields` (element id -> text), then
    the dialog's Trigger. Returns the new run's id, the click's wall-clock time and its `time.monotonic()`; the
    browser is wherever the UI took it after the click (Airflow 3 opens the new run's page)."""
    driver.get(f"{url}/dags/{dag}")
    wait(driver, lambda d: button(d, "Trigger"), what="trigger button").click()
    wait(driver, lambda d: button(d, section, "[role=dialog]"), what="form section").click()
    for element_id, value in fields.items():
        set_text(driver, element_id, value)
    runs = f"/api/v2/dags/{dag}/dagRuns?limit=100&order_by=-run_after"
    before = {r["dag_run_id"] for r in api(runs)["dag_runs"]}
    submit = wait(driver, lambda d: button(d, "Trigger", "[role=dialog]"), what="trigger submit")
    click_wall, click = time.time(), time.monotonic()
    submit.click()
    run_id = wait(driver, lambda _: next((r["dag_run_id"] for r in api(runs)["dag_runs"]
                                         if r["dag_run_id"] not in before), None), timeout=timeout, what="the run",
                  poll=0.2)
    return run_id, click_wall, click
