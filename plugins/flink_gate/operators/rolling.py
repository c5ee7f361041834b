"""The `roll_out` task of `flink_rolling_upgrade`: an operator, because its deferrable mode resumes by method.

Default mode: `rolling.roll_out` (every wait in the worker slot). With the run's `deferrable` param in upgrade
mode: `rolling_deferred.roll_out_deferred`, deferring to `FlinkWaitsTrigger` whenever every upgrade of the wave
waits for Flink, and resuming in `resume_rollout` (docs/guide.md, "Deferred waits"). Either way the task's
return value is the rollout's outcome (`rolling.outcome`), which the `outcome` task reads.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseOperator

from flink_gate import rolling
from flink_gate.dag_parts import notifiers


class RollOutOperator(BaseOperator):
    """Walk the planned waves (`waves`, from `plan_waves`); see the module docstring for the two modes."""

    template_fields = ("waves",)

    def __init__(self, *, waves: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.waves = waves

    def execute(self, context: Any) -> dict[str, Any]:
        params = context["params"]
        if params.get("deferrable") and params.get("mode") == "upgrade":
            return self._step(context, ())
        return rolling.roll_out(context, self.waves, notifiers())

    def resume_rollout(self, context: Any, event: dict[str, Any] | None = None) -> dict[str, Any]:
        """After the trigger fired: step the wave again (a wait the trigger gave up on is waited for here)."""
        from flink_gate.operators.flink_waits import timed_out_waits

        return self._step(context, timed_out_waits(self, context["params"], event))

    def _step(self, context: Any, timed_out: tuple[str, ...]) -> dict[str, Any]:
        from flink_gate.operators.flink_waits import defer_to_triggerer
        from flink_gate.rolling_deferred import WaveWaiting, roll_out_deferred

        try:
            return roll_out_deferred(context, self.waves, notifiers(), timed_out)
        except WaveWaiting as waiting:
            defer_to_triggerer(self, context["params"], waiting.waits, "resume_rollout")
