"""Exactly-once with real clients: idempotent producers through dropped connections, transactions
(read_committed vs read_uncommitted, zombie fencing), a consume-transform-produce processor
killed with kill -9 again and again, and the broker killed during open transactions."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, IsolationLevel, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from samsa.testing import SamsaBroker, free_port

pytestmark = pytest.mark.timeout(300)
PROCESSOR = str(Path(__file__).with_name("eos_processor.py"))


@pytest.fixture(scope="module")
def broker() -> Iterator[SamsaBroker]:
    with SamsaBroker(overrides={"group.initial.rebalance.delay.ms": "0",
                                "transaction.abort.timed.out.transaction.cleanup.interval.ms":
                                    "500"}) as b:
        yield b


def create(bs: str, *topics: tuple[str, int]) -> None:
    admin = AdminClient({"bootstrap.servers": bs})
    for fut in admin.create_topics([NewTopic(t, n, 1) for t, n in topics]).values():
        fut.result(10)


def read(bs: str, topic: str, parts: int, iso: str) -> list[bytes]:
    """Every record a consumer with isolation level `iso` gets from the start of each partition up
    to the end the broker reports for that level (the LSO for read_committed, else the high
    watermark): done when every partition has signalled end-of-partition, so absence of a record
    is the broker's answer, not a quiet interval."""
    c = Consumer({"bootstrap.servers": bs, "group.id": "reader", "isolation.level": iso,
                  "enable.auto.commit": False, "enable.partition.eof": True})
    c.assign([TopicPartition(topic, p, 0) for p in range(parts)])
    out: list[bytes] = []
    at_end: set[int] = set()
    deadline = time.time() + 30
    while len(at_end) < parts and time.time() < deadline:
        for m in c.consume(1000, 0.3):
            if m.error() is not None and m.error().code() == KafkaError._PARTITION_EOF:
                at_end.add(m.partition())
                continue
            assert m.error() is None, m.error()
            at_end.discard(m.partition())
            out.append(m.value())
    c.close()
    assert len(at_end) == parts, f"{topic}: partitions {sorted(at_end)} of {parts} reached their end"
    return out


def stable_end(bs: str, topic: str, partition: int) -> int:
    """The partition's last stable offset: ListOffsets(latest) at isolation level read_committed."""
    admin = AdminClient({"bootstrap.servers": bs})
    tp = TopicPartition(topic, partition)
    res = admin.list_offsets({tp: OffsetSpec.latest()},
                             isolation_level=IsolationLevel.READ_COMMITTED)[tp].result(10)
    return int(res.offset)


def wait_stable_end(bs: str, topic: str, partition: int, expected: int, seconds: float = 30) -> None:
    """Poll (bounded) until the LSO is `expected`: a transaction timeout has to elapse first."""
    deadline = time.time() + seconds
    while (got := stable_end(bs, topic, partition)) != expected and time.time() < deadline:
        time.sleep(0.2)
    assert got == expected, f"{topic}-{partition}: LSO {got}, expected {expected}"


def test_committed_aborted_visibility_and_zombie_fencing(broker: SamsaBroker) -> None:
    bs = broker.bootstrap
    create(bs, ("vis", 2))
    p = Producer({"bootstrap.servers": bs, "transactional.id": "vis-tx"})
    p.init_transactions(10)
    p.begin_transaction()
    for i in range(20):
        p.produce("vis", value=b"c%d" % i, partition=i % 2)
    p.commit_transaction(10)
    p.begin_transaction()
    for i in range(7):
        p.produce("vis", value=b"a%d" % i, partition=i % 2)
    p.flush(10)
    p.abort_transaction(10)
    plain = Producer({"bootstrap.servers": bs})
    plain.produce("vis", value=b"plain", partition=0)
    plain.flush(10)
    committed = read(bs, "vis", 2, "read_committed")
    assert sorted(committed) == sorted([b"c%d" % i for i in range(20)] + [b"plain"])
    uncommitted = read(bs, "vis", 2, "read_uncommitted")
    assert sorted(uncommitted) == sorted(committed + [b"a%d" % i for i in range(7)])

    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP
    kc = KafkaConsumer(bootstrap_servers=bs, isolation_level="read_committed",
                       enable_auto_commit=False)
    kc.assign([KTP("vis", 0), KTP("vis", 1)])
    kc.seek_to_beginning()
    got: list[bytes] = []
    deadline = time.time() + 10
    while len(got) < 21 and time.time() < deadline:
        for msgs in kc.poll(500).values():
            got += [m.value for m in msgs]
    kc.close()
    assert sorted(got) == sorted(committed)

    # a second instance with the same transactional.id fences the first
    p2 = Producer({"bootstrap.servers": bs, "transactional.id": "vis-tx"})
    p2.init_transactions(10)
    with pytest.raises(KafkaException) as e:
        p.begin_transaction()
        p.produce("vis", value=b"zombie", partition=0)
        p.commit_transaction(10)
    err = e.value.args[0]
    assert err.fatal() and err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                          KafkaError.INVALID_PRODUCER_EPOCH), err
    assert b"zombie" not in read(bs, "vis", 2, "read_uncommitted")


