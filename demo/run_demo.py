"""`make demo`: the upgrade gate end to end on embedded defaults, then everything is stopped.

SeaweedFS (`weed mini`) on 127.0.0.1 loaded with real savepoints and job graphs, an alert
receiver, a SQLite Airflow home in `.work/airflow-demo`, Spark `local[*]`, and two
`airflow dags test flink_upgrade_gate` runs (check only): a compatible upgrade and one that
would lose state. Prints each verdict, the alert payload the webhook received, and the report
path; exits 0 when both verdicts are the expected ones and only the incompatible one alerted.

Run with the Airflow environment's interpreter: .work/venv-airflow/bin/python -m demo.run_demo
"""

from __future__ import annotations

import json
import sys
import time

from demo import stack as st

DEMO = ("orders-enrichment", "fraud-scoring")  # a compatible upgrade, then one that would damage state


def main() -> int:
    t0 = time.monotonic()
    print("starting SeaweedFS, the alert receiver and an Airflow home in .work/airflow-demo ...", flush=True)
    s = st.start("demo")
    ok = True
    try:
        print(f"  S3 endpoint {s.s3.endpoint}; alert receiver http://127.0.0.1:{s.receiver.port}/ "
              f"({time.monotonic() - t0:.0f}s)\n", flush=True)
        for job in DEMO:
            expected = st.expected_verdict(job)
            inputs = s.inputs[job]
            conf = st.gate_conf(s, job)
            print(f"== {job}: real Flink scenario {inputs['scenario']} (Flink itself: {inputs['flink_restore']})")
            print(f"   savepoint: latest under s3://{st.SAVEPOINT_BUCKET}/{job}/  new graph: {inputs['graph']}")
            before = len(s.receiver.received)
            t = time.monotonic()
            run_state, tasks, output = s.dags_test("flink_upgrade_gate", conf)
            alerts = s.receiver.received[before:]
            entries = [e for e in _reports(s) if e.job == job]
            verdict = entries[0].verdict if entries else "?"
            print(f"   airflow dags test: run {run_state} in {time.monotonic() - t:.0f}s; tasks: "
                  + ", ".join(f"{k}={v}" for k, v in sorted(tasks.items())))
            print(f"   verdict: {verdict} (the core on the same files: {expected})")
            note = _run_note(s, "flink_upgrade_gate")
            if note:
                print(f"   run note (what the Airflow grid shows): {note}")
                print("   (its report link is served by the Airflow UI: `make ui` runs one; here, the file below)")
            if entries:
                print(f"   report: {entries[0].path / 'report.html'}")
            if alerts:
                print("   alert received by the webhook:")
                print("   " + json.dumps(alerts[-1]["body"], indent=2).replace("\n", "\n   "))
            else:
                print("   no alert (as it should be for a SAFE upgrade)" if expected == "SAFE"
                      else "   NO ALERT RECEIVED")
            ok &= verdict == expected and bool(alerts) == (expected != "SAFE")
            ok &= (expected == "SAFE") == (job == DEMO[0])
            if verdict == "?":
                print(output[-4000:])
            print(flush=True)
    finally:
        s.stop()
        print(f"stopped SeaweedFS and the alert receiver; total {time.monotonic() - t0:.0f}s")
    print("demo OK" if ok else "demo FAILED: a verdict or an alert was not the expected one")
    return 0 if ok else 1


def _run_note(s: st.Stack, dag_id: str) -> str | None:
    """The newest run's note, which the plugin's listener wrote when the run ended."""
    import sqlite3

    with sqlite3.connect(s.home / "airflow.db") as db:
        row = db.execute("select n.content from dag_run r join dag_run_note n on n.dag_run_id = r.id "
                         "where r.dag_id=? order by r.id desc limit 1", (dag_id,)).fetchone()
    return row[0] if row else None


def _reports(s: st.Stack) -> list:
    from flink_gate.reports import ReportStore

    return ReportStore(s.reports_dir).entries()


if __name__ == "__main__":
    sys.path.insert(0, str(st.REPO / "plugins"))
    sys.exit(main())
