"""The order events of the seeds' pipeline: the OrderEvent message class (compiled at run time from
order_event.proto with grpcio-tools' bundled protoc, so no generated code is checked in), a
generator that produces them to `order-events` in the Confluent wire format through Samsa's schema
registry, and a reader that decodes the whole topic back (what the walk-through checks against)."""

from __future__ import annotations

import random
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

TOPIC = "order-events"
SUBJECT = f"{TOPIC}-value"  # TopicNameStrategy, as the serializer and the converters use
PARTITIONS = 3
PROTO = Path(__file__).with_name("order_event.proto")
MINUTE_MS = 60_000

# the shop's catalogue: product id -> unit price in cents
PRODUCTS = {f"P-{i:03d}": price for i, price in enumerate(
    [1299, 2499, 399, 8999, 1549, 649, 12900, 2999, 459, 3450, 799, 19999], start=1)}
CUSTOMERS = 400
MAX_LATENESS_MS = 5 * MINUTE_MS  # below the job's 10-minute watermark: late events still count
LATE_SHARE = 0.08
CANCELLED_SHARE = 0.05


@lru_cache(maxsize=1)
def order_event_class() -> Any:
    """The OrderEvent message class, built from order_event.proto (protoc -> descriptor set ->
    a descriptor pool of its own -> a message class)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    from grpc_tools import protoc

    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "order_event.pb"
        rc = protoc.main(["protoc", f"-I{PROTO.parent}", f"--descriptor_set_out={out}", PROTO.name])
        if rc != 0:
            raise RuntimeError(f"protoc could not compile {PROTO} (exit code {rc})")
        fds = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    pool = descriptor_pool.DescriptorPool()
    for fdp in fds.file:
        pool.Add(fdp)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("samsa.pipeline.OrderEvent"))


def registry_client(registry_url: str, props: dict[str, str] | None = None) -> SchemaRegistryClient:
    """props: registry client settings by Confluent's names (basic.auth.*, schema.registry.ssl.*)."""
    from samsa.registry.client_config import RegistryClientSettings
    return SchemaRegistryClient(RegistryClientSettings.parse(registry_url, props).confluent_conf())


def serializer(registry_url: str, props: dict[str, str] | None = None) -> ProtobufSerializer:
    return ProtobufSerializer(order_event_class(), registry_client(registry_url, props),
                              {"use.deprecated.format": False})


def register_schema(registry_url: str, props: dict[str, str] | None = None) -> int:
    """Register OrderEvent under order-events-value (what the serializer does on its first
    record) so the Spark job can plan against the subject before any event exists; its id."""
    ser = serializer(registry_url, props)
    ser(order_event_class()(), SerializationContext(TOPIC, MessageField.VALUE))
    sid = registry_client(registry_url, props).get_latest_version(SUBJECT).schema_id
    if sid is None:
        raise RuntimeError(f"the registry has no id for {SUBJECT}")
    return int(sid)


def ensure_topic(bs: str) -> bool:
    """Create order-events (3 partitions) unless it exists; True when it was created."""
    admin = AdminClient({"bootstrap.servers": bs, "log_level": 3})
    if TOPIC in admin.list_topics(timeout=10).topics:
        return False
    fut = admin.create_topics([NewTopic(TOPIC, PARTITIONS)], request_timeout=30)[TOPIC]
    try:
        fut.result(35)
    except KafkaException as e:
        if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise
    return True


@dataclass
class Produced:
    count: int
    seconds: float
    first_event_ms: int
    last_event_ms: int
    late: int


