"""Shared pieces of the fuzz suite: the seed, the broker health check, raw connections.

Every group of abuse ends with `Health.check`: the broker process is alive, a well-behaved
confluent-kafka client still produces and consumes within 10 s, the broker's RSS is under the stated
bound (and back near its baseline once the abusers are gone), and the broker log holds no
"Traceback".
"""

from __future__ import annotations

import os
import random
import resource
import socket
import struct
import time
import uuid
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.testing import SamsaBroker

DEFAULT_SEED = 20261124

# Memory bounds (stated here and in docs/operations.md). The broker's RSS after start-up and one
# client round trip is its baseline (~70-90 MB for CPython + uvloop + kio + codecs).
RSS_ABUSE_BOUND_MB = 400  # absolute ceiling while any abuse runs (2,000 idle connections, non-readers)
RSS_RECOVERY_SLACK_MB = 96  # once the abusers left: at most baseline + this


def base_seed() -> int:
    """SAMSA_FUZZ_SEED=<int> replays a run; SAMSA_FUZZ_SEED=random picks a new seed; unset: fixed."""
    raw = os.environ.get("SAMSA_FUZZ_SEED", "")
    if raw == "random":
        return random.SystemRandom().randrange(1 << 31)
    return int(raw) if raw else DEFAULT_SEED


SEED = base_seed()


def rng_for(test_id: str) -> random.Random:
    """One generator per test, derived from the run's seed and the test id (tests stay independent
    of each other's order and number of draws)."""
    return random.Random(f"{SEED}:{test_id}")


