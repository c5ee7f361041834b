"""Helpers for the restore tests: the real-Flink restore outcomes and how to compare with them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hashing.keygroups import assign_to_key_group
from hashing.readers import load_graph
from upgrade_gate.gate.check import CheckResult
from upgrade_gate.storage.check_inputs import check_upgrade
from upgrade_gate.storage.savepoints import load_savepoint

RESTORES = Path(__file__).resolve().parent / "fixtures" / "restores"
KEYS = range(97)  # the fixture job keys by v % 97 and has seen every key when the savepoint is taken
# Two operators claim the same id (one by position, one by setUidHash): Flink visits job vertices in
# HashSet (identity-hash) order, so which one gets the state is not deterministic.
AMBIGUOUS = {"uid-hash-pins-old-id"}


@dataclass(frozen=True)
class Scenario:
    release: str
    name: str
    dir: Path
    outcome: dict[str, Any]

    @property
    def flink_version(self) -> str:
        return ".".join(self.release.split(".")[:2])

    @property
    def savepoint(self) -> Path:
        return (self.dir / self.outcome["savepoint"]["fixture"]).resolve()

    @property
    def pointer(self) -> str:
        return self.outcome["savepoint"]["pointer"]

    def check(self, allow: bool) -> CheckResult:
        return check_upgrade(load_savepoint(str(self.savepoint)), load_graph(self.dir / "graph-b.json"),
                             flink_version=self.flink_version, allow_non_restored_state=allow, pointer=self.pointer)

    def __str__(self) -> str:
        return f"{self.release}/{self.name}"


def scenarios(root: Path = RESTORES) -> Iterator[Scenario]:
    for f in sorted(root.glob("*/*/outcome.json")):
        yield Scenario(f.parent.parent.name, f.parent.name, f.parent, json.loads(f.read_text()))


def root_error(run: dict[str, Any]) -> str | None:
    chain = run.get("error_chain") or []
    return chain[-1]["message"] if chain else None


def node_for_report(res: CheckResult, report_name: str) -> dict[str, Any] | None:
    """The operator row of the new node a user function reported as (names: 'rules' = 'Source: rules')."""
    for row in res.operators:
        if row["new_node_id"] is not None and row["new_node_name"] in (report_name, f"Source: {report_name}"):
            return row
    return None


def expected_keyed_entries(subtask: dict[str, Any], max_parallelism: int) -> int:
    ranges = [tuple(p["key_groups"]) for p in subtask["keyed_from"]]
    return sum(1 for k in KEYS if any(a <= assign_to_key_group(k, max_parallelism, "long") <= b for a, b in ranges))


def disagreements(res: CheckResult, run: dict[str, Any], skip: frozenset[str] = frozenset()) -> list[str]:
    """Per reporting operator and subtask, where the simulation and Flink's real restore differ."""
    out: list[str] = []
    for op, subtasks in run["restored"].items():
        if op in skip:
            continue
        row = node_for_report(res, op)
        sim = (row or {}).get("rescale") or {}
        sim_subs = {s["index"]: s for s in sim.get("subtasks", [])}
        for real in subtasks:
            i = real["subtask"]
            s = sim_subs.get(i, {"operator_state": {}, "keyed_from": [], "key_groups": None})
            for metric, value in real.items():
                if metric == "subtask" or metric.startswith("values:"):  # writers' values: test_restore_misrouting
                    continue
                if metric == "keyed_entries":
                    want = expected_keyed_entries(s, sim.get("max_parallelism") or 128) if row else 0
                elif metric == "key_groups":
                    if row is None or not sim:
                        continue  # the operator got no state: nothing simulated about its ranges
                    want = s["key_groups"]
                elif metric == "max_parallelism":
                    if row is None or not sim:
                        continue
                    want = sim["max_parallelism"]
                elif metric == "rules" and row is not None and sim:  # broadcast map: entries > 0 iff a copy arrives
                    value = value > 0
                    want = s["operator_state"].get("rules", {}).get("elements", 0) > 0
                else:
                    want = s["operator_state"].get(metric, {}).get("elements", 0)
                if value != want:
                    out.append(f"{op}[{i}].{metric}: Flink {value}, simulator {want}")
    return out


def _short(name: str) -> str:
    return name.removeprefix("Source: ")


def real_misrouting(run: dict[str, Any]) -> set[tuple[str, str]]:
    """(writer, receiver) pairs where a function received values it did not write."""
    out = set()
    for op, subtasks in run["restored"].items():
        for sub in subtasks:
            for metric, writers in sub.items():
                if metric.startswith("values:"):
                    out |= {(w, op) for w in writers if w != op}
    return out


def gate_misrouting(res: CheckResult, reporters: set[str]) -> set[tuple[str, str]]:
    """(writer, receiver) pairs the gate calls misrouted, for receivers whose functions report."""
    pairs = {(_short((m["writer"] or {}).get("name") or m["name"] or "?"), _short(m["receiver"]["name"]))
             for m in res.misrouted}
    return {p for p in pairs if p[1] in reporters}
