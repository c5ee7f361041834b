"""`upgrade-gate check --manifest jobs.yaml`: many jobs, each checked exactly as `check` checks one.

A CI pipeline or a platform team gates every job of a repository in one call (docs/guide.md, "In CI"). Each job
entry spells `check`'s own options, under the same names, and is turned into `check`'s own arguments: the same
parser validates it and `check.check_job` (the single check's path, lent as `SingleCheck`) judges it, so a job
gets the same verdict in a manifest as alone. The manifest is read and validated whole before any job runs (a
typo fails the run at once, as one line naming the file and the entry); a job whose *input* is bad (a missing
savepoint) is reported by name and the others are still checked.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hashing.documents import Limits, read_document
from hashing.errors import InputError, describe
from upgrade_gate.storage import discovery
from upgrade_gate.vocabulary import Verdict

MANIFEST_NAME = "upgrade-gate.jobs.yaml"  # what `--manifest DIR` looks for
MANIFEST_FORMATS = ("table", "json", "junit", "markdown")  # html, github and sarif describe one check
WHAT = "a jobs manifest (docs/guide.md, \"In CI\")"
LIMITS = Limits(max_bytes=4 * 1024 * 1024, max_depth=10)
# manifest key -> `check` option; the ones naming files are resolved against the manifest's directory
OPTIONS = {"graph": "--graph", "savepoint": "--savepoint", "old_graph": "--old-graph",
           "flink_version": "--flink-version", "hasher": "--hasher", "matching": "--matching",
           "flink_config": "--flink-config", "new_job_savepoint": "--new-job-savepoint",
           "old_savepoint": "--old-savepoint"}
PATHS = {"graph", "savepoint", "old_graph", "flink_config", "new_job_savepoint", "old_savepoint"}
FLAGS = {"allow_non_restored_state": "--allow-non-restored-state"}
KEYS = ("name", *OPTIONS, *FLAGS, "D")
EXIT_BAD_INPUT = 2


@dataclass(frozen=True)
class SingleCheck:
    """What `check` lends a manifest run (`upgrade_gate/cli/commands/check.py` passes its own functions, so this
    module never imports it back): its arguments, its one-job path and its output writer."""

    add_arguments: Callable[[argparse.ArgumentParser], None]
    check_job: Callable[[argparse.Namespace], Any]  # -> check.JobCheck (`.result`, `.to_json()`)
    write_output: Callable[[str, argparse.Namespace], None]


@dataclass(frozen=True)
class ManifestJob:
    """One entry: its name and the `check` arguments it stands for, already parsed."""

    name: str
    args: argparse.Namespace


@dataclass(frozen=True)
class JobOutcome:
    """A job checked (`check`), or refused as bad input (`error`: the one line a single check would print)."""

    name: str
    check: Any = None  # check.JobCheck
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "result": self.check.to_json() if self.check is not None else None,
                "error": self.error}


class _EntryParser(argparse.ArgumentParser):
    """`check`'s parser for one entry: an invalid value is a bad manifest, not an exit from the middle of a run."""

    def error(self, message: str) -> Any:  # argparse would exit; the caller names the file and the entry
        raise InputError(message)


def manifest_path(given: str) -> Path:
    """The manifest `--manifest` names: the file, or `upgrade-gate.jobs.yaml` in the directory."""
    path = Path(given)
    if path.is_dir():
        inside = path / MANIFEST_NAME
        if not inside.is_file():
            raise InputError(f"{given}: a directory without {MANIFEST_NAME}")
        return inside
    return path


def _resolved(value: str, base: Path, key: str) -> str:
    """A location relative to the manifest's directory; URIs (`s3://`) and absolute paths stay as written, and a
    discovery form (`latest:DIR?job-id=..`, `k8s:FILE`) has its local part resolved."""
    prefix = ""
    if key == "savepoint" and value.startswith((discovery.LATEST, discovery.K8S)):
        prefix = discovery.LATEST if value.startswith(discovery.LATEST) else discovery.K8S
        value = value[len(prefix):]
    if "://" in value or value.startswith(("file:", *discovery.FLINK_REST)) or os.path.isabs(value):
        return prefix + value
    return prefix + os.path.normpath(base / value)


def _settings(value: Any, where: str) -> list[str]:
    """`D:` as a mapping (`{key: value}`) or a list of `KEY=VALUE` strings, as `-D` takes them."""
    if isinstance(value, dict):
        out = []
        for k, v in value.items():
            if not isinstance(v, (str, int, float, bool)):
                raise InputError(f"{where}: D: {k}: expected a scalar value, got {describe(v)}")
            out.append(f"{k}={str(v).lower() if isinstance(v, bool) else v}")
        return out
    if isinstance(value, list) and all(isinstance(s, str) for s in value):
        return list(value)
    raise InputError(f"{where}: D: expected a mapping of Flink settings or a list of KEY=VALUE strings")


def _argv(entry: dict[str, Any], base: Path, where: str) -> list[str]:
    """`check`'s command line for one entry."""
    argv: list[str] = []
    for key, value in entry.items():
        if key in OPTIONS:
            if key == "flink_version" and isinstance(value, (int, float)) and not isinstance(value, bool):
                raise InputError(f"{where}: flink_version: write it as a string, \"{value}\" is read by YAML as the "
                                 f"number {value}")
            if not isinstance(value, str) or not value:
                raise InputError(f"{where}: {key}: expected a non-empty string, got {describe(value)}")
            argv += [OPTIONS[key], _resolved(value, base, key) if key in PATHS else value]
        elif key in FLAGS:
            if not isinstance(value, bool):
                raise InputError(f"{where}: {key}: expected true or false, got {describe(value)}")
            argv += [FLAGS[key]] if value else []
        elif key == "D":
            for setting in _settings(value, where):
                argv += ["-D", setting]
    return argv


