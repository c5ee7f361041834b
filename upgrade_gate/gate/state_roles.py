"""What a piece of state *does* for the job, and what losing it does to the data.

A lost byte is not a lost byte: a source that loses its position does not fail, it starts again at its configured
startup mode (records read twice, or never); a sink that loses its writer or committer state loses output that was
already acknowledged upstream (pending files never committed, transactions left open). The savepoint names each
operator state (the `ListStateDescriptor` / `MapStateDescriptor` name the connector chose) and says whether an
operator has coordinator state; this table maps the names the connectors use to their role, each entry with the
class it comes from (read from Flink 1.20.5 / 2.3.0's jars and from the connectors' sources).

Keyed state has no name in `_metadata` (its names are in the state files' serialization proxies): it is SQL state
in a planner's operator, otherwise the operator's own state (values, windows, timers alike). A name nobody here
knows is the operator's own state, except on a source, where it is named as a source's state of an unknown
connector: most likely its position, never assumed harmless.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

__all__ = ["FILE_SOURCE", "KAFKA_SOURCE", "KAFKA_STARTING_OFFSETS", "KNOWN_STATES", "KnownState", "Role",
           "SourceStart", "consequence", "describe", "restored_empty", "role_of", "stopped_savepoint"]


class Role(StrEnum):
    """Roles, most consequential first (`describe` names them in this order)."""

    SINK_COMMITTER = "sink committer"
    SINK_WRITER = "sink writer"
    SOURCE_POSITION = "source position"
    SOURCE_ENUMERATOR = "source enumerator"
    SOURCE_UNKNOWN = "source state (unknown connector)"
    TIMERS = "timers"
    SQL_STATE = "SQL state"
    USER_STATE = "operator state"
    IN_FLIGHT = "in-flight records"


@dataclass(frozen=True, slots=True)
class KnownState:
    role: Role
    connector: str
    cite: str  # the class (and field) that declares the state


def _known(role: Role, connector: str, cite: str, *names: str) -> dict[str, KnownState]:
    return {n: KnownState(role, connector, cite) for n in names}


# name -> what it is. Flink's own operators first (FLIP-27 sources and Sink V2 sinks: every modern connector, Kafka,
# Kinesis, Pulsar, Flink CDC's incremental sources, FileSource / FileSink, stores its state under these), then the
# legacy SourceFunction / SinkFunction connectors and the table stores that keep their own names.
KNOWN_STATES: dict[str, KnownState] = {
    **_known(Role.SOURCE_POSITION, "FLIP-27 source (FileSource, KafkaSource, Kinesis, Pulsar, Flink CDC ...)",
             "org.apache.flink.streaming.api.operators.SourceOperator#SPLITS_STATE_DESC", "SourceReaderState"),
    **_known(Role.SINK_WRITER, "Sink V2 writer (FileSink, KafkaSink, ...)",
             "org.apache.flink.streaming.runtime.operators.sink.StatefulSinkWriterStateHandler#WRITER_RAW_STATES_DESC",
             "writer_raw_states"),
    **_known(Role.SINK_COMMITTER, "Sink V2 committer (FileSink, KafkaSink, Paimon, ...)",
             "org.apache.flink.streaming.runtime.operators.sink.CommitterOperator#STREAMING_COMMITTER_RAW_STATES_DESC"
             "; org.apache.paimon.flink.sink.RestoreCommittableStateManager", "streaming_committer_raw_states"),
    **_known(Role.SINK_WRITER, "StreamingFileSink (legacy)",
             "org.apache.flink.streaming.api.functions.sink.filesystem.StreamingFileSinkHelper#BUCKET_STATE_DESC, "
             "#MAX_PART_COUNTER_STATE_DESC", "bucket-states", "max-part-counter"),
    **_known(Role.SOURCE_POSITION, "readTextFile / readFile (legacy file monitoring)",
             "org.apache.flink.streaming.api.functions.source.ContinuousFileMonitoringFunction",
             "file-monitoring-state"),
    **_known(Role.SOURCE_POSITION, "FlinkKafkaConsumer (legacy)",
             "org.apache.flink.streaming.connectors.kafka.FlinkKafkaConsumerBase#OFFSETS_STATE_NAME",
             "topic-partition-offset-states"),
    **_known(Role.SINK_COMMITTER, "FlinkKafkaProducer (legacy, EXACTLY_ONCE transactions)",
             "org.apache.flink.streaming.connectors.kafka.FlinkKafkaProducer#NEXT_TRANSACTIONAL_ID_HINT_DESCRIPTOR(_V2)",
             "next-transactional-id-hint", "next-transactional-id-hint-v2"),
    **_known(Role.SOURCE_POSITION, "FlinkKinesisConsumer (legacy)",
             "org.apache.flink.streaming.connectors.kinesis.FlinkKinesisConsumer#sequenceNumsStateStoreName",
             "Kinesis-Stream-Shard-State"),
    **_known(Role.SOURCE_POSITION, "Flink CDC DebeziumSourceFunction (legacy)",
             "com.ververica.cdc.debezium.DebeziumSourceFunction#OFFSETS_STATE_NAME, #HISTORY_RECORDS_STATE_NAME",
             "offset-states", "history-records-states"),
    **_known(Role.SINK_COMMITTER, "Iceberg sink", "org.apache.iceberg.flink.sink.IcebergFilesCommitter"
             "#STATE_DESCRIPTOR, #JOB_ID_DESCRIPTOR", "iceberg-files-committer-state", "iceberg-flink-job-id"),
    **_known(Role.SINK_COMMITTER, "Paimon sink", "org.apache.paimon.flink.sink.CommitterOperator (commit user)",
             "commit_user_state"),
}
# what `findings.state_names` calls the parts that have no descriptor name
COORDINATOR, KEYED, RAW_KEYED, CHANNEL = "coordinator", "keyed", "raw keyed", "channel state"
_ORDER = {r: i for i, r in enumerate(Role)}


def stopped_savepoint(post_checkpoint_action: str | None) -> bool | None:
    """Whether a savepoint was taken by stop-with-savepoint, from the `CheckpointProperties` a v4+ `_metadata`
    records: `SavepointType#isSynchronous` is a post-checkpoint action other than NONE (SUSPEND for `flink stop`,
    TERMINATE for `flink stop --drain`). None for a file that records no properties (before v4)."""
    return None if post_checkpoint_action is None else post_checkpoint_action != "NONE"


def role_of(name: str, *, source: bool | None, sql: bool) -> Role:
    """The role of one state of an operator. `source`: the operator reads no other operator's output (None: not
    known); `sql`: a planner's operator."""
    known = KNOWN_STATES.get(name)
    if known is not None:
        return known.role
    if name == COORDINATOR:
        # SourceCoordinator checkpoints the split enumerator (`SourceCoordinator#checkpointCoordinator`); the few other
        # coordinators with state belong to operators that read input
        return Role.SOURCE_ENUMERATOR if source is not False else Role.USER_STATE
    if name == CHANNEL:
        return Role.IN_FLIGHT
    if name == RAW_KEYED:
        # raw keyed state is where InternalTimeServiceManagerImpl#snapshotToRawKeyedState writes heap timers
        return Role.TIMERS
    if name == KEYED:
        return Role.SQL_STATE if sql else Role.USER_STATE
    return Role.SOURCE_UNKNOWN if source else Role.USER_STATE


