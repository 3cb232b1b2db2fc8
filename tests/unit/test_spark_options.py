"""samsa.spark without a Spark session: option parsing (Spark's Kafka names and rules), rate limiting
over partitions, range splitting, and the schema-registry wire-format header."""

from __future__ import annotations

import struct

import pytest

pytest.importorskip("pyspark")

from samsa.spark.options import OptionError, source_options  # noqa: E402
from samsa.spark.registry_decode import FramingError, split_frame  # noqa: E402
from samsa.spark.source import plan, rate_limit  # noqa: E402

BS = {"kafka.bootstrap.servers": "h:1"}


def test_subscription_options() -> None:
    o = source_options({**BS, "subscribe": "a, b"}, streaming=True)
    assert o.subscription.topics == ("a", "b") and o.starting.kind == "latest"
    assert source_options({**BS, "subscribe": "a"}, streaming=False).starting.kind == "earliest"
    p = source_options({**BS, "subscribePattern": "ev-.*"}, streaming=True).subscription
    assert p.matches("ev-1") and not p.matches("x-ev-1")
    a = source_options({**BS, "assign": '{"t":[1,0]}'}, streaming=True).subscription
    assert a.assigned == (("t", 0), ("t", 1))
    for bad in ({}, {"subscribe": "a", "assign": '{"t":[0]}'}, {"assign": "nope"}):
        with pytest.raises(OptionError):
            source_options({**BS, **bad}, streaming=True)
    with pytest.raises(OptionError, match="bootstrap"):
        source_options({"subscribe": "a"}, streaming=True)


def test_offset_and_misc_options() -> None:
    o = source_options({**BS, "subscribe": "t", "startingOffsets": '{"t":{"0":5,"1":-2}}',
                        "endingOffsets": '{"t":{"0":9,"1":-1}}', "includeHeaders": "TRUE",
                        "failOnDataLoss": "false", "maxOffsetsPerTrigger": "10",
                        "maxTriggerDelay": "2m", "kafka.isolation.level": "read_committed",
                        "kafka.group.id": "ignored"}, streaming=False)
    assert o.starting.offsets == {"t/0": 5, "t/1": -2} and o.ending.offsets == {"t/0": 9, "t/1": -1}
    assert o.include_headers and not o.fail_on_data_loss and o.max_offsets_per_trigger == 10
    assert o.max_trigger_delay_ms == 120_000 and o.read_committed and "group.id" not in o.client
    ts = source_options({**BS, "subscribe": "t", "startingTimestamp": "1000",
                         "startingOffsets": "earliest"}, streaming=True)
    assert ts.starting.kind == "timestamp" and ts.starting.timestamp == 1000  # timestamp wins
    for bad in ({"startingOffsets": "latest"}, {"endingOffsets": "earliest"},
                {"endingOffsets": '{"t":{"0":-2}}'}, {"failOnDataLoss": "maybe"},
                {"maxOffsetsPerTrigger": "0"}):
        with pytest.raises(OptionError):
            source_options({**BS, "subscribe": "t", **bad}, streaming=False)
    with pytest.raises(OptionError, match="streaming"):
        source_options({**BS, "subscribe": "t", "endingOffsets": "latest"}, streaming=True)


def test_rate_limit_is_proportional_and_progresses() -> None:
    start = {"a/0": 0, "a/1": 0, "a/2": 0}
    latest = {"a/0": 900, "a/1": 90, "a/2": 1}
    end = rate_limit(start, latest, 100)
    assert end["a/0"] == 90 and end["a/1"] == 9 and end["a/2"] == 1
    assert rate_limit(start, latest, 10_000) == latest


def test_plan_splits_large_ranges() -> None:
    o = source_options({**BS, "subscribe": "t", "maxRecordsPerPartition": "100"}, streaming=False)
    parts = plan(o, {"t/0": 0, "t/1": 50}, {"t/0": 250, "t/1": 50})
    assert [(p.partition, p.start, p.end) for p in parts] == [(0, 0, 100), (0, 100, 200), (0, 200, 250)]
    o2 = source_options({**BS, "subscribe": "t", "minPartitions": "4"}, streaming=False)
    assert len(plan(o2, {"t/0": 0}, {"t/0": 100})) == 4


def test_wire_format_header() -> None:
    assert split_frame(b"\x00" + struct.pack(">I", 7) + b"avro") == (7, [], b"avro")
    assert split_frame(b"\x00" + struct.pack(">I", 3) + b"\x00pb", protobuf=True) == (3, [0], b"pb")
    # indexes [1, 2]: count 2, then 1 and 2, zigzag-encoded (2, 4, 6)
    assert split_frame(b"\x00" + struct.pack(">I", 3) + b"\x04\x02\x04pb", protobuf=True) == \
        (3, [1, 2], b"pb")
    with pytest.raises(FramingError):
        split_frame(b"\x01abcd")


def test_exactly_once_task_identity_has_no_defaults() -> None:
    from samsa.spark.transactional import SinkContextError, task_identity
    props = {"streaming.sql.batchId": "12", "sql.streaming.queryId": "q-1"}
    assert task_identity(props.get) == ("q-1", 12)
    for missing in props:
        with pytest.raises(SinkContextError, match=missing.replace(".", r"\.")):
            task_identity({k: v for k, v in props.items() if k != missing}.get)
    for bad_batch in ("", " ", "-1", "x"):
        with pytest.raises(SinkContextError, match="micro-batch id"):
            task_identity({**props, "streaming.sql.batchId": bad_batch}.get)
    with pytest.raises(SinkContextError, match="query id"):
        task_identity({**props, "sql.streaming.queryId": "  "}.get)
