"""Quota throttling with real clients: a producer limited to 1 MiB/s (client-id quota) is held
near it over >= 10 s with throttle times reported, while an unlimited producer beside it keeps its
own pace; consumer_byte_rate throttles fetches; request_percentage throttles any request.

The broker runs with quota.window.num=2 (1 s samples): with Kafka's default of 11 a new client
may first burst 10 s worth of its quota (Kafka's Rate never divides by less than num - 1
samples), which a 12 s measurement would mostly see."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.testing import SamsaBroker
from tests.wire import Wire

ALTER, METADATA = 49, 3
QUOTA = 1024 * 1024  # producer_byte_rate of client id "limited"
CONSUMER_QUOTA = 256 * 1024
RECORD = b"r" * 1024

pytestmark = pytest.mark.serial  # rates measured: nothing else on the machine's cores meanwhile


@pytest.fixture(scope="module")
def broker() -> Iterator[SamsaBroker]:
    with SamsaBroker(overrides={"quota.window.num": "2"}) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        for f in admin.create_topics([NewTopic(t, 1, 1) for t in ("limited", "free", "fetched")]
                                     ).values():
            f.result(30)
        w = Wire(b.bootstrap)
        resp = w.request(ALTER, 1, {"entries": [
            {"entity": [{"entity_type": "client-id", "entity_name": "limited"}],
             "ops": [{"key": "producer_byte_rate", "value": QUOTA, "remove": False}]},
            {"entity": [{"entity_type": "client-id", "entity_name": "slow-reader"}],
             "ops": [{"key": "consumer_byte_rate", "value": CONSUMER_QUOTA, "remove": False}]},
            {"entity": [{"entity_type": "client-id", "entity_name": "chatty"}],
             "ops": [{"key": "request_percentage", "value": 0.5, "remove": False}]},
        ], "validate_only": False})
        w.close()
        assert [int(e.error_code) for e in resp.entries] == [0, 0, 0]
        yield b


class Run:
    """A producer (or consumer) and what it saw: (monotonic time, bytes) per delivered record
    and the largest throttle time librdkafka's statistics reported."""

    def __init__(self) -> None:
        self.events: list[tuple[float, int]] = []
        self.throttle_max = 0
        self.started = self.finished = 0.0

    def stats(self, text: str) -> None:
        for b in json.loads(text).get("brokers", {}).values():
            self.throttle_max = max(self.throttle_max, int(b.get("throttle", {}).get("max", 0)))

    def rate(self, start: float, end: float) -> float:
        """Bytes/s delivered within [start, end)."""
        return sum(n for t, n in self.events if start <= t < end) / (end - start)

    def overall(self) -> float:
        """Bytes/s from the first produce call until everything was delivered."""
        return sum(n for _, n in self.events) / (self.finished - self.started)


def produce_for(bootstrap: str, client_id: str, topic: str, seconds: float,
                stop: threading.Event | None = None) -> Run:
    run = Run()

    def delivered(err: Any, msg: Any) -> None:
        if err is None:
            run.events.append((time.monotonic(), len(msg.value())))

    p = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "linger.ms": 5,
                  "queue.buffering.max.kbytes": 1024, "statistics.interval.ms": 500,
                  "stats_cb": run.stats, "acks": 1})
    run.started = time.monotonic()
    deadline = run.started + seconds
    while time.monotonic() < deadline and not (stop is not None and stop.is_set()):
        try:
            p.produce(topic, RECORD, on_delivery=delivered)
        except BufferError:
            p.poll(0.01)
        else:
            p.poll(0)
    p.flush(30)
    run.finished = time.monotonic()
    p.poll(0.6)  # one more statistics report
    return run


