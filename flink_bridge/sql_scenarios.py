"""The SQL jobs of the real restore generator (flink_bridge/generate_restores.py, `--sql`).

Each scenario is job A and job B as SQL-client scripts over datagen sources at a bounded rate and
blackhole sinks, so they run anywhere. A scenario whose job A is the same script as another's
shares its savepoint (`shape`). `plans` are FLIP-190 plans compiled by real Flink, each in its own
JVM (ExecNode ids come from a JVM-wide counter, so plans compiled in one session differ), and
referenced by the scripts as `EXECUTE PLAN '<name>.json'` beside them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

_RATE = "50"


def source(rate: str = _RATE) -> str:
    return f"""CREATE TABLE clicks (
  user_id INT, region INT, url STRING, amount BIGINT, ts TIMESTAMP(3), pt AS PROCTIME(),
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH ('connector' = 'datagen', 'rows-per-second' = '{rate}',
  'fields.user_id.min' = '1', 'fields.user_id.max' = '20', 'fields.region.min' = '1', 'fields.region.max' = '5',
  'fields.url.length' = '3', 'fields.amount.min' = '1', 'fields.amount.max' = '100');
CREATE TABLE users (id INT, region INT, name STRING) WITH ('connector' = 'datagen', 'rows-per-second' = '5',
  'fields.id.min' = '1', 'fields.id.max' = '20', 'fields.region.min' = '1', 'fields.region.max' = '5',
  'fields.name.length' = '3');
"""


def sink(name: str, cols: str) -> str:
    return f"CREATE TABLE {name} ({cols}) WITH ('connector' = 'blackhole');\n"


AGG = "INSERT INTO totals SELECT user_id, COUNT(*) AS c FROM clicks GROUP BY user_id;\n"
AGG_SQL = source() + sink("totals", "user_id INT, c BIGINT") + AGG
AGG_FILTER_SQL = (source() + sink("totals", "user_id INT, c BIGINT")
                  + "INSERT INTO totals SELECT user_id, COUNT(*) AS c FROM clicks WHERE amount > 10 "
                    "GROUP BY user_id;\n")
JOIN_SQL = (source() + sink("joined", "user_id INT, url STRING, name STRING")
            + "INSERT INTO joined SELECT c.user_id, c.url, u.name FROM clicks c JOIN users u ON c.user_id = u.id;\n")
WINDOW = ("INSERT INTO per_window SELECT user_id, window_start, COUNT(*) FROM TABLE(TUMBLE(TABLE clicks, "
          "DESCRIPTOR(ts), INTERVAL '{size}' SECONDS)) GROUP BY user_id, window_start, window_end;\n")
WINDOW_SINK = sink("per_window", "user_id INT, ws TIMESTAMP(3), c BIGINT")
DEDUP = ("INSERT INTO firsts SELECT user_id, url, amount FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY user_id "
         "ORDER BY pt {order}) AS rn FROM clicks) WHERE rn = 1;\n")
DEDUP_SINK = sink("firsts", "user_id INT, url STRING, amount BIGINT")
TOPN = ("INSERT INTO top_amounts SELECT region, user_id, amount FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY "
        "region ORDER BY amount DESC) AS rn FROM clicks) WHERE rn <= {n};\n")
TOPN_SINK = sink("top_amounts", "region INT, user_id INT, amount BIGINT")
MINI_BATCH = ("SET 'table.exec.mini-batch.enabled' = 'true';\nSET 'table.exec.mini-batch.allow-latency' = '1 s';\n"
              "SET 'table.exec.mini-batch.size' = '100';\n")


def _phase(strategy: str) -> str:
    return MINI_BATCH + f"SET 'table.optimizer.agg-phase-strategy' = '{strategy}';\n"


@dataclass(frozen=True)
class SqlScenario:
    """Job A and job B of one kind of SQL change; `b_conf` holds Flink settings of job B only."""

    name: str
    a: str
    b: str
    a_conf: dict[str, str] = field(default_factory=dict)
    b_conf: dict[str, str] = field(default_factory=dict)
    # A scenario restoring another release's savepoint: (release, scenario whose job A it takes).
    savepoint_from: tuple[str, str] | None = None
    releases: tuple[str, ...] = ("1.20.5", "2.3.0")

    @property
    def shape(self) -> str:
        """Scenarios with the same job A (script and settings) share one savepoint."""
        import hashlib
        key = self.a + repr(sorted(self.a_conf.items()))
        return "sql-" + hashlib.sha256(key.encode()).hexdigest()[:10]


def _per_user(name: str, result: str, old: str, new: str) -> SqlScenario:
    """One aggregate per user whose expression changes from `old` to `new`; the sink's column stays `result`."""
    def script(expr: str) -> str:
        return (source() + sink("maxes", f"user_id INT, m {result}")
                + f"INSERT INTO maxes SELECT user_id, {expr} FROM clicks GROUP BY user_id;\n")
    return SqlScenario(name, script(old), script(new))


# Plans compiled by real Flink before the runs: name -> script (its single INSERT is compiled).
BY_REGION = "INSERT INTO by_region SELECT region, COUNT(*) FROM clicks GROUP BY region;\n"
SET_SINKS = sink("totals", "user_id INT, c BIGINT") + sink("by_region", "region INT, c BIGINT")
PLANS = {"plan-agg": AGG_SQL, "plan-agg-filter": AGG_FILTER_SQL,
         # a statement set's plan (PlanCompiler compiles several INSERTs together), then with an INSERT added
         "plan-set-agg": source() + SET_SINKS + AGG, "plan-set-agg-region": source() + SET_SINKS + AGG + BY_REGION}
EXEC_AGG_PLAN = source() + sink("totals", "user_id INT, c BIGINT") + "EXECUTE PLAN 'plan-agg.json';\n"

# key-less stateful operators: the planner keys their state by an empty key behind a GLOBAL exchange (no keyBy edge)
KEYLESS_WINDOW = (source() + sink("per_window_all", "ws TIMESTAMP(3), c BIGINT")
                  + "INSERT INTO per_window_all SELECT window_start, COUNT(*) FROM TABLE(TUMBLE(TABLE clicks, "
                    "DESCRIPTOR(ts), INTERVAL '5' SECONDS)) GROUP BY window_start, window_end;\n")
KEYLESS_WINDOW_JOIN = (source() + sink("pairs", "a INT, b INT, ws TIMESTAMP(3)")
                       + "INSERT INTO pairs SELECT l.user_id, r.user_id, l.window_start FROM "
                         "(SELECT * FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(ts), INTERVAL '2' SECONDS))) l JOIN "
                         "(SELECT * FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(ts), INTERVAL '2' SECONDS))) r "
                         "ON l.window_start = r.window_start AND l.window_end = r.window_end;\n")

# session windows (issue 33): the gap is part of the query's meaning, in the legacy group window and the TVF
SESSION_SINK = sink("sessions", "user_id INT, ws TIMESTAMP(3), c BIGINT")
SESSION_LEGACY = ("INSERT INTO sessions SELECT user_id, SESSION_START(ts, INTERVAL '{gap}' SECOND), COUNT(*) "
                  "FROM clicks GROUP BY user_id, SESSION(ts, INTERVAL '{gap}' SECOND);\n")
SESSION_TVF = ("INSERT INTO sessions SELECT user_id, window_start, COUNT(*) FROM TABLE(SESSION(TABLE clicks "
               "PARTITION BY user_id, DESCRIPTOR(ts), INTERVAL '{gap}' SECONDS)) "
               "GROUP BY user_id, window_start, window_end;\n")
TUMBLE_LEGACY = ("INSERT INTO per_window SELECT user_id, TUMBLE_START(ts, INTERVAL '{size}' SECOND), COUNT(*) "
                 "FROM clicks GROUP BY user_id, TUMBLE(ts, INTERVAL '{size}' SECOND);\n")
# a regular join whose stored rows gain a column: the new query projects one more field of the left side
JOIN_MORE_SQL = (source() + sink("joined", "user_id INT, url STRING, name STRING, amount BIGINT")
                 + "INSERT INTO joined SELECT c.user_id, c.url, u.name, c.amount FROM clicks c JOIN users u "
                   "ON c.user_id = u.id;\n")
# the same columns projected in another order: the join's inputs, so its state rows, stay as they were
JOIN_REORDERED_SQL = (source() + sink("joined", "name STRING, url STRING, user_id INT")
                      + "INSERT INTO joined SELECT u.name, c.url, c.user_id FROM clicks c JOIN users u "
                        "ON c.user_id = u.id;\n")
# a left outer join: its record views also keep how many rows each record matched (OuterJoinRecordStateViews)
LEFT_JOIN = ("INSERT INTO joined SELECT c.user_id, c.url, u.name{more} FROM clicks c LEFT JOIN users u "
             "ON c.user_id = u.id;\n")
LEFT_JOIN_SQL = source() + sink("joined", "user_id INT, url STRING, name STRING") + LEFT_JOIN.format(more="")
LEFT_JOIN_MORE_SQL = (source() + sink("joined", "user_id INT, url STRING, name STRING, amount BIGINT")
                      + LEFT_JOIN.format(more=", c.amount"))
WINDOW_SUM = ("INSERT INTO per_window SELECT user_id, window_start, COUNT(*), SUM(amount) FROM TABLE(TUMBLE(TABLE "
              "clicks, DESCRIPTOR(ts), INTERVAL '10' SECONDS)) GROUP BY user_id, window_start, window_end;\n")
WINDOW_SUM_SINK = sink("per_window", "user_id INT, ws TIMESTAMP(3), c BIGINT, s BIGINT")

SQL_SCENARIOS: tuple[SqlScenario, ...] = (
    SqlScenario("sql-identical", AGG_SQL, AGG_SQL),
    SqlScenario("sql-projection-after-aggregate", AGG_SQL, source() + sink("totals", "user_id INT, c BIGINT")
                + "INSERT INTO totals SELECT user_id, c * 2 FROM (SELECT user_id, COUNT(*) AS c FROM clicks "
                  "GROUP BY user_id);\n"),
    SqlScenario("sql-filter-before-aggregate", AGG_SQL, AGG_FILTER_SQL),
    SqlScenario("sql-count-to-sum", AGG_SQL, source() + sink("totals", "user_id INT, c BIGINT")
                + "INSERT INTO totals SELECT user_id, SUM(amount) AS c FROM clicks GROUP BY user_id;\n"),
    SqlScenario("sql-second-aggregate", AGG_SQL, source() + sink("totals", "user_id INT, c BIGINT, s BIGINT")
                + "INSERT INTO totals SELECT user_id, COUNT(*) AS c, SUM(amount) AS s FROM clicks GROUP BY user_id;\n"),
    SqlScenario("sql-group-key-same-type", AGG_SQL, source() + sink("totals", "user_id INT, c BIGINT")
                + "INSERT INTO totals SELECT region, COUNT(*) AS c FROM clicks GROUP BY region;\n"),
    SqlScenario("sql-group-key-other-type", AGG_SQL, source() + sink("totals", "url STRING, c BIGINT")
                + "INSERT INTO totals SELECT url, COUNT(*) AS c FROM clicks GROUP BY url;\n"),
    SqlScenario("sql-join-identical", JOIN_SQL, JOIN_SQL),
    SqlScenario("sql-join-condition", JOIN_SQL, source() + sink("joined", "user_id INT, url STRING, name STRING")
                + "INSERT INTO joined SELECT c.user_id, c.url, u.name FROM clicks c JOIN users u "
                  "ON c.user_id = u.id AND c.region = u.region;\n"),
    SqlScenario("sql-join-key-other-type", JOIN_SQL, source() + sink("joined", "user_id INT, url STRING, name STRING")
                + "INSERT INTO joined SELECT c.user_id, c.url, u.name FROM clicks c JOIN users u ON c.url = u.name;\n"),
    SqlScenario("sql-window-size", source() + WINDOW_SINK + WINDOW.format(size=10),
                source() + WINDOW_SINK + WINDOW.format(size=20)),
    SqlScenario("sql-dedup-ordering", source() + DEDUP_SINK + DEDUP.format(order="ASC"),
                source() + DEDUP_SINK + DEDUP.format(order="DESC")),
    SqlScenario("sql-topn-n", source() + TOPN_SINK + TOPN.format(n=3), source() + TOPN_SINK + TOPN.format(n=5)),
    SqlScenario("sql-statement-set-gains-insert", source() + sink("totals", "user_id INT, c BIGINT")
                + "EXECUTE STATEMENT SET BEGIN\n" + AGG + "END;\n",
                source() + sink("totals", "user_id INT, c BIGINT") + sink("by_region", "region INT, c BIGINT")
                + "EXECUTE STATEMENT SET BEGIN\n" + AGG
                + "INSERT INTO by_region SELECT region, COUNT(*) FROM clicks GROUP BY region;\nEND;\n"),
    SqlScenario("sql-sink-renamed", AGG_SQL, source() + sink("totals_v2", "user_id INT, c BIGINT")
                + AGG.replace("INTO totals", "INTO totals_v2")),
    SqlScenario("sql-source-options", AGG_SQL, source(rate="80") + sink("totals", "user_id INT, c BIGINT") + AGG),
    SqlScenario("sql-parallelism", AGG_SQL, AGG_SQL, b_conf={"parallelism.default": "2"}),
    SqlScenario("sql-mini-batch-on", AGG_SQL, MINI_BATCH + AGG_SQL),
    SqlScenario("sql-one-to-two-phase", _phase("ONE_PHASE") + AGG_SQL, _phase("TWO_PHASE") + AGG_SQL),
    SqlScenario("sql-plan-same", EXEC_AGG_PLAN, EXEC_AGG_PLAN),
    SqlScenario("sql-plan-edited-query-old-plan", EXEC_AGG_PLAN, EXEC_AGG_PLAN),
    SqlScenario("sql-plan-recompiled-edited", EXEC_AGG_PLAN, source() + sink("totals", "user_id INT, c BIGINT")
                + "EXECUTE PLAN 'plan-agg-filter.json';\n"),
    SqlScenario("sql-query-to-plan", AGG_SQL, EXEC_AGG_PLAN),
    # Flink-version upgrades: the 1.20.5 savepoint restored by 2.3.0, re-planned or through the 1.20 plan.
    SqlScenario("sql-replanned-from-1.20", AGG_SQL, AGG_SQL, savepoint_from=("1.20.5", "sql-identical"),
                releases=("2.3.0",)),
    SqlScenario("sql-plan-from-1.20", EXEC_AGG_PLAN, EXEC_AGG_PLAN, savepoint_from=("1.20.5", "sql-plan-same"),
                releases=("2.3.0",)),
    # Remedies, applied (issue 19): what upgrade_gate/gate/sql_remedies.py proposes for a lost SQL state, run by
    # real Flink on the same savepoint as the loss it answers (same job A). A candidate Flink refuses stays here
    # as the proof that the gate must not propose it.
    SqlScenario("sql-remedy-query-to-plan-uids-disabled", AGG_SQL,
                "SET 'table.exec.uid.generation' = 'DISABLED';\n" + EXEC_AGG_PLAN),
    SqlScenario("sql-remedy-statement-set-new-insert-own-job",
                source() + sink("totals", "user_id INT, c BIGINT") + "EXECUTE STATEMENT SET BEGIN\n" + AGG + "END;\n",
                source() + sink("totals", "user_id INT, c BIGINT") + "EXECUTE STATEMENT SET BEGIN\n" + AGG + "END;\n"),
    SqlScenario("sql-remedy-statement-set-no-source-reuse",
                source() + sink("totals", "user_id INT, c BIGINT") + "EXECUTE STATEMENT SET BEGIN\n" + AGG + "END;\n",
                "SET 'table.optimizer.reuse-source-enabled' = 'false';\n" + source()
                + sink("totals", "user_id INT, c BIGINT") + sink("by_region", "region INT, c BIGINT")
                + "EXECUTE STATEMENT SET BEGIN\n" + AGG
                + "INSERT INTO by_region SELECT region, COUNT(*) FROM clicks GROUP BY region;\nEND;\n"),
    SqlScenario("sql-remedy-join-condition-non-equi", JOIN_SQL,
                source() + sink("joined", "user_id INT, url STRING, name STRING")
                + "INSERT INTO joined SELECT c.user_id, c.url, u.name FROM clicks c JOIN users u "
                  "ON c.user_id = u.id AND c.region - u.region = 0;\n"),
    SqlScenario("sql-remedy-mini-batch-one-phase", AGG_SQL, _phase("ONE_PHASE") + AGG_SQL),
    # a statement set run from a compiled plan: the INSERT added in a recompiled plan takes new ExecNode ids
    SqlScenario("sql-remedy-plan-statement-set-gains-insert",
                source() + SET_SINKS + "EXECUTE PLAN 'plan-set-agg.json';\n",
                source() + SET_SINKS + "EXECUTE PLAN 'plan-set-agg-region.json';\n"),
    # State row logical types (issue 15): Flink's RowDataSerializerSnapshot compares the rows' LogicalTypes
    # (nullability, lengths, precisions), not only their serializers. Keep-last deduplication keeps the row.
    SqlScenario("sql-type-varchar-to-string",
                source().replace("url STRING", "url VARCHAR(3)")
                + sink("lasts", "user_id INT, url STRING, amount BIGINT")
                + "INSERT INTO lasts SELECT user_id, url, amount FROM (SELECT user_id, url, "
                  "amount AS amount, ROW_NUMBER() OVER (PARTITION BY user_id ORDER BY pt DESC) AS rn "
                  "FROM clicks) WHERE rn = 1;\n",
                source() + sink("lasts", "user_id INT, url STRING, amount BIGINT")
                + "INSERT INTO lasts SELECT user_id, url, amount FROM (SELECT user_id, url, "
                  "amount AS amount, ROW_NUMBER() OVER (PARTITION BY user_id ORDER BY pt DESC) AS rn "
                  "FROM clicks) WHERE rn = 1;\n"),
    SqlScenario("sql-type-not-null-to-nullable",
                source() + sink("lasts", "user_id INT, url STRING, amount BIGINT")
                + "INSERT INTO lasts SELECT user_id, url, amount FROM (SELECT user_id, url, "
                  "COALESCE(amount, 0) AS amount, ROW_NUMBER() OVER (PARTITION BY user_id ORDER BY pt DESC) AS rn "
                  "FROM clicks) WHERE rn = 1;\n",
                source() + sink("lasts", "user_id INT, url STRING, amount BIGINT")
                + "INSERT INTO lasts SELECT user_id, url, amount FROM (SELECT user_id, url, "
                  "NULLIF(COALESCE(amount, 0), -1) AS amount, "
                  "ROW_NUMBER() OVER (PARTITION BY user_id ORDER BY pt DESC) AS rn "
                  "FROM clicks) WHERE rn = 1;\n"),
    _per_user("sql-type-max-of-varchar-is-string", "STRING",
              "MAX(CAST(url AS VARCHAR(3)))", "MAX(CAST(url AS VARCHAR(5)))"),
    _per_user("sql-type-decimal-precision", "DECIMAL(12, 2)",
              "MAX(CAST(amount AS DECIMAL(10, 2)))", "MAX(CAST(amount AS DECIMAL(12, 2)))"),
    _per_user("sql-type-decimal-spelled-differently", "DECIMAL(12, 2)",
              "MAX(CAST(amount AS DECIMAL(10, 2)))", "MAX(CAST(amount AS NUMERIC(10, 2)))"),
    _per_user("sql-type-decimal-sum-precision", "DECIMAL(38, 2)",
              "SUM(CAST(amount AS DECIMAL(10, 2)))", "SUM(CAST(amount AS DECIMAL(12, 2)))"),
    _per_user("sql-type-timestamp-precision", "TIMESTAMP(6)",
              "MAX(ts)", "MAX(CAST(ts AS TIMESTAMP(6)))"),
    # unchanged jobs whose state is keyed by an empty key behind a GLOBAL exchange: Flink restores them
    SqlScenario("sql-keyless-window-identical", KEYLESS_WINDOW, KEYLESS_WINDOW),
    SqlScenario("sql-keyless-window-join-identical", KEYLESS_WINDOW_JOIN, KEYLESS_WINDOW_JOIN),
    # SQL state the rules did not see (issue 33)
    SqlScenario("sql-session-gap-legacy", source() + SESSION_SINK + SESSION_LEGACY.format(gap=5),
                source() + SESSION_SINK + SESSION_LEGACY.format(gap=10)),
    SqlScenario("sql-session-identical-legacy", source() + SESSION_SINK + SESSION_LEGACY.format(gap=5),
                source() + SESSION_SINK + SESSION_LEGACY.format(gap=5)),
    SqlScenario("sql-session-gap-tvf", source() + SESSION_SINK + SESSION_TVF.format(gap=5),
                source() + SESSION_SINK + SESSION_TVF.format(gap=10)),
    SqlScenario("sql-session-identical-tvf", source() + SESSION_SINK + SESSION_TVF.format(gap=5),
                source() + SESSION_SINK + SESSION_TVF.format(gap=5)),
    SqlScenario("sql-window-size-legacy", source() + WINDOW_SINK + TUMBLE_LEGACY.format(size=10),
                source() + WINDOW_SINK + TUMBLE_LEGACY.format(size=20)),
    SqlScenario("sql-join-row-gains-column", JOIN_SQL, JOIN_MORE_SQL),
    SqlScenario("sql-join-same-columns-reordered", JOIN_SQL, JOIN_REORDERED_SQL),
    SqlScenario("sql-left-join-row-gains-column", LEFT_JOIN_SQL, LEFT_JOIN_MORE_SQL),
    # mini-batch aggregation (MiniBatchGroupAggFunction) gaining a second aggregate: the accumulator row grows
    SqlScenario("sql-mini-batch-second-aggregate", _phase("ONE_PHASE") + AGG_SQL,
                _phase("ONE_PHASE") + source() + sink("totals", "user_id INT, c BIGINT, s BIGINT")
                + "INSERT INTO totals SELECT user_id, COUNT(*) AS c, SUM(amount) AS s FROM clicks GROUP BY user_id;\n"),
    # the unchanged mini-batch aggregates (one phase: MiniBatchGroupAggFunction; two phases: the global
    # MiniBatchGlobalGroupAggFunction behind a stateless local MapBundleOperator) and the global one gaining SUM(amount)
    SqlScenario("sql-mini-batch-identical", _phase("ONE_PHASE") + AGG_SQL, _phase("ONE_PHASE") + AGG_SQL),
    SqlScenario("sql-two-phase-identical", _phase("TWO_PHASE") + AGG_SQL, _phase("TWO_PHASE") + AGG_SQL),
    SqlScenario("sql-two-phase-second-aggregate", _phase("TWO_PHASE") + AGG_SQL,
                _phase("TWO_PHASE") + source() + sink("totals", "user_id INT, c BIGINT, s BIGINT")
                + "INSERT INTO totals SELECT user_id, COUNT(*) AS c, SUM(amount) AS s FROM clicks GROUP BY user_id;\n"),
    SqlScenario("sql-window-row-gains-field", source() + WINDOW_SINK + WINDOW.format(size=10),
                source() + WINDOW_SUM_SINK + WINDOW_SUM),
)