def generate(bs: str, registry_url: str, n: int, *, start_ms: int, span_ms: int,
             seconds: float = 0.0, seed: int | None = None, order_prefix: str = "o",
             progress: Callable[[int], None] | None = None,
             registry_props: dict[str, str] | None = None) -> Produced:
    """Produce n OrderEvents keyed by order id whose event times walk through [start_ms,
    start_ms + span_ms) with jitter; LATE_SHARE of them arrive up to MAX_LATENESS_MS late (out of
    order). `seconds` spreads production over that much wall time (in 20 bursts) so a streaming
    job sees it arrive; 0 produces as fast as possible."""
    rng = random.Random(seed)
    cls = order_event_class()
    ser = serializer(registry_url, registry_props)
    ctx = SerializationContext(TOPIC, MessageField.VALUE)
    p = Producer({"bootstrap.servers": bs, "enable.idempotence": True, "linger.ms": 20,
                  "compression.type": "lz4"})
    failed: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, _msg: Any) -> None:
        if err is not None:
            failed.append(err)

    products = list(PRODUCTS)
    statuses = [cls.Status.Value(s) for s in ("CREATED", "PAID", "SHIPPED")]
    cancelled = cls.Status.Value("CANCELLED")
    t0 = time.monotonic()
    bursts = 20 if seconds > 0 else 1
    late = 0
    first = last = start_ms
    for i in range(n):
        if seconds > 0 and i % max(1, n // bursts) == 0 and i:
            p.poll(0)
            pause = t0 + seconds * i / n - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            if progress is not None:
                progress(i)
        clock = start_ms + span_ms * i // n
        if rng.random() < LATE_SHARE:
            event_ms = clock - rng.randrange(30_000, MAX_LATENESS_MS)
            late += 1
        else:
            event_ms = clock + rng.randrange(-2000, 2000)
        event_ms = max(event_ms, start_ms)
        first, last = min(first, event_ms), max(last, event_ms)
        product = rng.choice(products)
        ev = cls(order_id=f"{order_prefix}-{i:07d}", customer_id=f"c-{rng.randrange(CUSTOMERS):04d}",
                 product_id=product, quantity=rng.randint(1, 5), unit_price_cents=PRODUCTS[product],
                 status=cancelled if rng.random() < CANCELLED_SHARE else rng.choice(statuses),
                 event_time_ms=event_ms)
        value = ser(ev, ctx)
        while True:
            try:
                p.produce(TOPIC, key=ev.order_id.encode(), value=value, on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.05)
    if p.flush(60) or failed:
        raise RuntimeError(f"producing order events failed: {failed[:1] or 'flush timed out'}")
    return Produced(n, time.monotonic() - t0, first, last, late)


def end_offsets(bs: str) -> dict[int, int]:
    """partition -> high watermark of order-events."""
    c = Consumer({"bootstrap.servers": bs, "group.id": "samsa-pipeline-check",
                  "enable.auto.commit": False})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1]
                for p in range(PARTITIONS)}
    finally:
        c.close()


@dataclass
class Event:
    partition: int
    offset: int
    order_id: str
    product_id: str
    quantity: int
    unit_price_cents: int
    status: str
    event_time_ms: int


def read_events(bs: str, last: int | None = None, timeout_s: float = 60.0) -> list[Event]:
    """Every event in order-events up to its current end (or only the `last` ones of each
    partition), decoded with Confluent's ProtobufDeserializer."""
    ends = end_offsets(bs)
    des = ProtobufDeserializer(order_event_class(), {"use.deprecated.format": False})
    ctx = SerializationContext(TOPIC, MessageField.VALUE)
    status_name = order_event_class().Status.Name
    c = Consumer({"bootstrap.servers": bs, "group.id": "samsa-pipeline-check",
                  "enable.auto.commit": False})
    out: list[Event] = []
    try:
        todo = {p for p, e in ends.items() if e > 0}
        c.assign([TopicPartition(TOPIC, p, 0 if last is None else max(0, ends[p] - last))
                  for p in todo])
        deadline = time.monotonic() + timeout_s
        while todo and time.monotonic() < deadline:
            for m in c.consume(5000, 1.0):
                if m.error() is not None:
                    continue
                p, off = int(m.partition() or 0), int(m.offset() or 0)
                if p not in todo or off >= ends[p]:
                    continue
                ev = des(m.value(), ctx)
                out.append(Event(p, off, ev.order_id, ev.product_id, ev.quantity, ev.unit_price_cents,
                                 status_name(ev.status), ev.event_time_ms))
                if off == ends[p] - 1:
                    todo.discard(p)
        if todo:
            raise RuntimeError(f"could not read order-events to its end in {timeout_s:.0f} s")
    finally:
        c.close()
    return out


def resume_point(bs: str) -> int:
    """Where the simulated clock continues: the next minute after every event already in the
    topic (plus the lateness bound), so a re-run never lands behind the job's watermark. Events
    are produced in event-time order up to the bounded lateness, so the partitions' last records
    are enough to find the latest."""
    events = read_events(bs, last=200)
    if not events:
        return simulated_epoch()
    latest = max(e.event_time_ms for e in events) + MAX_LATENESS_MS
    return (latest // MINUTE_MS + 2) * MINUTE_MS


def simulated_epoch() -> int:
    """The simulated shop opens at the start of the current hour (UTC)."""
    now = int(time.time() * 1000)
    return now - now % (60 * MINUTE_MS)


def window_totals(events: list[Event], window_ms: int = MINUTE_MS
                  ) -> dict[tuple[int, str], tuple[int, int, int]]:
    """(window start ms, product) -> (orders, units, revenue cents) of the non-cancelled orders,
    plus windows with only cancelled orders as (0, 0, 0): what the Spark job must have written."""
    out: dict[tuple[int, str], tuple[int, int, int]] = {}
    for e in events:
        k = (e.event_time_ms - e.event_time_ms % window_ms, e.product_id)
        orders, units, revenue = out.get(k, (0, 0, 0))
        if e.status != "CANCELLED":
            orders, units, revenue = orders + 1, units + e.quantity, revenue + e.quantity * e.unit_price_cents
        out[k] = (orders, units, revenue)
    return out
