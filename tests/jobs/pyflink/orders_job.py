"""A PyFlink DataStream job used by the exporter test: a uid'd source, a Python map, keyBy, a sink."""

from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(2)
orders = env.from_collection([(1, "a"), (2, "b")], type_info=Types.TUPLE([Types.INT(), Types.STRING()])).uid("orders")
parsed = orders.map(lambda t: (t[0] * 10, t[1]), output_type=Types.TUPLE([Types.INT(), Types.STRING()])).name("parse")
parsed.key_by(lambda t: t[1]).map(lambda t: t[0], output_type=Types.INT()).name("per-customer").uid("per-customer") \
    .print().name("print")
env.execute("pyflink-orders")
