"""Guard against the pyspark / pyspark-client clash (docs/design.md, Real components).

`apache-airflow-providers-apache-spark` 6.x depends on `pyspark-client`, whose wheel carries the
same `pyspark/` Python files as `pyspark` and overwrites them on install. If the two versions
differ, the Python side of Spark no longer matches its jars and jobs fail in confusing ways
(or, worse, half work). We pin both to one version; these tests notice any drift: in the pins,
in the installed distributions, and in the files on disk.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata as md
from pathlib import Path

from tests.requirement_pins import requirement_pins as _pins


def _installed(name: str) -> str | None:
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None


def test_pyspark_and_pyspark_client_are_pinned_to_one_version() -> None:
    pins = _pins()
    assert "pyspark" in pins, "requirements.txt must pin pyspark"
    assert pins.get("pyspark-client") == pins["pyspark"], (
        "pin pyspark to the pyspark-client version (the Airflow Spark provider installs pyspark-client, "
        "which overwrites pyspark's files)")


def test_installed_pyspark_matches_the_pin_and_its_own_files() -> None:
    import pyspark

    installed = _installed("pyspark")
    assert installed == _pins()["pyspark"]
    # version.py is one of the files pyspark-client overwrites: its text must still be pyspark's
    assert pyspark.__version__ == installed


def test_pyspark_client_if_installed_has_the_same_version() -> None:
    """Runs in both environments: the core's has no pyspark-client, the Airflow one (Spark provider) has."""
    client = _installed("pyspark-client")
    assert client in (None, _installed("pyspark")), (
        f"pyspark-client {client} overwrote the files of pyspark {_installed('pyspark')}: reinstall pyspark "
        f"with --no-deps or pin both to one version")


def test_pyspark_files_on_disk_are_the_ones_its_wheel_installed() -> None:
    """Every pyspark/*.py file listed in pyspark's RECORD still has the hash pyspark installed."""
    dist = md.distribution("pyspark")
    checked = changed = 0
    for f in dist.files or ():
        if not str(f).startswith("pyspark/") or not str(f).endswith(".py") or not f.hash:
            continue
        path = Path(str(dist.locate_file(f)))
        if not path.exists():
            continue
        digest = base64.urlsafe_b64encode(hashlib.new(f.hash.mode, path.read_bytes()).digest()).rstrip(b"=").decode()
        checked += 1
        if digest != f.hash.value:
            changed += 1
    assert checked > 100
    assert changed == 0, f"{changed} of pyspark's Python files were overwritten (pyspark-client of another version?)"
