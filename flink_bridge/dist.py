"""Locate or install a real Flink distribution (the jars of the `apache-flink-libraries` package).

Real Flink is the oracle for every identity and restore rule we implement, and the exporter
runs Flink's own StreamGraph generator. We need only the jars, not PyFlink's Python side
(which pins pyarrow/beam versions that clash with Airflow), so the package is downloaded with
`pip download --no-deps` and its `lib/`, `opt/`, `bin/` and `plugins/` folders are unpacked
into `.work/flink/<version>/`. Nothing is downloaded twice; the archives are kept in
`.work/cache/` so a re-extraction needs no network.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

from hashing.versions import PATCH_RELEASES

REPO_ROOT = Path(__file__).resolve().parent.parent
WORK_DIR = Path(os.environ.get("UPGRADE_GATE_WORK", REPO_ROOT / ".work"))

# The releases we install are hashing/versions.py's PATCH_RELEASES ("major.minor" -> exact release); each
# is downloaded on first use, `make flink` pre-installs them all.
_SUBDIRS = ("lib", "opt", "bin", "plugins")


@contextlib.contextmanager
def work_lock(name: str) -> Iterator[None]:
    """Hold `.work/locks/<name>.lock` exclusively while something under `.work/` is built on first use.

    Builds check a stamp, then build in place: two processes doing that at once (two Airflow tasks exporting
    jars on a fresh worker, the two test tiers of `make test`) would delete each other's classes or venv
    half-way. The lock is taken around the check and the build, so the second process finds the first's
    result. An OS lock (`flock`): released when its holder dies, however it dies.
    """
    locks = WORK_DIR / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    with open(locks / f"{name}.lock", "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


class FlinkDistError(RuntimeError):
    """Raised when a Flink distribution cannot be downloaded or unpacked."""


def release_of(version: str) -> str:
    """Map "2.3" or "2.3.0" to the exact release we install."""
    if version in PATCH_RELEASES:
        return PATCH_RELEASES[version]
    if version in PATCH_RELEASES.values():
        return version
    known = ", ".join(sorted(PATCH_RELEASES.values()))
    raise FlinkDistError(f"unsupported Flink version {version!r}; supported: {known}")


def flink_home(version: str) -> Path:
    return WORK_DIR / "flink" / release_of(version)


def java_home() -> str | None:
    """Java 17 is required by Flink 2.x and fine for 1.20."""
    return os.environ.get("JAVA_HOME")


def _cached(cache: Path, release: str) -> list[Path]:
    """The archives of `release` in the cache: wheels spell the name with `_`, older sdists with `-`."""
    return sorted(p for name in ("apache_flink_libraries", "apache-flink-libraries")
                  for p in cache.glob(f"{name}-{release}[.-]*"))


def _download(release: str) -> Path:
    cache = WORK_DIR / "cache" / "flink"
    cache.mkdir(parents=True, exist_ok=True)
    found = _cached(cache, release)
    if found:
        return found[0]
    print(f"[flink] downloading apache-flink-libraries=={release} (~300 MB) ...", file=sys.stderr)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-build-isolation",
           "-q", "-d", str(cache), f"apache-flink-libraries=={release}"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    found = _cached(cache, release)
    if proc.returncode != 0 or not found:
        raise FlinkDistError(f"pip download of apache-flink-libraries=={release} failed:\n{proc.stderr[-2000:]}")
    return found[0]


def _extract(archive: Path, dest: Path) -> None:
    """Unpack lib/opt/bin/plugins whether the archive is the 2.x wheel or the 1.20 sdist."""
    tmp = dest.with_name(dest.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)

    def target_of(name: str) -> Path | None:
        parts = name.split("/")
        for i, part in enumerate(parts[:-1]):
            if part in _SUBDIRS and i >= 1 and parts[i - 1] in ("pyflink", "deps"):
                rel = parts[i:]
                if any(p in ("", ".", "..") for p in rel):
                    return None
                return tmp.joinpath(*rel)
        return None

    if archive.suffix == ".whl":
        with zipfile.ZipFile(archive) as zf:
            for info in zf.infolist():
                out = target_of(info.filename)
                if out is None or info.is_dir():
                    continue
                out.parent.mkdir(parents=True, exist_ok=True)
                with zf.open(info) as src, open(out, "wb") as dst:
                    shutil.copyfileobj(src, dst)
    else:
        with tarfile.open(archive, "r:gz") as tf:
            for member in tf.getmembers():
                out = target_of(member.name)
                if out is None or not member.isfile():
                    continue
                out.parent.mkdir(parents=True, exist_ok=True)
                src = tf.extractfile(member)
                assert src is not None
                with src, open(out, "wb") as dst:
                    shutil.copyfileobj(src, dst)
    if not (tmp / "lib").is_dir():
        raise FlinkDistError(f"{archive}: no lib/ folder found in the Flink package")
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)


def ensure_flink(version: str) -> Path:
    """Return the Flink home for `version`, downloading and unpacking it on first use."""
    release = release_of(version)
    home = flink_home(release)
    if (home / "lib").is_dir() and any((home / "lib").glob("flink-dist-*.jar")):
        return home
    _extract(_download(release), home)
    return home


def classpath(version: str, extra: list[Path] | None = None) -> str:
    """Classpath with every jar of lib/ (Flink's own runtime classpath) plus `extra`."""
    home = ensure_flink(version)
    jars = sorted((home / "lib").glob("*.jar"))
    return os.pathsep.join([str(p) for p in (extra or [])] + [str(j) for j in jars])


if __name__ == "__main__":
    for v in sys.argv[1:] or list(PATCH_RELEASES):
        print(ensure_flink(v))
