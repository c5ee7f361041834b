"""The `upgrade` and `verify` tasks of `flink_upgrade_gate`: operators, because their deferrable mode resumes by
method.

Default: the step (`steps.upgrade`, `steps.verify`) waits for Flink in its worker slot, as before. With the run's
`deferrable` param the step stops at its first wait for Flink (`upgrade_machine.WaitFor`: a stop-with-savepoint
still being written, the new job still restoring) and the task defers to `FlinkWaitsTrigger`, holding no worker
slot; `resume_step` runs the step again, which resumes from the job's upgrade record and the cluster exactly as an
Airflow retry does (`rollback.run_upgrade`: never a second stop or start; the lease stays with the run). A wait
the trigger gave up on (`timeout_s`) is waited for once more in the task, under the step's own deadline and
message. Rollbacks and the settling of another run's upgrade always wait in the task (`rollback.py`).
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseOperator

from flink_gate import steps
from flink_gate.upgrade_machine import WaitFor

STEPS = ("upgrade", "verify")


class UpgradeStepOperator(BaseOperator):
    """Run the single-job gate's `step` ("upgrade" or "verify"; `upgraded`: the upgrade's result, for verify)."""

    template_fields = ("upgraded",)

    def __init__(self, *, step: str, upgraded: Any = None, **kwargs: Any) -> None:
        if step not in STEPS:
            raise ValueError(f"step must be one of {STEPS}, not {step!r}")
        super().__init__(**kwargs)
        self.step = step
        self.upgraded = upgraded

    def execute(self, context: Any) -> dict[str, Any]:
        return self._run(context, defer=bool(context["params"].get("deferrable")))

    def resume_step(self, context: Any, event: dict[str, Any] | None = None) -> dict[str, Any]:
        """After the trigger fired: the step again; a wait the trigger gave up on is waited for here (and so is the
        rest of this step: it does not defer again)."""
        from flink_gate.operators.flink_waits import timed_out_waits

        return self._run(context, defer=not timed_out_waits(self, context["params"], event))

    def _run(self, context: Any, defer: bool) -> dict[str, Any]:
        from flink_gate.operators.flink_waits import defer_to_triggerer

        try:
            if self.step == "upgrade":
                return steps.upgrade(context, context["ti"].xcom_pull(task_ids="gate"), defer_waits=defer)
            return steps.verify(context, self.upgraded, defer_waits=defer)
        except WaitFor as wait:
            job = str(context["params"]["job_name"])
            defer_to_triggerer(self, context["params"], [{**wait.wait, "job": job}], "resume_step")
