"""The pull-request comment (`check --format markdown`, one job and a manifest) as a reviewer sees it on GitHub.

GitHub renders a comment as GitHub Flavored Markdown: CommonMark plus tables and strikethrough, raw HTML kept to a
safe subset that includes `<details>`/`<summary>`, HTML comments hidden. Here the same dialect is rendered by
markdown-it-py (CommonMark with GFM's table and strikethrough rules, the library Rich already brings) into a page
styled like GitHub's comment column (about 780 px wide, tables that scroll rather than squeeze), and headless
Chromium lays it out. No GitHub runs here, so the rendering is the same grammar, not GitHub's own server; what is
asserted is what a reviewer would notice: the summary line first, the verdict, every operator ID whole on one line
(people paste them into `setUidHash`), no markdown syntax left over, the hidden marker hidden, and a manifest's
blocked jobs folded until opened. Screenshots go to `.work/airflow-screenshots/pr-comment-*.png`.

In the Airflow tier only because that environment has Selenium and the browser.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from demo.browser import start_chromium
from tests.restore_support import RESTORES

REPO = Path(__file__).resolve().parents[2]
SHOTS = REPO / ".work" / "airflow-screenshots"
R23 = RESTORES / "2.3.0"
SP = R23 / "savepoints" / "uids-p2"
# one committed real-Flink scenario per verdict the comment can carry
CASES: dict[str, tuple[str, ...]] = {
    "SAFE": ("--graph", str(R23 / "rescale-up" / "graph-b.json"), "--savepoint", str(SP)),
    "STATE_LOSS": ("--graph", str(R23 / "uid-removed" / "graph-b.json"), "--savepoint", str(SP),
                   "--allow-non-restored-state"),
    "RESTORE_FAILS": ("--graph", str(R23 / "uid-removed" / "graph-b.json"), "--savepoint", str(SP)),
}
PAGE = """<!doctype html><html><head><meta charset="utf-8"><style>
body {{ margin: 0; background: #fff; }}
.comment {{ width: 780px; margin: 16px; padding: 16px; border: 1px solid #d0d7de; border-radius: 6px;
  font: 14px/1.5 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color: #1f2328; word-wrap: break-word; }}
table {{ display: block; width: max-content; max-width: 100%; overflow: auto; border-collapse: collapse; }}
th, td {{ padding: 6px 13px; border: 1px solid #d0d7de; }}
code {{ padding: .2em .4em; font: 85% ui-monospace, SFMono-Regular, monospace; background: #eff1f3;
  border-radius: 6px; white-space: break-spaces; }}
pre {{ padding: 16px; overflow: auto; background: #f6f8fa; }} pre code {{ white-space: pre; }}
</style></head><body><div class="comment">{body}</div></body></html>"""


def _markdown(*args: str, cwd: Path) -> tuple[str, dict[str, Any]]:
    """The comment and the check's JSON, from the CLI a CI job runs."""
    def run(fmt: str) -> str:
        done = subprocess.run([sys.executable, "-m", "upgrade_gate", "check", *args, "--no-waivers",
                               "--format", fmt], capture_output=True, text=True, cwd=cwd, timeout=300)
        assert done.returncode in (0, 1) and "Traceback" not in done.stderr, done.stderr
        return done.stdout
    return run("markdown"), json.loads(run("json"))


def _as_github(markdown: str) -> str:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"]).render(markdown)


@pytest.fixture(scope="module")
def browser() -> Any:
    driver = start_chromium()
    yield driver
    driver.quit()


def _show(browser: Any, html: str, tmp_path: Path, name: str) -> Any:
    page = tmp_path / f"{name}.html"
    page.write_text(PAGE.format(body=html), encoding="utf-8")
    browser.get(page.as_uri())
    SHOTS.mkdir(parents=True, exist_ok=True)
    browser.find_element("css selector", ".comment").screenshot(str(SHOTS / f"pr-comment-{name}.png"))
    return browser.find_element("css selector", ".comment")


def _lines_of(browser: Any, element: Any) -> int:
    return int(browser.execute_script("return arguments[0].getClientRects().length", element))


@pytest.mark.parametrize("verdict", list(CASES))
def test_the_comment_reads_as_a_reviewer_sees_it(browser: Any, tmp_path: Path, verdict: str) -> None:
    markdown, doc = _markdown(*CASES[verdict], cwd=tmp_path)
    assert doc["verdict"] == verdict  # the product's own verdict on the real-Flink fixture
    comment = _show(browser, _as_github(markdown), tmp_path, verdict.lower())
    text = comment.text
    first = text.splitlines()[0]
    assert first == markdown.splitlines()[1].strip("*")  # the plan-style summary line comes first, bold
    assert browser.execute_script("return getComputedStyle(arguments[0]).fontWeight",
                                  comment.find_element("css selector", "p strong")) in ("700", "bold")
    assert verdict in first and (verdict == "SAFE" or "BLOCKED" in first)
    assert "upgrade-gate check" not in text.splitlines()[0] and "<!--" not in text  # the marker stays hidden
    assert not re.search(r"\|\s*-{3}|\*\*|^#{2,} ", text, re.M), "markdown syntax left in the rendered comment"
    ids = {str(row["operator_id"]) for row in doc["losses"]}
    shown = [c for c in comment.find_elements("css selector", "td code") if c.text in ids]
    assert {c.text for c in shown} == ids  # every operator at risk is in the table, by its full ID
    for code in shown:
        assert code.is_displayed() and _lines_of(browser, code) == 1, f"{code.text} is broken over lines"
    tables = comment.find_elements("css selector", "table")
    for table in tables:
        assert table.size["width"] <= comment.size["width"], "a table wider than the comment column"


def test_a_manifest_comment_folds_the_blocked_jobs(browser: Any, tmp_path: Path) -> None:
    manifest = tmp_path / "upgrade-gate.jobs.yaml"
    manifest.write_text("jobs:\n" + "".join(
        f"  - name: {name}\n    graph: {args[1]}\n    savepoint: {args[3]}\n"
        + ("    allow_non_restored_state: true\n" if "--allow-non-restored-state" in args else "")
        for name, args in (("orders", CASES["SAFE"]), ("ledger", CASES["STATE_LOSS"]),
                           ("payments", CASES["RESTORE_FAILS"]))), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "upgrade_gate", "check", "--manifest", str(manifest), "--no-waivers",
                           "--format", "markdown"], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    comment = _show(browser, _as_github(done.stdout), tmp_path, "manifest")
    folds = comment.find_elements("css selector", "details")
    assert folds and all(not d.get_attribute("open") for d in folds)
    titles = [d.find_element("css selector", "summary").text for d in folds]
    assert any("payments" in t for t in titles) and any("ledger" in t for t in titles), titles
    hidden = folds[0].find_elements("css selector", "table")
    assert hidden and not any(t.is_displayed() for t in hidden)  # folded: the reviewer sees the job list first
    folds[0].find_element("css selector", "summary").click()
    assert any(t.is_displayed() for t in folds[0].find_elements("css selector", "table"))
    browser.find_element("css selector", ".comment").screenshot(str(SHOTS / "pr-comment-manifest-open.png"))
