"""Real clients through partition leader changes on a 3-broker cluster (issue 14): confluent-kafka,
kafka-python and kcat keep producing (idempotent, acks=all) and consuming while the leader is
killed with -9 or shut down in a controlled way; they report only retriable errors, every
acknowledged record is consumed exactly once. An idempotent producer's retry of a batch the old
leader acknowledged is recognised by the new leader (producer state rebuilt from the replicated
log): no duplicate, and a sequence gap still answers OUT_OF_ORDER_SEQUENCE_NUMBER."""

from __future__ import annotations

import collections
import logging
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from samsa.testing import SamsaCluster
from tests.cluster_util import wait_until
from tests.replication_util import (
    CLUSTER_OVERRIDES,
    RETRIABLE_CODES,
    bring_back,
    create_topic,
    move_leader,
    partition_view,
    wait_full_isr,
)
from tests.wire import Wire

# serial: under `make test`'s parallel workers a CPU-starved kafka-python producer once saw no
# acknowledgement for 90 s after a controlled shutdown; alone this file takes about a minute
pytestmark = [pytest.mark.timeout(420), pytest.mark.slow, pytest.mark.serial]

PRODUCE, INIT_PRODUCER_ID = 0, 22
OUT_OF_ORDER_SEQUENCE_NUMBER = 45


@pytest.fixture(scope="module")
def cluster() -> Iterator[SamsaCluster]:
    with SamsaCluster(3, overrides=CLUSTER_OVERRIDES) as c:
        c.wait_brokers(3)
        yield c


def wait_growth(what: str, count: Any, by: int, timeout: float = 90) -> None:
    """Until count() has grown by `by` from now: the clients make progress again."""
    start = count()
    wait_until(what, lambda: count() >= start + by, timeout)


def check_exactly_once(acked: list[bytes], consumed: list[bytes]) -> None:
    seen = collections.Counter(consumed)
    dups = {v: n for v, n in seen.items() if n > 1}
    assert not dups, f"consumed more than once: {list(dups.items())[:10]}"
    missing = [v for v in acked if v not in seen]
    assert not missing, f"{len(missing)} acknowledged records never consumed: {missing[:10]}"