def raise_nofile(want: int = 16384) -> int:
    """Raise this process's (and so the broker subprocess's) soft RLIMIT_NOFILE towards `want`."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = want if hard == resource.RLIM_INFINITY else min(want, hard)
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0  # the process is exiting: its death is reported by the liveness checks


def open_sockets(pid: int) -> int:
    """Socket descriptors the process holds (files come and go with topics: not counted)."""
    n = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            n += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
        except OSError:
            pass
    return n


HEALTH_TOPIC = "fuzz-health"
DATA_TOPIC = "fuzz-data"


def start_broker() -> SamsaBroker:
    raise_nofile()
    b = SamsaBroker(overrides={"group.initial.rebalance.delay.ms": "0"}).start()
    a = AdminClient({"bootstrap.servers": b.bootstrap})
    for t in a.create_topics([NewTopic(HEALTH_TOPIC, 1, 1), NewTopic(DATA_TOPIC, 1, 1)]).values():
        t.result(15)
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5})
    for i in range(200):
        p.produce(DATA_TOPIC, key=str(i).encode(), value=os.urandom(4000))
    assert p.flush(15) == 0
    return b


class Health:
    """Per-broker health checks; remembers the baseline RSS taken after the first check."""

    def __init__(self, broker: SamsaBroker) -> None:
        self.broker = broker
        self.baseline_mb: float | None = None
        self.checks = 0
        self.log_mark = 0  # log offset where the current test began

    @property
    def pid(self) -> int:
        assert self.broker.proc is not None
        return self.broker.proc.pid

    def alive(self, label: str) -> None:
        proc = self.broker.proc
        assert proc is not None and proc.poll() is None, \
            f"[{label}] broker died (exit {proc and proc.returncode}); seed {SEED}\n" \
            f"{self.broker.log_text()[-3000:]}"

    def no_traceback(self, label: str) -> None:
        """No Traceback in the broker log since the current test began (each test answers for
        its own; together they cover the whole log)."""
        text = self.broker.log_text()[self.log_mark :]
        if "Traceback" in text:
            i = text.index("Traceback")
            raise AssertionError(f"[{label}] broker log has a Traceback; seed {SEED}:\n"
                                 f"{text[max(0, i - 400) : i + 2500]}")

    def client_round_trip(self, label: str) -> None:
        """A real client produces one record and reads it back, each step within 10 s."""
        token = uuid.uuid4().hex.encode()
        conf = {"bootstrap.servers": self.broker.bootstrap, "socket.timeout.ms": 10000,
                "message.timeout.ms": 10000}
        p = Producer(conf)
        got: list[int] = []
        p.produce(HEALTH_TOPIC, value=token,
                  on_delivery=lambda err, msg: got.append(-1 if err else msg.offset()))
        left = p.flush(10)
        assert left == 0 and got and got[0] >= 0, f"[{label}] produce failed within 10 s ({got})"
        c = Consumer({"bootstrap.servers": self.broker.bootstrap, "socket.timeout.ms": 10000,
                      "group.id": "fuzz-health", "enable.auto.commit": False})
        try:
            c.assign([TopicPartition(HEALTH_TOPIC, 0, got[0])])
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                m = c.poll(0.5)
                if m is not None and m.error() is None:
                    assert m.value() == token, f"[{label}] read back a different record"
                    return
            raise AssertionError(f"[{label}] consumer did not read the record back within 10 s")
        finally:
            c.close()

    def check(self, label: str, *, recovered: bool = True) -> float:
        """All checks; `recovered` also requires RSS back within the slack above baseline.
        Returns the RSS in MB."""
        self.alive(label)
        self.client_round_trip(label)
        self.alive(label)
        rss = rss_mb(self.pid)
        if self.baseline_mb is None:
            self.baseline_mb = rss
        assert rss < RSS_ABUSE_BOUND_MB, f"[{label}] broker RSS {rss:.0f} MB >= {RSS_ABUSE_BOUND_MB}"
        if recovered:
            limit = self.baseline_mb + RSS_RECOVERY_SLACK_MB
            # memory freed by Python is handed back lazily: give it a moment
            deadline = time.monotonic() + 10
            while rss > limit and time.monotonic() < deadline:
                time.sleep(0.5)
                rss = rss_mb(self.pid)
            assert rss <= limit, (f"[{label}] broker RSS {rss:.0f} MB did not come back under "
                                  f"baseline {self.baseline_mb:.0f} + {RSS_RECOVERY_SLACK_MB} MB")
        self.no_traceback(label)
        self.checks += 1
        return rss


# ---- raw frames ------------------------------------------------------------------------------

def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def connect(bootstrap: str, timeout: float = 5.0) -> socket.socket:
    host, port = bootstrap.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def read_answer(s: socket.socket, timeout: float) -> bytes | None:
    """The next response frame, None when the broker closed the connection; raises TimeoutError
    when neither happened within timeout."""
    s.settimeout(timeout)
    buf = b""
    try:
        while len(buf) < 4:
            chunk = s.recv(4 - len(buf))
            if not chunk:
                return None
            buf += chunk
        (n,) = struct.unpack(">i", buf)
        body = b""
        while len(body) < n:
            chunk = s.recv(min(n - len(body), 1 << 20))
            if not chunk:
                return None
            body += chunk
        return body
    except (ConnectionResetError, BrokenPipeError):
        return None


def outcome(s: socket.socket, timeout: float) -> str:
    """'answered', 'closed' or 'silent' for a request just sent on s."""
    try:
        return "closed" if read_answer(s, timeout) is None else "answered"
    except TimeoutError:
        return "silent"
    except OSError:
        return "closed"


def encode_request(key: int, version: int, body: dict[str, Any], *, correlation_id: int = 1,
                   client_id: str | None = "fuzz") -> bytes:
    """A valid request frame (length prefix included), built with kio."""
    from kio.index import load_request_schema
    from kio.serial import entity_writer

    from samsa.protocol.codec import Chunks, build

    req_cls = load_request_schema(key, version)
    hdr_cls = req_cls.__header_schema__
    out = Chunks()
    entity_writer(hdr_cls)(out, build(hdr_cls, {
        "request_api_key": key, "request_api_version": version,
        "correlation_id": correlation_id, "client_id": client_id}))
    entity_writer(req_cls)(out, build(req_cls, body))
    return frame(b"".join(out))


def api_versions_request(correlation_id: int = 1, version: int = 3) -> bytes:
    return encode_request(18, version, {"client_software_name": "fuzz",
                                        "client_software_version": "1"},
                          correlation_id=correlation_id)


def metadata_request(topic: str, correlation_id: int = 1, version: int = 12) -> bytes:
    return encode_request(3, version, {"topics": [{"name": topic}],
                                       "allow_auto_topic_creation": False},
                          correlation_id=correlation_id)


def fetch_request(topic: str, correlation_id: int = 1, max_bytes: int = 1 << 20,
                  version: int = 11) -> bytes:
    return encode_request(1, version, {
        "replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": max_bytes,
        "isolation_level": 0,
        "topics": [{"topic": topic, "partitions": [
            {"partition": 0, "fetch_offset": 0, "partition_max_bytes": max_bytes}]}]},
        correlation_id=correlation_id)


def produce_request(topic: str, records: bytes, correlation_id: int = 1, version: int = 9,
                    acks: int = -1) -> bytes:
    return encode_request(0, version, {
        "transactional_id": None, "acks": acks, "timeout": 5000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}]},
        correlation_id=correlation_id)


def correlation_of(answer: bytes) -> int:
    return int(struct.unpack_from(">i", answer, 0)[0])
