"""Compacted topics against real clients: after the cleaner ran, confluent-kafka and kafka-python read
from the beginning across offset gaps, compressed batches and transactional data (committed kept,
aborted gone, markers and emptied batches skipped) with no errors; keyless records are refused."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from samsa.protocol.batch import read_header
from samsa.protocol.records import encode_batch, iter_batches
from samsa.storage.cleaner import STATS_FILE
from samsa.storage.log import LogConfig, PartitionLog
from samsa.testing import SamsaBroker

pytestmark = pytest.mark.timeout(120)
COMPACT = {"cleanup.policy": "compact", "segment.bytes": "8000", "segment.ms": "500",
           "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "300"}


@pytest.fixture(scope="module")
def broker() -> Iterator[SamsaBroker]:
    with SamsaBroker(overrides={"log.cleaner.backoff.ms": "100"}) as b:
        yield b


def create(b: SamsaBroker, topic: str, **extra: str) -> None:
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config={**COMPACT, **extra})])[topic].result(10)


def cleaner_state(b: SamsaBroker, topic: str) -> dict[str, Any]:
    try:
        stats = json.loads((b.data_dir / "logs" / STATS_FILE).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}
    return stats.get("partitions", {}).get(f"{topic}-0", {})  # type: ignore[no-any-return]


def wait_cleaned(b: SamsaBroker, topic: str, upto: int, timeout: float = 30) -> None:
    """Until the clean/dirty boundary reaches `upto` (everything below it compacted)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cleaner_state(b, topic).get("first_dirty_offset", -1) >= upto:
            return
        time.sleep(0.1)
    raise AssertionError(f"not cleaned up to {upto}: {cleaner_state(b, topic)}\n{b.log_text()[-3000:]}")


def roll_and_clean(b: SamsaBroker, topic: str) -> int:
    """Write a marker record after segment.ms so everything before it is in closed segments, and
    wait for the cleaner to get there. Returns the marker's offset."""
    time.sleep(0.6)
    p = Producer({"bootstrap.servers": b.bootstrap})
    offsets: list[int] = []
    p.produce(topic, key=b"~roll", value=b"x", on_delivery=lambda e, m: offsets.append(m.offset()))
    assert p.flush(10) == 0
    wait_cleaned(b, topic, offsets[0])
    return offsets[0]


def consume_confluent(b: SamsaBroker, topic: str, end: int,
                      **conf: Any) -> list[tuple[int, bytes | None, bytes | None]]:
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "verify", "enable.auto.commit": False,
                  "check.crcs": True, **conf})
    c.assign([TopicPartition(topic, 0, 0)])
    rows: list[tuple[int, bytes | None, bytes | None]] = []
    deadline = time.time() + 20
    try:
        while time.time() < deadline and (not rows or rows[-1][0] < end):
            for m in c.consume(1000, 0.5):
                assert m.error() is None, m.error()
                rows.append((m.offset(), m.key(), m.value()))
    finally:
        c.close()
    return rows


def consume_kafka_python(b: SamsaBroker, topic: str, end: int) -> list[tuple[int, bytes | None,
                                                                        bytes | None]]:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    c = KafkaConsumer(bootstrap_servers=b.bootstrap, enable_auto_commit=False, check_crcs=True,
                      consumer_timeout_ms=2000)
    tp = KTP(topic, 0)
    c.assign([tp])
    c.seek(tp, 0)
    rows: list[tuple[int, bytes | None, bytes | None]] = []
    deadline = time.time() + 20
    try:
        while time.time() < deadline and (not rows or rows[-1][0] < end):
            for recs in c.poll(timeout_ms=500).values():
                rows += [(r.offset, r.key, r.value) for r in recs]
    finally:
        c.close()
    return rows


