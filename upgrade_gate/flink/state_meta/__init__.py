"""Reader of state meta information: what every state of a savepoint is and how it is serialized.

Beside the `_metadata` reader (upgrade_gate/flink/metadata/): that one finds the state handles, this one
opens them and reads the serialization proxy each starts with (`KeyedBackendSerializationProxy`,
`OperatorBackendSerializationProxy`): state names, kinds and `TypeSerializerSnapshot`s, nested ones included.
"""

from upgrade_gate.flink.state_meta.model import (
    KeyedStateMeta,
    OperatorSchemas,
    OperatorStateMeta,
    SerializerSnapshot,
    StateMetaInfo,
)
from upgrade_gate.flink.state_meta.reader import oracle_view, read_state_schemas

__all__ = ["KeyedStateMeta", "OperatorSchemas", "OperatorStateMeta", "SerializerSnapshot", "StateMetaInfo",
           "oracle_view", "read_state_schemas"]