@dataclass(frozen=True, slots=True)
class SourceStart:
    """What decides where a source that lost its position starts: its connector class and, for a KafkaSource, the
    starting offsets, both from the graph export's `connector` field (docs/graph-spec.md); None: not known."""

    connector: str | None = None
    starting_offsets: str | None = None


FILE_SOURCE = "org.apache.flink.connector.file.src.FileSource"
KAFKA_SOURCE = "org.apache.flink.connector.kafka.source.KafkaSource"
# KafkaSourceBuilder#setStartingOffsets(OffsetsInitializer): where each partition starts without restored splits
_KAFKA_STARTS: dict[str, str] = {
    "earliest": "at the earliest retained offsets (its configured starting offsets): records it already read are "
                "read again (duplicates downstream)",
    "latest": "at the latest offsets (its configured starting offsets): records it had not read yet, and those "
              "produced until it runs again, are skipped (never processed)",
    "committed": "at its consumer group's committed offsets (its configured starting offsets): KafkaSource commits "
                 "them when a checkpoint completes (by default), so the records read since the last commit are read "
                 "again (duplicates downstream); a partition with no committed offset starts where the reset "
                 "strategy says",
    "timestamp": "at the offsets of its configured start timestamp: records after it that it already read are read "
                 "again (duplicates), records before it that it had not read are skipped",
    "specified": "at the offsets it was configured with: records after them that it already read are read again "
                 "(duplicates), records before them that it had not read are skipped",
}
KAFKA_STARTING_OFFSETS = tuple(_KAFKA_STARTS)


def _source_restart(start: SourceStart | None) -> str:
    """Where a source that forgot its position starts again, as specific as its connector and configuration say."""
    connector = start.connector if start is not None else None
    if connector == FILE_SOURCE:
        # FileSource has no startup mode: without restored state its enumerator (StaticFileSplitEnumerator, or
        # ContinuousFileSplitEnumerator with no processed paths) lists its paths again; measured: docs/guide.md
        return ("reads every file under its paths again from the start (a FileSource has no startup mode: its "
                "enumerator lists its paths again): records it already read are read again (duplicates downstream)")
    if connector == KAFKA_SOURCE and start is not None and start.starting_offsets in _KAFKA_STARTS:
        return "starts " + _KAFKA_STARTS[start.starting_offsets]
    return ("starts wherever its configured startup mode says (a setting of the connector, e.g. KafkaSource's "
            "starting offsets, that the graph does not show): from the beginning, records it already read are read "
            "again (duplicates downstream); from the latest, records it had not read yet are skipped (never "
            "processed)")


