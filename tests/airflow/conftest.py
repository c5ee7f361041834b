"""The Airflow tier: runs in the Airflow virtual environment (.work/venv-airflow), not the core's.

Run it with `.work/venv-airflow/bin/python -m pytest tests/airflow` (`make test` does). Under
another interpreter this directory is not collected: Airflow 3.3 cannot share an environment
with the Spark and Flink tooling (docs/design.md, Real components), so the core's pytest leaves it to that command.

One embedded stack per session (demo/stack.py): SeaweedFS with the real savepoints and graphs,
a real HTTP alert receiver, a SQLite Airflow home in .work/airflow-tests-<random>.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
AIRFLOW_VENV = REPO / ".work" / "venv-airflow"

if Path(sys.prefix).resolve() != AIRFLOW_VENV.resolve():
    collect_ignore_glob = ["test_*.py"]
else:
    for p in (str(REPO), str(REPO / "plugins")):
        if p not in sys.path:
            sys.path.insert(0, p)


@pytest.fixture(scope="session")
def stack():
    """A private stack: its Airflow home is `.work/airflow-tests-<random>`, removed afterwards, so
    two sessions (two engineers, or `make test` beside a manual run) never share a home or a DB."""
    import shutil
    import uuid

    from demo import stack as st

    s = st.start(f"tests-{uuid.uuid4().hex[:8]}")
    try:
        yield s
    finally:
        s.stop()
        shutil.rmtree(s.home, ignore_errors=True)


@pytest.fixture(scope="session")
def gate_runs(stack):
    """One `airflow dags test` per verdict, shared by the tests that look at them."""
    from demo import stack as st

    runs = {}
    # ledger-rollup asks for allowNonRestoredState: Flink would start and drop the state (STATE_LOSS)
    overrides = {"ledger-rollup": {"allow_non_restored_state": True}}
    for job in ("orders-enrichment", "fraud-scoring", "payments-dedup", "ledger-rollup"):
        before = len(stack.receiver.received)
        state, tasks, output = stack.dags_test("flink_upgrade_gate", st.gate_conf(stack, job, **overrides.get(job, {})))
        runs[job] = {"state": state, "tasks": tasks, "output": output,
                     "alerts": list(stack.receiver.received[before:])}
    return runs