def read_manifest(given: str, add_arguments: Callable[[argparse.ArgumentParser], None]
                  ) -> tuple[Path, list[ManifestJob]]:
    """Every job of the manifest, validated: a bad entry raises `InputError` naming the file and the entry."""
    path = manifest_path(given)
    doc = read_document(path, what=WHAT, limits=LIMITS, yaml_first=True)
    if isinstance(doc, dict) and set(doc) - {"jobs"}:
        raise InputError(f"{path}: unknown key {sorted(map(str, set(doc) - {'jobs'}))[0]!r} (a manifest holds 'jobs:')")
    entries = doc.get("jobs") if isinstance(doc, dict) else doc
    if not isinstance(entries, list) or not entries:
        raise InputError(f"{path}: expected a non-empty list of jobs under 'jobs:'")
    parser = _EntryParser(prog="upgrade-gate check", add_help=False)
    add_arguments(parser)
    jobs: list[ManifestJob] = []
    seen: set[str] = set()
    for i, entry in enumerate(entries):
        where = f"{path}: jobs[{i}]"
        if not isinstance(entry, dict):
            raise InputError(f"{where}: expected a mapping with name, graph and savepoint, got {describe(entry)}")
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            raise InputError(f"{where}: every job needs a name")
        where = f"{where} ({name})"
        if name in seen:
            raise InputError(f"{where}: the name is used by an earlier job too")
        seen.add(name)
        unknown = [str(k) for k in entry if k not in KEYS]
        if unknown:
            raise InputError(f"{where}: unknown key {unknown[0]!r} (one of: {', '.join(KEYS)})")
        missing = [k for k in ("graph", "savepoint") if k not in entry]
        if missing:
            raise InputError(f"{where}: {missing[0]} is required")
        try:
            args = parser.parse_args(_argv(entry, path.parent, where))
        except InputError as exc:
            raise InputError(exc if str(exc).startswith(where) else f"{where}: {exc}") from None
        jobs.append(ManifestJob(name, args))
    return path, jobs


class _JobLines(io.TextIOBase):
    """stderr seen through one job: every line the single check prints (the savepoint it chose, a note on an
    assumed default, a warning) starts with `job NAME:`, so in a run over fifty jobs each note says whose it is."""

    def __init__(self, name: str, target: Any) -> None:
        self._prefix, self._target, self._at_start = f"job {name}: ", target, True

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        for piece in text.splitlines(keepends=True):
            self._target.write((self._prefix if self._at_start else "") + piece)
            self._at_start = piece.endswith("\n")
        return len(text)

    def flush(self) -> None:
        self._target.flush()


def _check_each(jobs: list[ManifestJob], check_job: Callable[[argparse.Namespace], Any]) -> list[JobOutcome]:
    """Each job through the single check's path; bad input stops that job only, named on stderr as it happens."""
    outcomes = []
    for job in jobs:
        try:
            if getattr(job.args, "job", None) is None:  # waivers scoped to a job (`job:`) match the manifest's name
                job.args.job = job.name
            with contextlib.redirect_stderr(_JobLines(job.name, sys.stderr)):
                outcomes.append(JobOutcome(job.name, check=check_job(job.args)))
        except InputError as exc:
            print(f"upgrade-gate: error: job {job.name}: {exc}", file=sys.stderr)
            outcomes.append(JobOutcome(job.name, error=str(exc)))
    return outcomes


def worst(outcomes: list[JobOutcome]) -> Verdict | None:
    """The most severe verdict of the jobs checked (None when none was)."""
    verdicts = [o.check.result.verdict for o in outcomes if o.check is not None]
    return max(verdicts, key=lambda v: v.severity) if verdicts else None


def run_manifest(args: argparse.Namespace, single: SingleCheck) -> int:
    """`check --manifest`: exit 0 only when every job is SAFE, 2 when any job's input is bad, else 1."""
    given = [f"--{k.replace('_', '-')}" for k in ("savepoint", "graph", "old_graph", "deployment", "current", "jar")
             if getattr(args, k)] + (["-D"] if args.dynamic else [])
    if given:
        raise InputError(f"--manifest names every job's inputs itself; {given[0]} belongs in the manifest's entries")
    if args.format not in MANIFEST_FORMATS:
        raise InputError(f"--manifest writes {', '.join(MANIFEST_FORMATS)}; --format {args.format} reports one job "
                         "(check it alone)")
    _, jobs = read_manifest(args.manifest, single.add_arguments)
    outcomes = _check_each(jobs, single.check_job)
    verdict = worst(outcomes)
    rows = [(o.name, o.check.to_json() if o.check else None, o.error) for o in outcomes]
    if args.format == "json":
        text = json.dumps({"jobs": [o.to_json() for o in outcomes], "verdict": verdict}, indent=2) + "\n"
    elif args.format == "junit":  # GitLab's and Jenkins' test report: one suite per job
        from upgrade_gate.report.junit import render_junit_jobs

        text = render_junit_jobs(rows)
    elif args.format == "markdown":
        from upgrade_gate.report.markdown import render_markdown_jobs

        text = render_markdown_jobs(rows, verdict)
    else:
        from upgrade_gate.report.jobs_table import render_jobs_table

        text = render_jobs_table([(o.name, o.check.to_json() if o.check else None, o.error) for o in outcomes],
                                 verdict)
    single.write_output(text, args)
    if any(o.error for o in outcomes):
        return EXIT_BAD_INPUT
    return 0 if all(o.check is not None and o.check.decision.passes for o in outcomes) else 1