def test_producer_held_near_quota_and_unlimited_one_not_slowed(broker: SamsaBroker) -> None:
    free_alone = produce_for(broker.bootstrap, "free", "free", 2.0)
    assert free_alone.throttle_max == 0

    out: dict[str, Run] = {}
    t0 = time.monotonic()
    th = threading.Thread(target=lambda: out.setdefault(
        "limited", produce_for(broker.bootstrap, "limited", "limited", 14.0)))
    th.start()
    time.sleep(4.0)
    free_beside = produce_for(broker.bootstrap, "free", "free", 3.0)
    th.join(60)
    limited = out["limited"]
    # its own pace alone, before and after (the lower one: the shared machine's load varies)
    alone_rate = min(free_alone.overall(),
                     produce_for(broker.bootstrap, "free", "free", 2.0).overall())

    # the limited producer over 12 s of steady state (after its first 2 s)
    rate = limited.rate(t0 + 2.0, t0 + 14.0)
    beside_rate = free_beside.overall()
    print(f"limited: {rate / QUOTA:.3f} x quota, throttle max {limited.throttle_max} ms; "
          f"free: alone {alone_rate / 1e6:.1f} MB/s, beside {beside_rate / 1e6:.1f} MB/s")
    assert 0.8 * QUOTA <= rate <= 1.2 * QUOTA, f"{rate / QUOTA:.2f} x quota"
    assert limited.throttle_max > 0  # the broker's throttle_time_ms reached the client
    # without the quota it would have gone far faster: the free producer did, beside it
    assert free_beside.throttle_max == 0
    assert beside_rate > 3 * QUOTA
    assert beside_rate >= 0.5 * alone_rate, (beside_rate, alone_rate)


def test_consumer_byte_rate_throttles_fetches(broker: SamsaBroker) -> None:
    # small batches: a Fetch answers at least one whole batch, and one larger than the quota's
    # window (quota x (quota.window.num - 1) x 1 s) would be refused forever, as in Kafka
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "batch.size": 16384})
    total = 3 * 1024 * 1024
    for _ in range(total // len(RECORD)):
        while True:
            try:
                p.produce("fetched", RECORD)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(30) == 0

    def consume(client_id: str, seconds: float) -> Run:
        run = Run()
        c = Consumer({"bootstrap.servers": broker.bootstrap, "client.id": client_id,
                      "group.id": f"g-{client_id}", "auto.offset.reset": "earliest",
                      "statistics.interval.ms": 500, "stats_cb": run.stats,
                      "enable.auto.commit": False})
        c.assign([TopicPartition("fetched", 0, 0)])  # no group join to wait for
        got = 0
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and got < total:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                got += len(m.value())
                run.events.append((time.monotonic(), len(m.value())))
        c.poll(0.6)
        c.close()
        return run

    fast = consume("fast-reader", 30.0)
    assert sum(n for _, n in fast.events) == total and fast.throttle_max == 0
    fast_rate = fast.rate(fast.events[0][0], fast.events[-1][0] + 1e-3)
    slow = consume("slow-reader", 6.0)
    start = slow.events[0][0]
    slow_rate = slow.rate(start, start + 5.0)
    assert slow_rate <= 1.5 * CONSUMER_QUOTA, f"{slow_rate / CONSUMER_QUOTA:.2f} x quota"
    assert slow.throttle_max > 0
    assert fast_rate > 3 * CONSUMER_QUOTA


def test_request_percentage_throttles_requests(broker: SamsaBroker) -> None:
    """request_percentage=0.5 (5 ms of handler time per second): Metadata requests in a row soon
    answer with throttle_time_ms, at most one sample (1 s), as Kafka caps it."""
    w = Wire(broker.bootstrap)
    w.corr = 0
    throttles = []
    try:
        import struct

        from kio.index import load_request_schema, load_response_schema
        from kio.serial import entity_reader, entity_writer

        from samsa.protocol.codec import Chunks, build

        req_cls = load_request_schema(METADATA, 12)
        resp_cls = load_response_schema(METADATA, 12)
        for i in range(200):
            out = Chunks()
            entity_writer(req_cls.__header_schema__)(out, build(req_cls.__header_schema__, {
                "request_api_key": METADATA, "request_api_version": 12, "correlation_id": i,
                "client_id": "chatty"}))
            entity_writer(req_cls)(out, build(req_cls, {"topics": None,
                                                        "allow_auto_topic_creation": False}))
            payload = b"".join(out)
            w.send_raw(struct.pack(">i", len(payload)) + payload)
            frame = w.recv_frame()
            _, n = entity_reader(resp_cls.__header_schema__)(frame, 0)
            resp, _ = entity_reader(resp_cls)(frame, n)
            ms = int(resp.throttle_time.total_seconds() * 1000)
            throttles.append(ms)
            if ms:
                break
    finally:
        w.close()
    assert throttles[-1] > 0, "no Metadata answer was throttled"
    assert throttles[-1] <= 1000