def test_transaction_timeout_aborts_and_lso_advances(broker: SamsaBroker) -> None:
    bs = broker.bootstrap
    create(bs, ("tmo", 1))
    p = Producer({"bootstrap.servers": bs, "transactional.id": "tmo-tx",
                  "transaction.timeout.ms": 2000})
    p.init_transactions(10)
    p.begin_transaction()
    p.produce("tmo", value=b"left-open")
    p.flush(10)
    plain = Producer({"bootstrap.servers": bs})
    plain.produce("tmo", value=b"after")
    plain.flush(10)
    # the open transaction (offset 0) holds the LSO back: read_committed gets nothing, "after"
    # included, while read_uncommitted gets both
    assert stable_end(bs, "tmo", 0) == 0
    assert read(bs, "tmo", 1, "read_committed") == []
    assert read(bs, "tmo", 1, "read_uncommitted") == [b"left-open", b"after"]
    # past transaction.timeout.ms the coordinator aborts: the abort marker (offset 2) is written
    # and the LSO moves to the end
    wait_stable_end(bs, "tmo", 0, 3)
    assert read(bs, "tmo", 1, "read_committed") == [b"after"]


class DroppingProxy:
    """A TCP proxy that drops every connection after a random number of bytes: the client sees
    its broker connections die mid-request, as when a broker closes them."""

    def __init__(self, target_port: int, port: int) -> None:
        self.target_port = target_port
        self.port = port
        self.drops = 0
        self.dropping = True
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.server: asyncio.AbstractServer | None = None

    async def _pipe(self, r: asyncio.StreamReader, w: asyncio.StreamWriter, budget: list[int],
                    peers: list[asyncio.StreamWriter]) -> None:
        try:
            while True:
                data = await r.read(65536)
                if not data:
                    break
                budget[0] -= len(data)
                if budget[0] < 0 and self.dropping:
                    self.drops += 1
                    break
                w.write(data)
                await w.drain()
        except (ConnectionError, OSError):
            pass
        for p in peers:
            p.close()

    async def _handle(self, cr: asyncio.StreamReader, cw: asyncio.StreamWriter) -> None:
        try:
            br, bw = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            cw.close()
            return
        budget = [random.randint(150_000, 600_000)]
        await asyncio.gather(self._pipe(cr, bw, budget, [cw, bw]),
                             self._pipe(br, cw, [1 << 62], [cw, bw]))

    def start(self) -> None:
        self.thread.start()
        fut = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._handle, "127.0.0.1", self.port), self.loop)
        self.server = fut.result(10)

    def stop(self) -> None:
        if self.server is not None:
            self.loop.call_soon_threadsafe(self.server.close)
        self.loop.call_soon_threadsafe(self.loop.stop)


