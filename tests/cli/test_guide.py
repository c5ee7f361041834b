"""docs/guide.md cannot rot: every `bash` block marked `<!-- runs in tests -->` runs, every YAML block parses,
and every `upgrade-gate` command anywhere in the guide (bash or YAML) is accepted by the CLI's parser.

Runnable blocks run one by one with bash (`set -e`) in a scratch directory that holds what the guide
says it holds (`graphs/orders-v2.json`, `graphs/orders-v2-broken.json`, `graphs/orders-v2-max-256.json`,
`savepoints/max-parallelism-128`, `current.yaml`, `new.yaml`),
against a real S3 server (SeaweedFS) filled with real Flink savepoints laid out as Flink writes them.
The only rewrite is the S3 endpoint: the guide's `http://localhost:8333` becomes the test server's port.
Every block starts from the environment section 1 exports (endpoint and keys), as the guide says.
A marker may say `exit N` and `stdout contains "…"` / `stderr contains "…"`; the default is exit 0.
Every bash block must carry a marker: `runs in tests` or `not run: <why>`.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests import s3_server
from tests.conftest import REPO
from upgrade_gate.cli.main import build_parser

GUIDE = REPO / "docs" / "guide.md"
GUIDE_ENDPOINT = "http://localhost:8333"
BUCKET = "flink-state"
JOB = "c9dfb5e1a3f04b6e9d2c7a8b5e4f3d21"
RESTORES = REPO / "tests" / "fixtures" / "restores"
K8S = REPO / "tests" / "fixtures" / "k8s"

_BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.S)
_MARKER = re.compile(r"<!--\s*(runs in tests|not run:)([^>]*)-->\s*$")


def _blocks() -> list[tuple[int, str, str, str | None]]:
    """(line, language, body, marker) of every fenced block; the marker is the comment on the line before."""
    text = GUIDE.read_text(encoding="utf-8")
    out = []
    for m in _BLOCK.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        before = text[:m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        marker = _MARKER.search(before)
        out.append((line, m.group(1), m.group(2), marker.group(0) if marker else None))
    return out


def _runnable() -> list[tuple[int, str, str]]:
    return [(line, body, marker) for line, lang, body, marker in _blocks()
            if lang == "bash" and marker and "runs in tests" in marker]


def _expectation(marker: str) -> tuple[int, list[tuple[str, str]]]:
    code = re.search(r"exit (\d+)", marker)
    contains = re.findall(r'(stdout|stderr) contains "([^"]*)"', marker)
    return (int(code.group(1)) if code else 0), contains


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The bucket and the scratch directory the guide's examples describe."""
    server = s3_server.start(tmp_path_factory.mktemp("weed-guide"))
    try:
        c = server.client()
        c.create_bucket(Bucket=BUCKET)
        sp = (RESTORES / "1.20.5" / "savepoints" / "uids-p2" / "_metadata").read_bytes()  # Flink named it so
        other = (RESTORES / "2.3.0" / "savepoints" / "uids-p2" / "_metadata").read_bytes()
        c.put_object(Bucket=BUCKET, Key="savepoints/savepoint-c9dfb5-cd654d33cd20/_metadata", Body=sp)
        c.put_object(Bucket=BUCKET, Key="savepoints/savepoint-a421b6-aae97baff0c0/_metadata", Body=other)
        c.put_object(Bucket=BUCKET, Key=f"checkpoints/{JOB}/chk-42/_metadata", Body=sp)
        c.put_object(Bucket=BUCKET, Key=f"checkpoints/{JOB}/shared/state-1", Body=b"x")
        work = tmp_path_factory.mktemp("guide-work")
        (work / "graphs").mkdir()
        shutil.copy(RESTORES / "1.20.5" / "identical" / "graph-b.json", work / "graphs" / "orders-v2.json")
        shutil.copy(RESTORES / "1.20.5" / "uid-removed" / "graph-b.json", work / "graphs" / "orders-v2-broken.json")
        repairs = REPO / "tests" / "fixtures" / "repairs" / "2.3.0" / "max-parallelism-128-to-256-long-keys-hashmap"
        shutil.copy(repairs / "graph-b.json", work / "graphs" / "orders-v2-max-256.json")
        shutil.copytree(repairs / "savepoint", work / "savepoints" / "max-parallelism-128")
        shutil.copy(K8S / "orders-current.yaml", work / "current.yaml")
        shutil.copy(K8S / "orders-new.yaml", work / "new.yaml")
        (work / "home").mkdir()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "UPGRADE_GATE_"))}
        env.update(PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}", HOME=str(work / "home"),
                   AWS_ENDPOINT_URL_S3=server.endpoint, AWS_ACCESS_KEY_ID=s3_server.ACCESS_KEY,
                   AWS_SECRET_ACCESS_KEY=s3_server.SECRET_KEY, AWS_REGION="us-east-1")
        yield {"endpoint": server.endpoint, "work": str(work), **{f"env:{k}": v for k, v in env.items()}}
    finally:
        server.stop()


