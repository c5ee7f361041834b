"""`make ui`: the upgrade gate in a local Airflow UI, on the same embedded defaults as `make demo`.

SeaweedFS loaded with the real savepoints and job graphs, the alert receiver, and `airflow standalone` on
127.0.0.1 with a generated password for the user `gate-admin`. The three DAGs are there, `flink_upgrade_gate`
unpaused: trigger it from its form (the job names below have savepoints and graphs in the store), read the
verdict in the grid and the run note, and open the report from the gate task's "Upgrade report" link or
Browse -> Upgrade gate. Ctrl-C stops everything.

Run with the Airflow environment's interpreter: .work/venv-airflow/bin/python -m demo.run_ui
"""

from __future__ import annotations

import json
import signal
import time
import urllib.error
import urllib.request

from demo import stack as st


def _unpause(server: st.Standalone, dag_id: str) -> None:
    body = json.dumps({"username": server.user, "password": server.password}).encode()
    req = urllib.request.Request(f"{server.url}/auth/token", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        token = json.loads(resp.read())["access_token"]
    deadline = time.monotonic() + 120
    while True:  # the DAG exists once the standalone's DAG processor has parsed the file
        req = urllib.request.Request(f"{server.url}/api/v2/dags/{dag_id}", method="PATCH",
                                     data=json.dumps({"is_paused": False}).encode(),
                                     headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=30):
                return
        except urllib.error.HTTPError as exc:
            if exc.code != 404 or time.monotonic() > deadline:
                raise
            time.sleep(2)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM too (a `timeout`, a closed session): stop the stack, leave nothing behind


def main() -> int:
    signal.signal(signal.SIGTERM, _interrupt)
    print("starting SeaweedFS, the alert receiver and airflow standalone (about a minute) ...", flush=True)
    s = st.start("ui")
    try:
        server = st.start_standalone(s)
        _unpause(server, "flink_upgrade_gate")
        print(f"\nAirflow UI: {server.url}/   user: {server.user}   password: {server.password}")
        print(f"DAG: {server.url}/dags/flink_upgrade_gate  (Trigger, then the Check section)")
        print("jobs with a savepoint and a new graph in the store (savepoint `latest`, graph `catalogue`):")
        for job in sorted(s.inputs):
            print(f"  {job:20} expected verdict {st.expected_verdict(job)}")
        print(f"alerts go to http://127.0.0.1:{s.receiver.port}/; Ctrl-C stops everything", flush=True)
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        print("\nstopping ...")
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):  # a second Ctrl-C must not cut the stop short
            signal.signal(sig, signal.SIG_IGN)
        s.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