def test_idempotent_producer_through_dropped_connections() -> None:
    proxy_port = free_port()
    with SamsaBroker(overrides={"advertised.listeners":
                                f"PLAINTEXT://127.0.0.1:{proxy_port}"}) as b:
        proxy = DroppingProxy(b.port, proxy_port)
        proxy.start()
        try:
            create(f"127.0.0.1:{proxy_port}", ("idem", 3))
            p = Producer({"bootstrap.servers": f"127.0.0.1:{proxy_port}",
                          "enable.idempotence": True, "linger.ms": 5,
                          "batch.size": 32768, "message.timeout.ms": 120000,
                          "retry.backoff.ms": 50})
            n = 20000
            pad = b" " * 100
            failed: list[str] = []

            def on_delivery(err: object, _msg: object) -> None:
                if err is not None:
                    failed.append(str(err))

            for i in range(n):
                while True:
                    try:
                        p.produce("idem", value=b"%d" % i + pad, partition=i % 3,
                                  on_delivery=on_delivery)
                        break
                    except BufferError:
                        p.poll(0.05)
                p.poll(0)
            assert p.flush(120) == 0
            assert not failed, failed[:3]
            assert proxy.drops > 3, "the proxy did not drop connections: the test proved nothing"
            proxy.dropping = False
            c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "v",
                          "enable.auto.commit": False})
            for part in range(3):
                c.assign([TopicPartition("idem", part, 0)])
                vals: list[int] = []
                hi = c.get_watermark_offsets(TopicPartition("idem", part), timeout=10)[1]
                while len(vals) < hi:
                    vals += [int(m.value()) for m in c.consume(10000, 2) if m.error() is None]
                assert vals == list(range(part, n, 3)), f"duplicates or gaps in partition {part}"
            c.close()
        finally:
            proxy.stop()


def test_processor_killed_repeatedly_gives_exactly_once(broker: SamsaBroker,
                                                        tmp_path: Path) -> None:
    bs = broker.bootstrap
    create(bs, ("eos-in", 3), ("eos-out", 3))
    n = 3000
    p = Producer({"bootstrap.servers": bs, "linger.ms": 5})
    for i in range(n):
        p.produce("eos-in", key=b"%d" % i, value=b"%d" % i, partition=i % 3)
    assert p.flush(20) == 0
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    args = [sys.executable, PROCESSOR, bs, "eos-in", "eos-out", "eos-g", "eos-tx"]
    rnd = random.Random(7)
    err = open(tmp_path / "proc.err", "w")  # noqa: SIM115
    kills = 0
    admin = AdminClient({"bootstrap.servers": bs})

    def lag() -> int:
        offs = admin.list_consumer_group_offsets(
            [__import__("confluent_kafka").ConsumerGroupTopicPartitions("eos-g")])
        got = next(iter(offs.values())).result(10).topic_partitions
        return n - sum(max(tp.offset, 0) for tp in got)

    deadline = time.time() + 200
    while time.time() < deadline:
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=err, env=env)
        time.sleep(rnd.uniform(2.0, 4.0))
        if kills < 6:
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
            kills += 1
            continue
        while time.time() < deadline and lag() > 0:  # let the last incarnation finish
            time.sleep(0.5)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        break
    assert kills == 6 and lag() == 0
    out = read(bs, "eos-out", 3, "read_committed")
    assert len(out) == n, f"{len(out)} outputs for {n} inputs"
    assert sorted(out) == sorted(b"out:%d" % i for i in range(n))


def test_broker_kill9_during_open_transactions() -> None:
    with SamsaBroker(overrides={
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"}) as b:
        bs = b.bootstrap
        create(bs, ("bk", 2))
        done = Producer({"bootstrap.servers": bs, "transactional.id": "bk-done"})
        done.init_transactions(10)
        done.begin_transaction()
        done.produce("bk", value=b"committed", partition=0)
        done.commit_transaction(10)
        hang = Producer({"bootstrap.servers": bs, "transactional.id": "bk-open",
                         "transaction.timeout.ms": 3000})
        hang.init_transactions(10)
        hang.begin_transaction()
        hang.produce("bk", value=b"never-committed", partition=1)
        hang.flush(10)
        b.kill()
        b.start()
        # the open transaction is aborted once its timeout passes after the restart: data (0)
        # and abort marker (1), then the LSO is the end
        wait_stable_end(bs, "bk", 1, 2)
        plain = Producer({"bootstrap.servers": bs})
        plain.produce("bk", value=b"later", partition=1)
        plain.flush(10)
        assert stable_end(bs, "bk", 1) == 3
        assert sorted(read(bs, "bk", 2, "read_committed")) == [b"committed", b"later"]
