"""A report page as Debian's headless Chromium lays it out, read back through a probe.

The probe (`<pre id="probe"></pre><script>…</script>` filling the `pre` with JSON) is added to a copy of the page
only: the reports themselves carry no JavaScript (docs/design.md). `--dump-dom` prints the DOM after the script ran.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest


def chromium_probe(page: str, probe: str, folder: Path, window: tuple[int, int] | None = None) -> Any:
    """The JSON the `probe` wrote into `<pre id="probe">`, for `page` opened as a file:// URL from `folder`;
    `window` sets the window size (width, height) the page is laid out in."""
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.fail("Debian's chromium is needed: make chromium")
    path = folder / "report.html"
    path.write_text(page.replace("</body>", probe + "</body>"))
    size = [f"--window-size={window[0]},{window[1]}"] if window else []
    proc = subprocess.run([chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                           *size, "--dump-dom", path.as_uri()], capture_output=True, text=True, timeout=120)
    found = re.search(r'<pre id="probe">(.*?)</pre>', proc.stdout, re.S)
    assert found is not None, f"chromium printed no probe (exit {proc.returncode}): {proc.stderr[-2000:]}"
    return json.loads(html.unescape(found.group(1)))
