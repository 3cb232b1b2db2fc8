"""Back-pressure: clients that pipeline requests and never read their responses cost the broker a
bounded amount of memory, and well-behaved clients keep working next to them; malformed frames
that claim huge arrays close only their own connection."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.testing import SamsaBroker
from tests.wire import Wire

pytestmark = pytest.mark.timeout(180)

VALUE = b"v" * 8192
RECORDS = 600  # ~5 MB in one partition


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def fetch_frame(w: Wire, topic: str) -> bytes:
    """Fetch v12 (by topic name) of the whole partition from offset 0, up to 8 MiB."""
    return w.encode(1, 12, {
        "replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 50 * 1024 * 1024,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [{
            "partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
            "last_fetched_epoch": -1, "log_start_offset": -1,
            "partition_max_bytes": 8 * 1024 * 1024}]}],
        "forgotten_topics_data": [], "rack_id": ""})


def recv_frame(sock: socket.socket) -> bytes:
    """One response frame, read into a preallocated buffer (Wire.recv_frame is quadratic)."""
    head = bytearray(4)
    view = memoryview(head)
    got = 0
    while got < 4:
        n = sock.recv_into(view[got:])
        assert n, "connection closed"
        got += n
    size = int.from_bytes(head, "big")
    buf = bytearray(size)
    view = memoryview(buf)
    got = 0
    while got < size:
        n = sock.recv_into(view[got:])
        assert n, "connection closed"
        got += n
    return bytes(buf)


def roundtrip_ok(bootstrap: str, topic: str, n: int = 20) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 10000})
    for i in range(n):
        p.produce(topic, value=f"ok-{i}".encode(), partition=0)
    assert p.flush(10) == 0
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bp-check",
                  "enable.auto.commit": False})
    lo, hi = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    c.assign([TopicPartition(topic, 0, hi - n)])
    got: list[bytes] = []
    deadline = time.monotonic() + 10
    while len(got) < n and time.monotonic() < deadline:
        for m in c.consume(n, 1):
            assert m.error() is None, m.error()
            got.append(m.value())
    c.close()
    assert got == [f"ok-{i}".encode() for i in range(n)]


@pytest.fixture(scope="module")
def broker() -> SamsaBroker:
    with SamsaBroker() as b:
        a = AdminClient({"bootstrap.servers": b.bootstrap})
        a.create_topics([NewTopic("bp", 1, 1), NewTopic("bp-ok", 1, 1)])["bp"].result(10)
        p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 20})
        for _ in range(RECORDS):
            p.produce("bp", value=VALUE, partition=0)
        assert p.flush(30) == 0
        yield b


def test_non_reading_clients_hold_bounded_memory(broker: SamsaBroker) -> None:
    assert broker.proc is not None
    pid = broker.proc.pid
    roundtrip_ok(broker.bootstrap, "bp-ok")  # warm up every code path first
    base = rss_mb(pid)
    abusers: list[Wire] = []
    for _ in range(3):
        w = Wire(broker.bootstrap)
        w.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        # 64 pipelined fetches of ~5 MB each: 320 MB of responses per client if all were buffered
        w.send_raw(b"".join(fetch_frame(w, "bp") for _ in range(64)))
        abusers.append(w)
    peak = base
    deadline = time.monotonic() + 4
    while time.monotonic() < deadline:
        peak = max(peak, rss_mb(pid))
        time.sleep(0.1)
    # the broker still serves everyone else while the abusers sit there
    roundtrip_ok(broker.bootstrap, "bp-ok")
    peak = max(peak, rss_mb(pid))
    assert peak - base < 48, f"RSS grew {peak - base:.0f} MB with 3 non-reading clients"
    for w in abusers:
        w.close()
    # and it is given back once they leave (bounded wait)
    deadline = time.monotonic() + 10
    while rss_mb(pid) - base > 24 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert rss_mb(pid) - base <= 24
    roundtrip_ok(broker.bootstrap, "bp-ok")


def test_slow_reader_still_gets_every_response_in_order(broker: SamsaBroker) -> None:
    """Muting must not lose or reorder anything: a client that reads slowly gets all 16 pipelined
    responses, in order, each carrying the whole partition."""
    w = Wire(broker.bootstrap)
    first = w.corr + 1
    w.send_raw(b"".join(fetch_frame(w, "bp") for _ in range(16)))
    time.sleep(1)  # the broker is muted on this connection by now; then read it all
    for i in range(16):
        frame = recv_frame(w.sock)
        corr = int.from_bytes(frame[:4], "big", signed=True)
        assert corr == first + i
        assert len(frame) > RECORDS * len(VALUE)
    w.close()


def test_huge_array_count_closes_only_that_connection(broker: SamsaBroker) -> None:
    bystander = Wire(broker.bootstrap)
    w = Wire(broker.bootstrap)
    # the fuzzer's 23-byte Metadata v12 frame: compact topics count 0xFFFFFFFF
    w.send_raw(bytes.fromhex("000000130003000c000000010003726f6200ffffffff0f"))
    assert w.is_closed()
    assert broker.proc is not None and broker.proc.poll() is None
    resp = bystander.request(18, 3, {"client_software_name": "t", "client_software_version": "1"})
    assert int(resp.error_code) == 0
    roundtrip_ok(broker.bootstrap, "bp-ok")


def test_tiny_queued_max_requests_still_serves_groups_and_bursts() -> None:
    """queued.max.requests=1: every request beyond the first unanswered one waits to be read, yet
    nothing deadlocks: a 3-member consumer group (whose parked JoinGroups would otherwise hold the
    slot the others need) balances and consumes, and 50 pipelined commits all get answers."""
    import threading

    with SamsaBroker(overrides={"queued.max.requests": "1",
                                "group.initial.rebalance.delay.ms": "0"}) as b:
        a = AdminClient({"bootstrap.servers": b.bootstrap})
        a.create_topics([NewTopic("qmr", 3, 1)])["qmr"].result(10)
        p = Producer({"bootstrap.servers": b.bootstrap})
        for i in range(30):
            p.produce("qmr", value=str(i).encode(), partition=i % 3)
        assert p.flush(10) == 0
        seen: list[bytes] = []
        owned: list[set[int]] = []
        lock = threading.Lock()
        all_done = threading.Barrier(3, timeout=60)  # assignments are read before anyone leaves

        def member() -> None:
            c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "qmr-g",
                          "auto.offset.reset": "earliest", "session.timeout.ms": 6000})
            c.subscribe(["qmr"])
            deadline = time.monotonic() + 40
            while time.monotonic() < deadline and len(seen) < 30:
                m = c.poll(0.5)
                if m is not None and m.error() is None:
                    with lock:
                        seen.append(m.value())
            with lock:
                owned.append({tp.partition for tp in c.assignment()})
            all_done.wait()
            c.close()

        threads = [threading.Thread(target=member) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert sorted(int(v) for v in seen) == list(range(30))
        # no partition owned by two members at once (a member that lost its session under load
        # may own nothing, so the union is not asserted)
        assert sum(len(o) for o in owned) == len(set().union(*owned))
        # a burst of pipelined OffsetCommits (answered through the coordinator, asynchronously)
        w = Wire(b.bootstrap)
        first = w.corr + 1
        burst = b"".join(w.encode(8, 2, {
            "group_id": "burst", "generation_id_or_member_epoch": -1, "member_id": "",
            "retention_time_ms": -1,
            "topics": [{"name": "qmr", "partitions": [
                {"partition_index": 0, "committed_offset": i, "committed_metadata": ""}]}]})
            for i in range(50))
        w.send_raw(burst)
        for i in range(50):
            frame = w.recv_frame()
            assert int.from_bytes(frame[:4], "big", signed=True) == first + i
        w.close()