# ---- confluent-kafka ---------------------------------------------------------------------------
class ConfluentRun:
    """An idempotent acks=all producer thread and an assign()ing consumer thread over a topic,
    recording every error the library hands to the application."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.bootstrap, self.topic, self.partitions = bootstrap, topic, partitions
        self.acked: list[bytes] = []
        self.consumed: list[bytes] = []
        self.delivery_errors: list[Any] = []
        self.client_errors: list[Any] = []  # error_cb of both clients
        self.consumer_errors: list[Any] = []  # msg.error() other than partition EOF
        self._stop_producing = threading.Event()
        self._stop_consuming = threading.Event()
        self._threads = [threading.Thread(target=self._produce, daemon=True),
                         threading.Thread(target=self._consume, daemon=True)]

    def start(self) -> ConfluentRun:
        for t in self._threads:
            t.start()
        return self

    def _produce(self) -> None:
        from confluent_kafka import Producer

        def report(err: Any, msg: Any) -> None:
            if err is None:
                self.acked.append(msg.value())
            else:
                self.delivery_errors.append(err)

        p = Producer({"bootstrap.servers": self.bootstrap, "acks": "all",
                      "enable.idempotence": True, "linger.ms": 5,
                      "message.timeout.ms": 120000, "error_cb": self.client_errors.append})
        i = 0
        while not self._stop_producing.is_set() and i < 50000:
            p.produce(self.topic, f"ck-{i}".encode(), partition=i % self.partitions,
                      on_delivery=report)
            p.poll(0.005)
            i += 1
        p.flush(120)

    def _consume(self) -> None:
        from confluent_kafka import Consumer, KafkaError, TopicPartition

        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "ck-failover-reader",
                      "enable.auto.commit": False, "error_cb": self.client_errors.append})
        c.assign([TopicPartition(self.topic, p, 0) for p in range(self.partitions)])
        while not self._stop_consuming.is_set():
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error() is None:
                self.consumed.append(m.value())
            elif m.error().code() != KafkaError._PARTITION_EOF:
                self.consumer_errors.append(m.error())
        c.close()

    def finish(self) -> None:
        self._stop_producing.set()
        self._threads[0].join(150)
        assert not self._threads[0].is_alive(), "the producer did not finish"
        acked = set(self.acked)
        wait_until("every acknowledged record consumed",
                   lambda: acked <= set(self.consumed), 90)
        self._stop_consuming.set()
        self._threads[1].join(30)


def assert_retriable_only(errors: list[Any]) -> None:
    """librdkafka's error_cb reports are informational unless fatal; broker error codes it passes
    on must be ones Kafka marks retriable."""
    for e in errors:
        assert not e.fatal(), f"fatal error: {e}"
        code = e.code()
        assert code < 0 or code in RETRIABLE_CODES, f"non-retriable error: {e}"


def test_confluent_kafka_through_kill_and_controlled_shutdown(cluster: SamsaCluster) -> None:
    topic = "ck-failover"
    create_topic(cluster, topic, 2)
    run = ConfluentRun(cluster.bootstrap, topic, 2).start()
    try:
        wait_growth("first acknowledgements", lambda: len(run.acked), 300)
        old, _ = move_leader(cluster, topic, 0, "kill")
        wait_growth("acknowledgements after kill -9 of the leader", lambda: len(run.acked), 300)
        wait_growth("consumption after kill -9 of the leader", lambda: len(run.consumed), 300)
        bring_back(cluster, old, [(topic, 0), (topic, 1)])
        old, _ = move_leader(cluster, topic, 1, "shutdown")
        wait_growth("acknowledgements after a controlled shutdown", lambda: len(run.acked), 300)
        wait_growth("consumption after a controlled shutdown", lambda: len(run.consumed), 300)
        bring_back(cluster, old, [(topic, 0), (topic, 1)])
    finally:
        run.finish()
    logging.getLogger(__name__).warning(
        "confluent-kafka reported: client %s, consumer %s",
        sorted({str(e) for e in run.client_errors}), sorted({str(e) for e in run.consumer_errors}))
    assert not run.delivery_errors, run.delivery_errors[:5]
    assert_retriable_only(run.client_errors)
    assert_retriable_only(run.consumer_errors)
    check_exactly_once(run.acked, run.consumed)


# ---- kafka-python ------------------------------------------------------------------------------
class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record.getMessage())


def test_kafka_python_through_controlled_shutdown_and_kill(cluster: SamsaCluster) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic = "kp-failover"
    create_topic(cluster, topic, 1)
    logs = _Collect()
    logging.getLogger("kafka").addHandler(logs)
    prod = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all",
                         enable_idempotence=True, linger_ms=5, delivery_timeout_ms=120000,
                         request_timeout_ms=10000, retry_backoff_ms=100)
    acked: list[bytes] = []
    failed: list[BaseException] = []
    consumed: list[bytes] = []
    raised: list[BaseException] = []
    stop = threading.Event()

    def consume() -> None:
        cons = KafkaConsumer(bootstrap_servers=cluster.bootstrap, enable_auto_commit=False,
                             auto_offset_reset="earliest", request_timeout_ms=10000)
        cons.assign([TopicPartition(topic, 0)])
        cons.seek(TopicPartition(topic, 0), 0)
        while not stop.is_set():
            try:
                for rs in cons.poll(timeout_ms=200).values():
                    consumed.extend(r.value for r in rs)
            except Exception as e:  # what kafka-python surfaces to the application
                raised.append(e)
                time.sleep(0.2)
        cons.close()

    reader = threading.Thread(target=consume, daemon=True)
    reader.start()
    i = 0

    def send(n: int) -> None:
        nonlocal i
        for _ in range(n):
            v = f"kp-{i}".encode()
            i += 1
            f = prod.send(topic, v, partition=0)
            f.add_callback(lambda _md, v=v: acked.append(v))
            f.add_errback(failed.append)
            time.sleep(0.003)

    try:
        send(300)
        for how in ("shutdown", "kill"):
            done = threading.Event()
            sender = threading.Thread(target=lambda d=done: [send(100) for _ in range(30)
                                                             if not d.is_set()], daemon=True)
            sender.start()
            old, _ = move_leader(cluster, topic, 0, how)
            wait_growth(f"kafka-python acknowledgements after {how}", lambda: len(acked), 200)
            done.set()
            sender.join(120)
            bring_back(cluster, old, [(topic, 0)])
        prod.flush(120)
        wait_until("every acknowledged record consumed", lambda: set(acked) <= set(consumed), 90)
    finally:
        stop.set()
        reader.join(30)
        prod.close(30)
        logging.getLogger("kafka").removeHandler(logs)
    logging.getLogger(__name__).warning("kafka-python reported: %s", logs.records[:40])
    assert not failed, failed[:5]
    assert not raised, raised[:5]
    check_exactly_once(acked, consumed)


# ---- kcat ------------------------------------------------------------------------------------
@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed")
def test_kcat_through_kill(cluster: SamsaCluster, tmp_path: Path) -> None:
    topic = "kcat-failover"
    create_topic(cluster, topic, 1)
    common = ["-b", cluster.bootstrap, "-t", topic, "-p", "0"]
    out_path = tmp_path / "consumed.txt"
    cerr = open(tmp_path / "consumer.err", "w")  # noqa: SIM115 - closed below
    consumer = subprocess.Popen(["kcat", "-C", *common, "-o", "beginning", "-u", "-f", "%s\n"],
                                stdout=open(out_path, "w"), stderr=cerr)  # noqa: SIM115
    producer = subprocess.Popen(["kcat", "-P", *common, "-X", "enable.idempotence=true",
                                 "-X", "acks=all", "-X", "message.timeout.ms=120000",
                                 "-X", "linger.ms=5"],
                                stdin=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert producer.stdin is not None
    sent: list[str] = []
    feeding = threading.Event()
    feeding.set()

    def feed() -> None:
        assert producer.stdin is not None
        n = 0
        while feeding.is_set() and n < 20000:
            line = f"kc-{n}"
            producer.stdin.write(line + "\n")
            producer.stdin.flush()
            sent.append(line)
            n += 1
            time.sleep(0.004)

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()

    def lines() -> list[str]:
        return out_path.read_text().split()

    try:
        wait_until("kcat consumed the first records", lambda: len(lines()) >= 200, 60)
        old, _ = move_leader(cluster, topic, 0, "kill")
        wait_growth("kcat consumption after kill -9 of the leader", lambda: len(lines()), 300)
        bring_back(cluster, old, [(topic, 0)])
        feeding.clear()
        feeder.join(30)
        _, perr = producer.communicate(timeout=150)
        assert producer.returncode == 0, perr
        want = set(sent)
        wait_until("kcat consumed every produced line", lambda: want <= set(lines()), 90)
    finally:
        feeding.clear()
        for proc in (producer, consumer):
            if proc.poll() is None:
                proc.terminate()
                proc.wait(10)
        cerr.close()
    consumer_err = (tmp_path / "consumer.err").read_text()
    logging.getLogger(__name__).warning("kcat producer stderr: %r consumer stderr: %r",
                                        perr[-2000:], consumer_err[-2000:])
    for text in (perr, consumer_err):
        assert "Delivery failed" not in text and "FATAL" not in text.upper(), text[-2000:]
    # every line kcat read was produced (its exit code 0 says every delivery succeeded)
    check_exactly_once(sent, lines())


# ---- idempotence: the new leader knows the producer's sequences ----------------------------------
def _produce_raw(c: SamsaCluster, topic: str, pid: int, seq: int, values: list[bytes],
                 timeout: float = 60) -> tuple[int, int]:
    """One idempotent batch (acks=all) to the partition's current leader: (error, base offset).
    Retriable answers and a leader that is gone are retried, as a producer does."""
    from samsa.protocol.records import encode_batch

    now = int(time.time() * 1000)
    batch = encode_batch([(None, v, [], now) for v in values], producer_id=pid,
                         producer_epoch=0, base_sequence=seq)
    body = {"transactional_id": None, "acks": -1, "timeout": 10000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            leader = partition_view(c, topic)["leader"]
            if leader >= 0:
                w = Wire(c.node(leader).bootstrap, timeout=15)
                try:
                    r = w.request(PRODUCE, 9, body).responses[0].partition_responses[0]
                finally:
                    w.close()
                if r.error_code not in RETRIABLE_CODES:
                    return int(r.error_code), int(r.base_offset)
                last = r.error_code
        except (OSError, ConnectionError, AssertionError) as e:
            last = e
        time.sleep(0.2)
    raise TimeoutError(f"produce seq {seq} not answered: {last}")


def test_idempotent_retry_after_leader_change_is_no_duplicate(cluster: SamsaCluster) -> None:
    topic = "idem-failover"
    create_topic(cluster, topic, 1)
    w = Wire(cluster.bootstrap.split(",")[0])
    try:
        init = w.request(INIT_PRODUCER_ID, 4, {"transactional_id": None, "transaction_timeout": 0,
                                               "producer_id": -1, "producer_epoch": -1})
    finally:
        w.close()
    assert init.error_code == 0
    pid = init.producer_id
    first = [f"i-{n}".encode() for n in range(5)]
    assert _produce_raw(cluster, topic, pid, 0, first) == (0, 0)
    err, base = _produce_raw(cluster, topic, pid, 5, [b"i-5", b"i-6"])
    assert (err, base) == (0, 5)
    wait_full_isr(cluster, topic)
    killed, _ = move_leader(cluster, topic, 0, "kill")
    # the retry of the last acknowledged batch: the new leader answers with its original offset
    assert _produce_raw(cluster, topic, pid, 5, [b"i-5", b"i-6"]) == (0, 5)
    # and an older one still in the producer's window too
    assert _produce_raw(cluster, topic, pid, 0, first) == (0, 0)
    # a gap is still refused: the new leader knows where the producer is
    assert _produce_raw(cluster, topic, pid, 9, [b"gap"])[0] == OUT_OF_ORDER_SEQUENCE_NUMBER
    assert _produce_raw(cluster, topic, pid, 7, [b"i-7"]) == (0, 7)
    bring_back(cluster, killed, [(topic, 0)])
    # again after a controlled shutdown, the leader being possibly the restarted node
    stopped, _ = move_leader(cluster, topic, 0, "shutdown")
    assert _produce_raw(cluster, topic, pid, 7, [b"i-7"]) == (0, 7)
    assert _produce_raw(cluster, topic, pid, 8, [b"i-8"]) == (0, 8)
    bring_back(cluster, stopped, [(topic, 0)])

    from confluent_kafka import Consumer, TopicPartition

    cons = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "idem-check",
                     "enable.auto.commit": False})
    cons.assign([TopicPartition(topic, 0, 0)])
    got: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + 30
    while len(got) < 9 and time.monotonic() < deadline:
        m = cons.poll(0.5)
        if m is not None and m.error() is None:
            got.append((m.offset(), m.value()))
    time.sleep(1)
    m = cons.poll(1)
    cons.close()
    assert m is None or m.error() is not None, f"more than the 9 records: {m.value()!r}"
    assert got == [(n, f"i-{n}".encode()) for n in range(9)]


# ---- long-lived clients that do not fetch: Spark's driver ------------------------------------------
def test_spark_driver_offsets_follow_a_leader_change(cluster: SamsaCluster) -> None:
    """samsa.spark asks partitions' earliest/latest offsets (ListOffsets) on the driver: after a
    kill -9 of the leader it finds the new leader instead of waiting out its 30 s timeout on the
    dead one (librdkafka sends the query to the leader its metadata last named), which failed a
    streaming query with _TIMED_OUT."""
    from confluent_kafka import Consumer, Producer

    from samsa.spark import offsets as off

    topic = "spark-marks"
    create_topic(cluster, topic, 1)
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(10):
        p.produce(topic, f"m-{i}".encode(), partition=0)
    assert p.flush(30) == 0
    c = Consumer(off.consumer_conf({"bootstrap.servers": cluster.bootstrap}))
    try:
        k = f"{topic}/0"
        assert off.watermarks(c, [k]) == {k: (0, 10)}
        old, _ = move_leader(cluster, topic, 0, "kill")
        assert off.watermarks(c, [k]) == {k: (0, 10)}
    finally:
        c.close()
    bring_back(cluster, old, [(topic, 0)])