def test_every_bash_block_is_marked_and_enough_of_them_run() -> None:
    unmarked = [line for line, lang, _, marker in _blocks() if lang == "bash" and not marker]
    assert unmarked == [], f"docs/guide.md: bash blocks without a runs-in-tests / not-run marker at lines {unmarked}"
    assert len(_runnable()) >= 12


@pytest.mark.s3
@pytest.mark.parametrize("line, body, marker", _runnable(), ids=[f"line{b[0]}" for b in _runnable()])
def test_guide_command_runs(world: dict[str, str], line: int, body: str, marker: str) -> None:
    env = {k[4:]: v for k, v in world.items() if k.startswith("env:")}
    script = "set -e\n" + body.replace(GUIDE_ENDPOINT, world["endpoint"])
    res = subprocess.run(["bash", "-c", script], cwd=world["work"], env=env, capture_output=True, text=True,
                         timeout=120)
    code, contains = _expectation(marker)
    assert res.returncode == code, f"docs/guide.md:{line} exit {res.returncode}\n{res.stdout[-2000:]}\n{res.stderr}"
    for stream, text in contains:
        assert text in getattr(res, stream), f"docs/guide.md:{line}: {stream} lacks {text!r}:\n{getattr(res, stream)}"
    if code == 2:  # the bad-input contract: one line, no traceback
        assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr, res.stderr


def _commands(text: str) -> list[str]:
    joined = re.sub(r"\\\n\s*", " ", text)
    return [ln.strip().removeprefix("- ").strip() for ln in joined.splitlines()
            if re.match(r"\s*(- )?upgrade-gate ", ln) or re.search(r"\s\\?upgrade-gate ", ln)]


def _yaml_strings(node: object) -> Iterator[str]:
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for v in node.values():
            yield from _yaml_strings(v)
    elif isinstance(node, list):
        for v in node:
            yield from _yaml_strings(v)


def test_yaml_blocks_parse_and_their_commands_are_valid() -> None:
    yaml_blocks = [(line, body) for line, lang, body, _ in _blocks() if lang == "yaml"]
    assert len(yaml_blocks) >= 4  # IRSA service account, GitHub Actions, GitLab CI, the operator recipe
    commands = []
    for line, body in yaml_blocks:
        try:
            doc = yaml.safe_load(body)
        except yaml.YAMLError as exc:
            pytest.fail(f"docs/guide.md:{line}: YAML does not parse: {exc}")
        assert isinstance(doc, dict), f"docs/guide.md:{line}"
        commands += [(line, c) for s in _yaml_strings(doc) for c in _commands(s)]
    github = next(yaml.safe_load(b) for _, b in yaml_blocks if "runs-on" in b)
    steps = github["jobs"]["gate"]["steps"]
    assert any(s.get("if") == "always()" and "upload-artifact" in s.get("uses", "") for s in steps)
    gitlab = next(yaml.safe_load(b) for _, b in yaml_blocks if "flink-upgrade-gate:" in b.splitlines()[0])
    assert gitlab["flink-upgrade-gate"]["artifacts"]["when"] == "always"
    assert {c.split()[1] for _, c in commands} >= {"export", "check"}
    _parse_all(commands)


def test_every_upgrade_gate_command_in_the_guide_parses() -> None:
    commands = [(line, c) for line, lang, body, _ in _blocks() if lang == "bash" for c in _commands(body)]
    assert len(commands) >= 15
    _parse_all(commands)


def _parse_all(commands: list[tuple[int, str]]) -> None:
    parser = build_parser()
    for line, command in commands:
        argv = shlex.split(command.split(" > ")[0].split(" | ")[0], comments=True)
        argv = argv[argv.index("upgrade-gate") + 1:]
        try:
            parser.parse_args(argv)
        except SystemExit as exc:
            pytest.fail(f"docs/guide.md:{line}: `upgrade-gate {' '.join(argv)}` is rejected by the CLI (exit {exc})")


def test_every_verdict_meaning_is_the_one_the_tool_prints() -> None:
    from upgrade_gate.vocabulary import Verdict

    text = GUIDE.read_text(encoding="utf-8")
    for v in Verdict:
        assert f"| `{v.value}` | {v.meaning} |" in text, f"docs/guide.md: the row of {v.value} is out of date"
