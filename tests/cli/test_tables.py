"""Every human table fits a 100-column terminal: ids stay whole, free text wraps, bytes read as KiB/MiB."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from upgrade_gate.cli.main import main
from upgrade_gate.report.sizes import human_bytes

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
RESTORES = sorted((FIXTURES / "restores").glob("*/*/outcome.json"))
SAVEPOINTS = sorted(p.parent for p in (FIXTURES / "savepoints").glob("*/*/_metadata"))
GRAPHS = sorted((FIXTURES / "restores" / "2.3.0").glob("*/graph-b.json"))[:12]
HEX32 = re.compile(r"\b[0-9a-f]{32}\b")


def _lines(capsys: pytest.CaptureFixture[str], argv: list[str]) -> list[str]:
    main(argv)
    return capsys.readouterr().out.splitlines()


def _fits(lines: list[str], width: int = 100) -> None:
    """Every line fits, except a line holding one word longer than the terminal (a path): that word is never cut."""
    too_wide = [line for line in lines if len(line) > width and len(line.split()) > 1]
    assert not too_wide, too_wide[:3]


@pytest.fixture(autouse=True)
def _terminal_of_100_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "100")


@pytest.mark.parametrize("outcome", RESTORES, ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}")
def test_check_table_fits_and_names_the_receiving_operator(capsys: pytest.CaptureFixture[str], outcome: Path) -> None:
    d = outcome.parent
    sp = (d / json.loads(outcome.read_text())["savepoint"]["fixture"]).resolve()
    lines = _lines(capsys, ["check", "--savepoint", str(sp), "--graph", str(d / "graph-b.json"),
                            "--flink-version", ".".join(d.parent.name.split(".")[:2])])
    _fits(lines)
    assert lines[0].startswith("VERDICT: ")
    text = "\n".join(lines)
    assert "restores into" in text and "new node" not in text
    main(["check", "--savepoint", str(sp), "--graph", str(d / "graph-b.json"), "--format", "json",
          "--flink-version", ".".join(d.parent.name.split(".")[:2])])
    doc = json.loads(capsys.readouterr().out)
    assert {o["operator_id"] for o in doc["operators"]} <= set(HEX32.findall(text))  # ids are never cut


@pytest.mark.parametrize("savepoint", SAVEPOINTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_inspect_table_fits_with_human_bytes(capsys: pytest.CaptureFixture[str], savepoint: Path) -> None:
    lines = _lines(capsys, ["inspect", str(savepoint), "--format", "table"])
    _fits(lines)
    main(["inspect", str(savepoint), "--format", "json"])
    ids = {o["operator_id"] for o in json.loads(capsys.readouterr().out)["operators"]}
    assert ids <= set(HEX32.findall("\n".join(lines)))
    assert lines[0].startswith("_metadata v")
    assert not re.search(r"\b\d{4,} B\b", "\n".join(lines))  # 1024 bytes and more are shown in KiB and up


@pytest.mark.parametrize("graph", GRAPHS, ids=lambda p: p.parent.name)
@pytest.mark.parametrize("command", [["ids", "--hasher", "v2"], ["ids", "--hasher", "v3"], ["mapping"]])
def test_ids_and_mapping_tables_fit(capsys: pytest.CaptureFixture[str], graph: Path, command: list[str]) -> None:
    lines = _lines(capsys, [command[0], str(graph), *command[1:]])
    _fits(lines)
    main(["ids", str(graph), "--format", "json"])
    ids = {n["generated_id"] for n in json.loads(capsys.readouterr().out)["nodes"]}
    assert ids <= set(HEX32.findall("\n".join(lines)))


WIDTHS = (80, 100, 120)


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("outcome", RESTORES, ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}")
def test_check_at_every_width_keeps_ids_columns_and_words_whole(capsys: pytest.CaptureFixture[str],
                                                                 monkeypatch: pytest.MonkeyPatch, outcome: Path,
                                                                 width: int) -> None:
    """Issue 32: at 80 columns evidence was cut into 5-character fragments, `lost` vanished and ids were cut.
    Now a table that cannot fit becomes one block per row; nothing is ever cut."""
    monkeypatch.setenv("COLUMNS", str(width))
    d = outcome.parent
    sp = (d / json.loads(outcome.read_text())["savepoint"]["fixture"]).resolve()
    argv = ["check", "--savepoint", str(sp), "--graph", str(d / "graph-b.json"),
            "--flink-version", ".".join(d.parent.name.split(".")[:2])]
    lines = _lines(capsys, argv)
    _fits(lines, width)
    text = "\n".join(lines)
    main([*argv, "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    found = set(HEX32.findall(text))
    assert {o["operator_id"] for o in doc["operators"]} <= found  # every id whole
    assert "lost" in text.split()  # the column (or the block's line) is there
    words = set(text.split())
    for entry in [*doc["losses"], *doc["misrouted"]]:
        if entry.get("sql"):  # said in the query's terms in the table (report/check_table.py, _in_query_terms)
            continue
        said = entry.get("reason") or entry["evidence"][0]
        assert set(said.split()) <= words, sorted(set(said.split()) - words)[:5]  # no word is cut


@pytest.mark.parametrize("outcome", RESTORES, ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}")
def test_check_ends_with_a_plan_line_that_adds_up(capsys: pytest.CaptureFixture[str], outcome: Path) -> None:
    """`terraform plan`-style: the last line says what happens to the state and whether the upgrade may go ahead."""
    d = outcome.parent
    sp = (d / json.loads(outcome.read_text())["savepoint"]["fixture"]).resolve()
    argv = ["check", "--savepoint", str(sp), "--graph", str(d / "graph-b.json"),
            "--flink-version", ".".join(d.parent.name.split(".")[:2])]
    lines = _lines(capsys, argv)
    last = " ".join(" ".join(lines[len(lines) - lines[::-1].index(""):]).split())  # the paragraph after the last blank
    main([*argv, "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    at_risk = {x["operator_id"] for x in [*doc["losses"], *doc["misrouted"]]}
    assert last.startswith("Plan: ") and f", {len(at_risk)} at risk (" in last, last
    safe = "SAFE: the upgrade may proceed" + ("" if doc["state_types_compared"] else " (state types not compared)")
    assert last.endswith(f"{safe}.") == (doc["verdict"] == "SAFE"), last
    assert (f"BLOCKED ({doc['verdict']})" in last) == (doc["verdict"] != "SAFE"), last


def test_the_verdict_is_coloured_on_a_terminal_only(tmp_path: Path) -> None:
    """Red for a blocked verdict on a TTY (yellow for a SAFE that compared less); plain text in a pipe and with
    NO_COLOR set."""
    import os
    import pty
    import subprocess
    import sys

    d = RESTORES[0].parent
    sp = (d / json.loads(RESTORES[0].read_text())["savepoint"]["fixture"]).resolve()
    argv = [sys.executable, "-m", "upgrade_gate", "check", "--savepoint", str(sp), "--graph", str(d / "graph-b.json")]

    def on_a_tty(env: dict[str, str]) -> bytes:
        leader, follower = pty.openpty()
        proc = subprocess.Popen(argv, stdout=follower, stderr=subprocess.DEVNULL, env=env)
        os.close(follower)
        out = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the child closed its side
                break
            if not chunk:
                break
            out += chunk
        proc.wait(timeout=60)
        os.close(leader)
        return out

    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "TERM")}
    doc = json.loads(subprocess.run([*argv, "--format", "json"], capture_output=True, text=True).stdout)
    verdict = doc["verdict"]
    # green SAFE, yellow a SAFE that compared no state types, red a blocked verdict
    colour = (b"31" if verdict != "SAFE" else b"32" if doc["state_types_compared"] else b"33")
    assert on_a_tty(env).startswith(b"\x1b[1;" + colour + b"mVERDICT: " + verdict.encode())
    assert on_a_tty({**env, "NO_COLOR": "1"}).startswith(b"VERDICT: ")
    assert subprocess.run(argv, capture_output=True).stdout.startswith(b"VERDICT: ")


def test_inspect_prints_json_when_piped(capsys: pytest.CaptureFixture[str]) -> None:
    out = "\n".join(_lines(capsys, ["inspect", str(SAVEPOINTS[0])]))
    assert out.lstrip().startswith("{") and '"operators"' in out


@pytest.mark.parametrize(("n", "text"), [(0, "0 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (4866, "4.8 KiB"),
                                          (5 * 2**20, "5.0 MiB"), (3 * 2**30 + 2**29, "3.5 GiB")])
def test_human_bytes(n: int, text: str) -> None:
    assert human_bytes(n) == text