def consequence(role: Role, operator: str, *, stopped: bool | None = None, start: SourceStart | None = None) -> str:
    """What the data goes through when this state is lost, in the words of the people who own the data. `stopped`:
    the savepoint was taken by stop-with-savepoint (None: not known), which changes what a sink still holds; `start`:
    what decides where a source starts again."""
    if stopped and role in _STOPPED:
        return _STOPPED[role](operator)
    if role is Role.SOURCE_POSITION:
        return f"source '{operator}' forgets how far it read and {_source_restart(start)}"
    if role is Role.SOURCE_ENUMERATOR:
        return (f"source '{operator}' forgets which splits it discovered and assigned, discovers them again and "
                f"{_source_restart(start)}")
    return {
        Role.SINK_COMMITTER: f"sink '{operator}' forgets output it had not committed yet: those records are never "
                             f"committed (pending files stay pending, open transactions linger and block "
                             f"read_committed readers), although the sources will not send them again",
        Role.SINK_WRITER: f"sink '{operator}' loses its in-progress output: records in part files it had not "
                          f"rolled (with a size or time rolling policy, everything written since the part file was "
                          f"opened, across checkpoints) and in open transactions are never committed",
        Role.SOURCE_UNKNOWN: f"source '{operator}' loses state of a connector the gate does not know: most likely "
                             f"its position, so it starts wherever its configured startup mode says (records "
                             f"read again, or skipped)",
        Role.TIMERS: f"timers of '{operator}' are lost: windows and timeouts they would have fired never fire",
        Role.SQL_STATE: f"SQL operator '{operator}' starts empty: aggregates, joins, deduplication and top-N are "
                        f"computed from new records only, as if the history before the upgrade never happened",
        Role.USER_STATE: f"'{operator}' starts without this state: what it remembered (counts, buffers, seen keys, "
                         f"windows) starts from nothing",
        Role.IN_FLIGHT: f"records in flight at the checkpoint around '{operator}' are dropped",
    }[role]


# A stop-with-savepoint is a synchronous savepoint: Flink notifies its completion to every task before the job
# finishes (`CheckpointCoordinator#cleanupAfterCompletedCheckpoint` sends `notifyCheckpointComplete` for a checkpoint
# or a synchronous savepoint, never for an intermediate one), so the sink committed what it had handed to its
# committer. Measured with FileSink on Flink 1.20.5 and 2.3.0 (tests/flink/test_file_connector_restores.py): the
# committer's lost state lost no record; the writer's lost state lost exactly the records of its unrolled part file.
_STOPPED: dict[Role, Callable[[str], str]] = {
    Role.SINK_COMMITTER: lambda operator: (
        f"sink '{operator}' forgets committables, but this savepoint was taken by stop-with-savepoint: Flink had the "
        f"sink commit them before the old job stopped, so no committed output is lost (after a savepoint without "
        f"stop, its pending files would never be committed)"),
    Role.SINK_WRITER: lambda operator: (
        f"sink '{operator}' loses its in-progress output: records in part files it had not rolled at the "
        f"stop-with-savepoint (with a size or time rolling policy, everything written since the part file was "
        f"opened, across checkpoints) and in open transactions are never committed; a sink that rolls on every "
        f"checkpoint had handed all of it to its committer, which committed it"),
}


def restored_empty(operator: str) -> str:
    """What an operator that gets no state in a restored job meets besides the data it lost: Flink says it was
    restored (`PrioritizedOperatorSubtaskState#isRestored()` is true for every operator of a restored job), so code
    written for a restore runs on empty state (issue #33, `upgrade_gate.gate.rules.restored_empty`)."""
    return (f"'{operator}' starts empty in a restored job: Flink reports isRestored() == true to it, so code that "
            f"expects restored state (a source enumerator, a sink committer, a function that reads what it restored) "
            f"finds none and may fail after the restore")


def describe(names: list[str] | tuple[str, ...], operator: str, *, source: bool | None,
             sql: bool, stopped: bool | None = None,
             start: SourceStart | None = None) -> tuple[Role, str, tuple[tuple[str, str], ...]]:
    """The roles of the states a finding names: the most consequential, one consequence sentence per role (most
    consequential first; a source's position and enumerator say the same thing once), and each state's role.
    `stopped`: the savepoint was taken by stop-with-savepoint (`stopped_savepoint`); `start`: what decides where a
    source starts again. The operator a lost state was re-keyed away from, which starts empty told it was restored,
    is not repeated here: the restored-empty rule warns about it once (`rules.restored_empty`)."""
    roles = [(n, role_of(n, source=source, sql=sql)) for n in names] or [("", Role.USER_STATE)]
    distinct = sorted({r for _, r in roles}, key=_ORDER.__getitem__)
    if Role.SOURCE_POSITION in distinct and Role.SOURCE_ENUMERATOR in distinct:
        distinct.remove(Role.SOURCE_ENUMERATOR)  # the same data consequence: say it once
    said = [consequence(r, operator, stopped=stopped, start=start) for r in distinct]
    return (distinct[0], "; ".join(said),
            tuple((n, str(r)) for n, r in roles if n))