def test_clients_read_compacted_topic_across_gaps(broker: SamsaBroker) -> None:
    # No cleaning while the records are written (min.compaction.lag.ms, lifted below): a
    # background pass then would start the tombstones' delete.retention.ms clock early and the
    # check that they survive the first cleaning would race with the next one.
    create(broker, "compacted", **{"min.compaction.lag.ms": "600000"})
    written: dict[int, tuple[bytes, bytes | None]] = {}
    for n, codec in enumerate(["none", "gzip", "snappy", "lz4", "zstd"]):
        p = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": codec,
                      "linger.ms": 5})

        def done(err: KafkaError | None, msg: Any) -> None:
            assert err is None, err
            written[msg.offset()] = (msg.key(), msg.value())

        for i in range(1500):
            k = b"key-%03d" % ((i * 7 + n) % 200)
            v = None if i % 97 == 0 else b"%s-%d-" % (codec.encode(), i) + b"x" * (i % 40)
            p.produce("compacted", key=k, value=v, on_delivery=done)
        assert p.flush(20) == 0
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    res = ConfigResource(ResourceType.TOPIC, "compacted", incremental_configs=[
        ConfigEntry("min.compaction.lag.ms", "0", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(10)
    end = roll_and_clean(broker, "compacted")
    latest: dict[bytes, int] = {}
    for off in sorted(written):
        latest[written[off][0]] = off
    # tombstones are still there (delete.retention.ms counts from their first cleaning)
    expected = sorted((off, *written[off]) for off in latest.values()) + [(end, b"~roll", b"x")]
    for rows in (consume_confluent(broker, "compacted", end),
                 consume_kafka_python(broker, "compacted", end)):
        assert rows == expected
    # once past delete.retention.ms, the next cleaning drops them
    end2 = roll_and_clean(broker, "compacted")
    live = [r for r in expected if r[2] is not None and r[1] != b"~roll"]
    rows = consume_confluent(broker, "compacted", end2)
    assert [r for r in rows if r[1] != b"~roll"] == live
    assert len(live) < len(expected) - 1
    out = subprocess.run([sys.executable, "-m", "samsa.cli.main", "log", "cleaner", "--log-dirs",
                          str(broker.data_dir / "logs"), "--topic", "compacted"],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert "compacted-0" in out.stdout and "runs" in out.stdout


def test_keyless_records_are_refused_on_compacted_topics(broker: SamsaBroker) -> None:
    create(broker, "needs-keys")
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    results: list[KafkaError | None] = []
    p.produce("needs-keys", value=b"no key", on_delivery=lambda e, m: results.append(e))
    p.flush(10)
    p.produce("needs-keys", key=b"k", value=b"keyed", on_delivery=lambda e, m: results.append(e))
    p.flush(10)
    assert results[0] is not None and results[0].code() == KafkaError.INVALID_RECORD
    assert results[1] is None
    # Kafka's answer in full: one record error per keyless record and the summary message
    from tests.wire import Wire

    w = Wire(broker.bootstrap)
    batch = encode_batch([(b"k", b"v", [], int(time.time() * 1000)), (None, b"v", [], 0),
                          (None, None, [], 0)])
    resp = w.request(0, 9, {"transactional_id": None, "acks": 1, "timeout": 5000, "topic_data": [
        {"name": "needs-keys", "partition_data": [{"index": 0, "records": batch}]}]})
    w.close()
    part = resp.responses[0].partition_responses[0]
    assert part.error_code == 87 and part.base_offset == -1
    assert [e.batch_index for e in part.record_errors] == [1, 2]
    assert part.record_errors[0].batch_index_error_message == (
        "Compacted topic cannot accept message without key in topic partition needs-keys-0")
    assert part.error_message.startswith("One or more records have been rejected due to 2 record "
                                         "errors in total")
    from kafka import KafkaProducer
    from kafka.errors import InvalidRecordError

    kp = KafkaProducer(bootstrap_servers=broker.bootstrap, retries=0)
    with pytest.raises(InvalidRecordError):
        kp.send("needs-keys", value=b"no key").get(timeout=10)
    kp.close()
    # a topic that is not compacted takes them
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("keys-optional", 1, 1)])["keys-optional"].result(10)
    p.produce("keys-optional", value=b"no key", on_delivery=lambda e, m: results.append(e))
    p.flush(10)
    assert results[2] is None


def on_disk_headers(b: SamsaBroker, topic: str) -> list[Any]:
    out = []
    for path in sorted((b.data_dir / "logs" / f"{topic}-0").glob("*.log")):
        data = path.read_bytes()
        out += [read_header(data, pos) for pos, _size in iter_batches(data)]
    return out


def _txn_batch(pid: int, seq: int, recs: list[tuple[bytes, bytes | None]], ts: int,
               codec: int = 0) -> bytearray:
    return bytearray(encode_batch([(k, v, [], ts) for k, v in recs], producer_id=pid,
                                  producer_epoch=0, base_sequence=seq, attributes_extra=0x10,
                                  compression=codec))


def _marker(pid: int, commit: bool, ts: int) -> bytearray:
    return bytearray(encode_batch([(struct.pack(">hh", 0, int(commit)), struct.pack(">hi", 0, 0), [], ts)],
                                  producer_id=pid, producer_epoch=0, attributes_extra=0x30))


def test_clients_read_compacted_transactional_data(broker: SamsaBroker) -> None:
    """Transactions are not served yet, so the transactional batches and their markers are written
    into the partition directly (broker stopped), as the transaction coordinator will write them."""
    create(broker, "txn-compacted")
    broker.stop()
    now = int(time.time() * 1000)
    lg = PartitionLog.open(broker.data_dir / "logs" / "txn-compacted-0", "txn-compacted", 0,
                           LogConfig(segment_bytes=8000, cleanup_policy="compact"), clean=True)
    offsets: dict[str, int] = {}
    for name, batch in [
        ("t1", _txn_batch(1000, 0, [(b"a", b"a-committed"), (b"b", b"b-committed")], now, codec=1)),
        ("c1", _marker(1000, True, now)),
        ("t2", _txn_batch(1000, 2, [(b"a", b"a-aborted"), (b"c", b"c-aborted")], now, codec=4)),
        ("c2", _marker(1000, False, now)),
        ("t3", _txn_batch(1000, 4, [(b"b", b"b-txn3")], now)),
        ("c3", _marker(1000, True, now)),
        ("p1", bytearray(encode_batch([(b"b", b"b-plain", [], now), (b"e", b"e-plain", [], now)],
                                      compression=3))),
    ] + [(f"i{i}", bytearray(encode_batch([(b"d", b"d-%d" % i, [], now)], producer_id=2000,
                                          producer_epoch=0, base_sequence=i))) for i in range(5)]:
        offsets[name] = lg.append(batch, now)[0]
    lg.close()
    broker.start()
    end = roll_and_clean(broker, "txn-compacted")
    expected = [(offsets["t1"], b"a", b"a-committed"), (offsets["p1"], b"b", b"b-plain"),
                (offsets["p1"] + 1, b"e", b"e-plain"), (offsets["i4"], b"d", b"d-4"),
                (end, b"~roll", b"x")]
    # what the clients had to get through: markers, an emptied transactional batch (producer 1000's
    # last sequence) and compressed batches
    heads = on_disk_headers(broker, "txn-compacted")
    assert any(h.is_control for h in heads)
    assert any(h.records_count == 0 and h.producer_id == 1000 for h in heads)
    assert any(h.compression for h in heads)
    for iso in ("read_committed", "read_uncommitted"):
        assert consume_confluent(broker, "txn-compacted", end, **{"isolation.level": iso}) == expected
    assert consume_kafka_python(broker, "txn-compacted", end) == expected


def test_transactional_producer_on_compacted_topic(broker: SamsaBroker) -> None:
    """Committed and aborted transactions from a real transactional producer, compacted: both
    isolation levels and kafka-python see exactly the latest committed value per key."""
    create(broker, "txn-real")
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "compaction-test",
                  "compression.type": "zstd", "linger.ms": 5})
    p.init_transactions(10)
    committed: dict[bytes, tuple[int, bytes]] = {}
    for t in range(12):
        p.begin_transaction()
        pending: list[tuple[bytes, bytes]] = []
        for i in range(50):
            k = b"k%02d" % ((t * 13 + i) % 40)
            v = b"t%d-%d" % (t, i)
            p.produce("txn-real", key=k, value=v)
            pending.append((k, v))
        if t % 3 == 2:
            p.abort_transaction(10)
        else:
            p.flush(10)
            p.commit_transaction(10)
            for k, v in pending:
                committed[k] = (t, v)
    end = roll_and_clean(broker, "txn-real")
    expected = {k: v for k, (_t, v) in committed.items()} | {b"~roll": b"x"}
    for iso in ("read_committed", "read_uncommitted"):
        rows = consume_confluent(broker, "txn-real", end, **{"isolation.level": iso})
        assert {k: v for _o, k, v in rows} == expected and len(rows) == len(expected)
    rows = consume_kafka_python(broker, "txn-real", end)
    assert {k: v for _o, k, v in rows} == expected and len(rows) == len(expected)
    heads = on_disk_headers(broker, "txn-real")
    assert any(h.is_control for h in heads) and any(h.is_transactional for h in heads)
