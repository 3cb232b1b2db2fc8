"""A Jepsen-style workload against a real cluster, and the checker that judges it afterwards.

While faults are injected, threads of real clients (confluent-kafka) record what the cluster told
them:
- `IdempotentProducers`: n idempotent acks=all producers writing unique values; each value ends
  acknowledged (delivery report with its offset), failed (with the error) or unknown.
- `Reader`: a consumer on assigned partitions from the start (read_committed), recording
  (topic, partition, offset, value, leader epoch) of everything it is given.
- `GroupCommitter`: a group member committing its position, recording every acknowledged commit
  and samples of what OffsetFetch answers.
- `TxnWriter`: a transactional producer committing and aborting transactions of known values.

`check()` then reads the healed cluster (a fresh read of every partition, both isolation levels;
each partition's segment files on every replica in its ISR) and returns a `Report`: every
acknowledged value present exactly once, ISR replicas byte-identical up to the high watermark,
reader offsets never going backwards, read_committed never showing an aborted value, committed
group offsets never regressing. Seeded (`seed`) so a failing run can be told apart and replayed.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

from samsa.cli._cluster_wire import Connection
from samsa.cli._common import CliError
from samsa.protocol.batch import LOG_OVERHEAD, read_header, read_prefix
from samsa.protocol.records import encode_batch

NOT_ENOUGH_REPLICAS = 19
NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20


CLIENT_LOG: Path | None = None  # set by a test: librdkafka's logs (with eos debug) go there


def _quiet_conf(debug: str = "") -> dict[str, Any]:
    """librdkafka's logs off the test's output: to CLIENT_LOG if set, else nowhere."""
    if CLIENT_LOG is None:
        return {"log_level": 3, "logger": _NullLogger()}
    logger = logging.getLogger(f"samsa.workload.clients.{CLIENT_LOG}")
    if not logger.handlers:
        handler = logging.FileHandler(CLIENT_LOG)
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)
        logger.propagate = False
    conf: dict[str, Any] = {"log_level": 7 if debug else 6, "logger": logger}
    if debug:
        conf["debug"] = debug
    return conf


class _NullLogger:
    """librdkafka logs every broker it cannot reach while faults run: keep test output readable."""

    def log(self, *args: Any, **kwargs: Any) -> None:
        return None

    def __getattr__(self, name: str) -> Any:
        return self.log


# ---- producers ----------------------------------------------------------------------------------
class IdempotentProducers:
    """`n` threads, each an idempotent acks=all producer writing values `<tag>-<i>-<seq>`."""

    def __init__(self, bootstrap: str, topic: str, n: int = 3, tag: str = "v",
                 rate_per_s: float = 200.0, max_in_flight: int = 500,
                 conf: dict[str, Any] | None = None) -> None:
        self.bootstrap, self.topic, self.n, self.tag = bootstrap, topic, n, tag
        self.rate_per_s = rate_per_s
        self.max_in_flight = max_in_flight
        self.conf = dict(conf or {})
        self.acked: dict[str, tuple[int, int]] = {}  # value -> (partition or -1, offset)
        self.failed: dict[str, str] = {}  # value -> error name
        self.sent: list[str] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.threads: list[threading.Thread] = []
        self.errors: list[str] = []

    def start(self) -> IdempotentProducers:
        for i in range(self.n):
            t = threading.Thread(target=self._run, args=(i,), name=f"producer-{i}", daemon=True)
            t.start()
            self.threads.append(t)
        return self

    def _on_delivery(self, err: KafkaError | None, msg: Any) -> None:
        value = msg.value().decode()
        with self.lock:
            if err is None:
                self.acked[value] = (msg.partition(), msg.offset())
            else:
                self.failed[value] = err.name()

    def _run(self, i: int) -> None:
        conf = {"bootstrap.servers": self.bootstrap, "enable.idempotence": True, "acks": "all",
                # 60 s: a producer stuck on a cut-off old leader gives up on those messages (and
                # refreshes its metadata) within the fault's liveness window. When messages time
                # out librdkafka bumps the producer epoch and re-sends batches that may have been
                # written (confluentinc/librdkafka#4953): the checker counts such cross-epoch
                # copies apart from duplicates within an epoch.
                # socket.timeout.ms 10 s (librdkafka: 60 s): a SIGSTOPped leader keeps its TCP
                # connections open, so in-flight Produce requests to it only fail at this
                # client-side timeout, and an idempotent producer cannot move a partition to the
                # new leader before they do. With the default, a frozen broker that led every
                # partition stalled all producers for the whole 60 s liveness window (soak seed
                # 20261124, fault 42) although the cluster had elected new leaders in seconds
                "linger.ms": 5, "message.timeout.ms": 60000, "socket.timeout.ms": 10000,
                "client.id": f"{self.tag}-{i}",
                **_quiet_conf("eos"), **self.conf}
        p = Producer(conf)
        seq = 0
        interval = self.n / self.rate_per_s
        try:
            while not self.stopping.is_set() and seq < 10_000_000:
                with self.lock:
                    in_flight = len(self.sent) - len(self.acked) - len(self.failed)
                if in_flight >= self.max_in_flight:
                    p.poll(0.05)
                    continue
                value = f"{self.tag}-{i}-{seq}"
                try:
                    p.produce(self.topic, value.encode(), on_delivery=self._on_delivery)
                except BufferError:
                    p.poll(0.1)
                    continue
                except KafkaException as e:
                    self.errors.append(f"{value}: {e}")
                    break
                seq += 1
                with self.lock:
                    self.sent.append(value)
                p.poll(interval)
            p.flush(90)
        finally:
            del p

    def acked_count(self) -> int:
        with self.lock:
            return len(self.acked)

    def wait_acked(self, more_than: int, timeout: float) -> bool:
        """Until more than `more_than` values are acknowledged (progress after a fault)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.acked_count() > more_than:
                return True
            time.sleep(0.05)
        return False

    def stop(self) -> None:
        self.stopping.set()
        for t in self.threads:
            t.join(120)

    def unknown(self) -> set[str]:
        with self.lock:
            return set(self.sent) - set(self.acked) - set(self.failed)


# ---- transactional writer -----------------------------------------------------------------------
class TxnWriter:
    """Transactions of 3 values each, committed or aborted at random (seeded); records which
    values were committed (commit_transaction returned), aborted (abort_transaction returned) and
    unknown (the outcome was not learned)."""

    def __init__(self, bootstrap: str, topic: str, seed: int = 0, tag: str = "t",
                 pause_s: float = 0.05, conf: dict[str, Any] | None = None) -> None:
        self.bootstrap, self.topic, self.tag, self.pause_s = bootstrap, topic, tag, pause_s
        self.rng = random.Random(seed)
        self.conf = dict(conf or {})
        self.committed: set[str] = set()
        self.aborted: set[str] = set()
        self.unknown: set[str] = set()
        self.outcomes: Counter[str] = Counter()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name="txn-writer", daemon=True)

    def start(self) -> TxnWriter:
        self.thread.start()
        return self

    def _producer(self) -> Producer:
        p = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": f"{self.tag}-txn",
                      "transaction.timeout.ms": 60000, "message.timeout.ms": 30000,
                      "socket.timeout.ms": 10000, **_quiet_conf(), **self.conf})
        p.init_transactions(60)
        return p

    def _run(self) -> None:
        p: Producer | None = None
        k = 0
        while not self.stopping.is_set() and k < 100_000:
            try:
                if p is None:
                    p = self._producer()
                values = [f"{self.tag}-{k}-{j}" for j in range(3)]
                k += 1
                commit = self.rng.random() < 0.6
                p.begin_transaction()
                for v in values:
                    p.produce(self.topic, v.encode())
                if commit:
                    self._finish(p, values, commit=True)
                else:
                    self._finish(p, values, commit=False)
            except KafkaException as e:
                self.outcomes[f"error {e.args[0].name()}"] += 1
                p = None  # a fresh producer (init_transactions fences and completes the old one)
                time.sleep(0.2)
            time.sleep(self.pause_s)

    def _finish(self, p: Producer, values: list[str], commit: bool) -> None:
        for attempt in range(5):
            try:
                if commit:
                    p.commit_transaction(30)
                    self.committed.update(values)
                    self.outcomes["committed"] += 1
                else:
                    p.abort_transaction(30)
                    self.aborted.update(values)
                    self.outcomes["aborted"] += 1
                return
            except KafkaException as e:
                err = e.args[0]
                if err.txn_requires_abort():
                    try:
                        p.abort_transaction(30)
                    except KafkaException:
                        self.unknown.update(values)
                        raise
                    self.aborted.update(values)
                    self.outcomes["aborted after error"] += 1
                    return
                if err.retriable() and attempt < 4:
                    continue
                self.unknown.update(values)
                raise

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(180)


# ---- readers ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Seen:
    topic: str
    partition: int
    offset: int
    value: str
    leader_epoch: int | None


def _seen(m: Any) -> Seen:
    return Seen(str(m.topic()), int(m.partition()), int(m.offset()),
                (m.value() or b"").decode(), m.leader_epoch())


class Reader:
    """A consumer on every partition of `topics` from the start (no group: nothing moves it but
    the cluster), recording what it is given in order."""

    def __init__(self, bootstrap: str, topics: dict[str, int], isolation: str = "read_committed",
                 tag: str = "reader") -> None:
        self.bootstrap, self.topics, self.isolation, self.tag = bootstrap, topics, isolation, tag
        self.seen: list[Seen] = []
        self.errors: Counter[str] = Counter()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name=tag, daemon=True)

    def start(self) -> Reader:
        self.thread.start()
        return self

    def _run(self) -> None:
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"{self.tag}-unused",
                      "enable.auto.commit": False, "isolation.level": self.isolation,
                      **_quiet_conf()})
        c.assign([TopicPartition(t, p, OFFSET_BEGINNING)
                  for t, n in self.topics.items() for p in range(n)])
        try:
            for _ in range(10_000_000):
                if self.stopping.is_set():
                    break
                for m in c.consume(500, 0.2):
                    err = m.error()
                    if err is not None:
                        self.errors[err.name()] += 1
                        continue
                    self.seen.append(_seen(m))
        finally:
            c.close()

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(60)


class GroupCommitter:
    """A group member of `group` on `topic`: consumes, commits its position synchronously every
    `every` records, and after each commit asks the coordinator (OffsetFetch) what is committed.
    Records each acknowledged commit and each answer, in order."""

    def __init__(self, bootstrap: str, topic: str, group: str = "fault-group",
                 every: int = 20) -> None:
        self.bootstrap, self.topic, self.group, self.every = bootstrap, topic, group, every
        # per partition: ("commit"|"fetch", offset, floor): floor = the highest offset
        # acknowledged before the OffsetFetch was sent
        self.events: dict[int, list[tuple[str, int, int]]] = defaultdict(list)
        self.commit_errors: Counter[str] = Counter()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name="group-committer", daemon=True)

    def start(self) -> GroupCommitter:
        self.thread.start()
        return self

    def _floor(self, partition: int) -> int:
        return max((o for kind, o, _ in self.events[partition] if kind == "commit"), default=-1)

    def _run(self) -> None:
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group,
                      "enable.auto.commit": False, "auto.offset.reset": "earliest",
                      "session.timeout.ms": 30000, **_quiet_conf()})
        c.subscribe([self.topic])
        n = 0
        try:
            for _ in range(10_000_000):
                if self.stopping.is_set():
                    break
                got = [m for m in c.consume(200, 0.2) if m.error() is None]
                n += len(got)
                if n < self.every:
                    continue
                n = 0
                try:
                    done = c.commit(asynchronous=False) or []
                except KafkaException as e:
                    self.commit_errors[e.args[0].name()] += 1
                    continue
                for tp in done:
                    if tp.error is None and tp.offset >= 0:
                        self.events[tp.partition].append(("commit", tp.offset, -1))
                parts = [TopicPartition(self.topic, tp.partition) for tp in done]
                floors = {tp.partition: self._floor(tp.partition) for tp in parts}
                try:
                    answers = c.committed(parts, timeout=10)
                except KafkaException as e:
                    self.commit_errors[f"fetch {e.args[0].name()}"] += 1
                    continue
                for tp in answers:
                    if tp.error is None and tp.offset >= 0:
                        self.events[tp.partition].append(("fetch", tp.offset,
                                                          floors[tp.partition]))
        finally:
            c.close()

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(60)


# ---- a raw producer pinned to one broker --------------------------------------------------------
def raw_produce(address: str, topic: str, partition: int, values: list[bytes], acks: int = -1,
                timeout_ms: int = 5000) -> tuple[int, int]:
    """One Produce v9 (a plain, non-idempotent batch) sent to `address` itself, whoever leads:
    (error code, base offset). A connection failure raises OSError."""
    host, _, port = address.rpartition(":")
    now = int(time.time() * 1000)
    batch = encode_batch([(None, v, [], now) for v in values])
    try:
        with Connection(host, int(port), timeout=timeout_ms / 1000 + 5) as conn:
            resp = conn.request(0, 9, {"transactional_id": None, "acks": acks,
                                       "timeout": timeout_ms, "topic_data": [
                                           {"name": topic, "partition_data": [
                                               {"index": partition, "records": batch}]}]})
    except CliError as e:
        raise OSError(str(e)) from None
    p = resp.responses[0].partition_responses[0]
    return int(p.error_code), int(p.base_offset)


@dataclass(frozen=True)
class PartitionInfo:
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


def partitions(address: str, topic: str, timeout: float = 5.0) -> dict[int, PartitionInfo]:
    """`topic`'s partitions as the broker at `address` sees them (Metadata v12)."""
    return metadata(address, topic, timeout)[1]


def metadata(address: str, topic: str, timeout: float = 5.0
             ) -> tuple[dict[int, str], dict[int, PartitionInfo]]:
    """(broker id -> host:port, `topic`'s partitions) as the broker at `address` sees them."""
    host, _, port = address.rpartition(":")
    try:
        with Connection(host, int(port), timeout=timeout) as conn:
            resp = conn.request(3, 12, {"topics": None, "allow_auto_topic_creation": False,
                                        "include_topic_authorized_operations": False})
    except CliError as e:
        raise OSError(str(e)) from None
    brokers = {int(b.node_id): f"{b.host}:{b.port}" for b in resp.brokers}
    for t in resp.topics:
        if t.name == topic and t.error_code == 0:
            return brokers, {
                int(p.partition_index): PartitionInfo(int(p.leader_id), int(p.leader_epoch),
                                                      tuple(p.replica_nodes), tuple(p.isr_nodes))
                for p in t.partitions}
    return brokers, {}


def high_watermark(address: str, topic: str, partition: int, timeout: float = 5.0) -> int:
    """ListOffsets(latest) at `address` (the leader): the partition's high watermark."""
    host, _, port = address.rpartition(":")
    try:
        with Connection(host, int(port), timeout=timeout) as conn:
            resp = conn.request(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
                {"name": topic, "partitions": [{"partition_index": partition,
                                                "current_leader_epoch": -1, "timestamp": -1}]}]})
    except CliError as e:
        raise OSError(str(e)) from None
    p = resp.topics[0].partitions[0]
    if p.error_code != 0:
        raise OSError(f"ListOffsets {topic}-{partition} at {address}: error {p.error_code}")
    return int(p.offset)


# ---- the checker --------------------------------------------------------------------------------
def read_all(bootstrap: str, topic: str, n_partitions: int, isolation: str,
             timeout: float = 120.0) -> list[Seen]:
    """Every record of `topic` from the start up to each partition's end (as of the call)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "checker-unused",
                  "enable.auto.commit": False, "isolation.level": isolation, **_quiet_conf()})
    try:
        deadline = time.monotonic() + timeout
        ends = {}
        for p in range(n_partitions):
            while True:
                try:
                    _, ends[p] = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
                    break
                except KafkaException:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.5)
        todo = {p for p, end in ends.items() if end > 0}
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in todo])
        out: list[Seen] = []
        while todo:
            if time.monotonic() > deadline:
                raise TimeoutError(f"read_all {topic}: partitions {sorted(todo)} not read to "
                                   f"{ {p: ends[p] for p in todo} } in {timeout}s")
            for m in c.consume(1000, 0.5):
                if m.error() is not None:
                    continue
                out.append(_seen(m))
            for tp in c.position([TopicPartition(topic, p) for p in list(todo)]):
                if tp.offset >= ends[tp.partition]:
                    todo.discard(tp.partition)
        return out
    finally:
        c.close()


def segment_batches(partition_dir: Path, upto: int) -> bytes:
    """The raw bytes of every batch with base offset < `upto` in the partition's segments, in
    order (a torn tail ends the scan)."""
    out = bytearray()
    for seg in sorted(partition_dir.glob("*.log"), key=lambda p: int(p.stem)):
        data = seg.read_bytes()
        pos = 0
        while pos + LOG_OVERHEAD <= len(data):
            base, length = read_prefix(data, pos)
            if length <= 0 or pos + LOG_OVERHEAD + length > len(data):
                break
            if base >= upto:
                return bytes(out)
            out += data[pos:pos + LOG_OVERHEAD + length]
            pos += LOG_OVERHEAD + length
    return bytes(out)


@dataclass
class Report:
    """What the checker found; `problems` is empty when every property held."""

    acknowledged: int = 0
    lost: int = 0
    duplicates: int = 0  # acknowledged values present more than once
    unacked_duplicates: int = 0  # values whose delivery failed, present more than once
    # acknowledged values the client re-sent under a bumped producer epoch (librdkafka#4953)
    epoch_bump_duplicates: int = 0
    moved: int = 0  # present, but not at the offset its delivery report gave
    failed: int = 0
    unknown: int = 0
    unknown_present: int = 0
    failed_present: int = 0
    not_enough_replicas_present: int = 0  # rejected before the append, yet in the log
    consumed: int = 0
    offset_regressions: int = 0
    txn_committed: int = 0
    txn_aborted: int = 0
    txn_unknown: int = 0
    txn_committed_lost: int = 0
    txn_duplicates: int = 0
    aborted_seen: int = 0
    group_events: int = 0
    group_regressions: int = 0
    partitions_compared: int = 0
    replica_mismatches: int = 0
    failed_by: dict[str, int] = field(default_factory=dict)  # delivery errors by name
    faults: Counter[str] = field(default_factory=Counter)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # observations that break no property

    @property
    def ok(self) -> bool:
        return not self.problems

    def problem(self, text: str) -> None:
        if len(self.problems) < 50:
            self.problems.append(text)

    def summary(self) -> str:
        counts = {k: v for k, v in self.__dict__.items()
                  if k not in ("problems", "faults", "notes")}
        lines = [" ".join(f"{k}={v}" for k, v in counts.items())]
        if self.faults:
            lines.append("faults: " + ", ".join(f"{k}={v}" for k, v in sorted(self.faults.items())))
        lines += [f"PROBLEM: {p}" for p in self.problems]
        lines += [f"note: {n}" for n in self.notes[:10]]
        return "\n".join(lines)


def batch_producer(partition_dir: Path, offset: int) -> tuple[int, int] | None:
    """(producer id, producer epoch) of the batch holding `offset` in a replica's segments."""
    for seg in sorted(partition_dir.glob("*.log"), key=lambda p: int(p.stem)):
        data = seg.read_bytes()
        pos = 0
        while pos + 61 <= len(data):
            h = read_header(data, pos)
            if h.size <= 0:
                break
            if h.base_offset <= offset <= h.last_offset:
                return h.producer_id, h.producer_epoch
            pos += h.size
    return None


def _epoch_bumped(copies: list[tuple[int, int]], topic: str,
                  log_dirs: dict[int, Path] | None) -> bool:
    """The copies of a value were written by one producer id under different producer epochs:
    librdkafka re-sent a batch that may have been written after bumping the epoch (it does so when
    messages time out, confluentinc/librdkafka#4953); a broker deduplicates within an epoch only,
    as Kafka's does. Judged from the first replica whose segments hold every copy."""
    for d in (log_dirs or {}).values():
        found = [batch_producer(d / f"{topic}-{p}", off) for p, off in copies]
        if all(f is not None for f in found):
            ids = {f[0] for f in found if f is not None}
            epochs = [f[1] for f in found if f is not None]
            return len(ids) == 1 and len(set(epochs)) == len(epochs)
    return False


def check_values(report: Report, producers: IdempotentProducers, final: list[Seen],
                 topic: str = "", log_dirs: dict[int, Path] | None = None) -> None:
    """Every acknowledged value present exactly once, at the offset it was acknowledged at; a
    value the client itself re-sent under a new producer epoch is counted apart (see
    `_epoch_bumped`), a duplicate within one producer epoch fails."""
    counts = Counter(s.value for s in final)
    where = {s.value: (s.partition, s.offset) for s in final}
    report.acknowledged = len(producers.acked)
    report.failed = len(producers.failed)
    unknown = producers.unknown()
    report.unknown = len(unknown)
    for value, (partition, offset) in producers.acked.items():
        if counts[value] == 0:
            report.lost += 1
            report.problem(f"acknowledged {value} at {partition}/{offset} is lost")
        elif partition >= 0 and where[value] != (partition, offset):
            report.moved += 1
            report.problem(f"acknowledged {value} at {partition}/{offset} is at "
                           f"{where[value][0]}/{where[value][1]}")
    copies: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for s in final:
        if counts[s.value] > 1:
            copies[s.value].append((s.partition, s.offset))
    for value, n in counts.items():
        if n > 1 and value in producers.acked and _epoch_bumped(copies[value], topic, log_dirs):
            report.epoch_bump_duplicates += n - 1
            report.notes.append(f"acknowledged {value} present {n} times at {copies[value]}, "
                                "each copy under another producer epoch (the client re-sent it "
                                "after an epoch bump)")
        elif n > 1 and value in producers.acked:
            report.duplicates += n - 1
            report.problem(f"acknowledged {value} (at {producers.acked[value]}) present {n} times "
                           f"at (partition, offset) {copies[value]}")
        elif n > 1 and value.startswith(producers.tag + "-"):
            # a write whose delivery failed (its outcome unknown) written twice: librdkafka
            # re-sends possibly persisted messages under a bumped producer epoch when messages
            # time out (KIP-360); reported, not one of the properties judged
            report.unacked_duplicates += n - 1
            report.notes.append(f"not acknowledged ({producers.failed.get(value, 'unknown')}) "
                                f"{value} present {n} times at {copies[value]}")
    report.failed_by = dict(Counter(producers.failed.values()))
    for value, err in producers.failed.items():
        if counts[value]:
            report.failed_present += 1
            if err == "NOT_ENOUGH_REPLICAS":
                report.not_enough_replicas_present += 1
                report.problem(f"{value} failed with NOT_ENOUGH_REPLICAS yet is in the log")
    report.unknown_present = sum(1 for v in unknown if counts[v])


def check_reader(report: Report, reader: Reader, aborted: set[str]) -> None:
    """Offsets per partition strictly increase; read_committed shows no aborted value."""
    last: dict[tuple[str, int], Seen] = {}
    report.consumed += len(reader.seen)
    for s in reader.seen:
        prev = last.get((s.topic, s.partition))
        if prev is not None and s.offset <= prev.offset:
            report.offset_regressions += 1
            report.problem(f"{reader.tag}: {s.topic}-{s.partition} offset {prev.offset} (epoch "
                           f"{prev.leader_epoch}) then {s.offset} (epoch {s.leader_epoch})")
        last[(s.topic, s.partition)] = s
        if reader.isolation == "read_committed" and s.value in aborted:
            report.aborted_seen += 1
            report.problem(f"{reader.tag}: aborted {s.value} seen at {s.topic}-{s.partition}/"
                           f"{s.offset}")


def check_txn(report: Report, txn: TxnWriter, committed_read: list[Seen]) -> None:
    """read_committed shows every committed value exactly once and no aborted one."""
    counts = Counter(s.value for s in committed_read)
    report.txn_committed = len(txn.committed)
    report.txn_aborted = len(txn.aborted)
    report.txn_unknown = len(txn.unknown)
    for v in txn.committed:
        if counts[v] == 0:
            report.txn_committed_lost += 1
            report.problem(f"committed {v} missing from a read_committed read")
        elif counts[v] > 1:
            report.txn_duplicates += counts[v] - 1
            report.problem(f"committed {v} read {counts[v]} times")
    for v in txn.aborted:
        if counts[v]:
            report.aborted_seen += 1
            report.problem(f"aborted {v} in a read_committed read")


def check_group(report: Report, committer: GroupCommitter) -> None:
    """Acknowledged commits never decrease; OffsetFetch never answers below what was
    acknowledged before it was asked."""
    for partition, events in committer.events.items():
        report.group_events += len(events)
        top = -1
        for kind, offset, floor in events:
            if kind == "commit":
                if offset < top:
                    report.group_regressions += 1
                    report.problem(f"group commit on partition {partition} went {top} -> "
                                   f"{offset} (the coordinator lost a commit)")
                top = max(top, offset)
            elif offset < floor:
                report.group_regressions += 1
                report.problem(f"OffsetFetch on partition {partition} answered {offset} after "
                               f"{floor} was acknowledged")


def check_replicas(report: Report, log_dirs: dict[int, Path], topic: str,
                   layout: dict[int, PartitionInfo], hws: dict[int, int]) -> None:
    """Per partition: the ISR replicas' segment bytes up to the high watermark are identical."""
    for partition, info in sorted(layout.items()):
        hw = hws[partition]
        images = {}
        for node in info.isr:
            images[node] = segment_batches(log_dirs[node] / f"{topic}-{partition}", hw)
        report.partitions_compared += 1
        first_node, first = next(iter(images.items()))
        for node, data in images.items():
            if data != first:
                report.replica_mismatches += 1
                at = next((i for i, (x, y) in enumerate(zip(data, first, strict=False)) if x != y),
                          min(len(data), len(first)))
                report.problem(f"{topic}-{partition}: replica {node} differs from replica "
                               f"{first_node} below HW {hw} (byte {at}; sizes {len(data)} vs "
                               f"{len(first)})")
        if info.isr and hw > 0 and not first:
            report.problem(f"{topic}-{partition}: HW {hw} but no batches on disk at {first_node}")


def cluster_layout(bootstraps: Iterable[str], topic: str, want_isr: int, timeout: float = 60.0
                   ) -> tuple[dict[int, PartitionInfo], dict[int, int], bool]:
    """Each partition's layout once every ISR holds `want_isr` replicas (after a heal the
    followers catch up), and each high watermark from its leader: (layout, HWs, True). After
    `timeout`, the last consistent layout with a leader everywhere and False; TimeoutError if
    there is none."""
    addresses = list(bootstraps)
    deadline = time.monotonic() + timeout
    last: object = None
    fallback: tuple[dict[int, PartitionInfo], dict[int, int]] | None = None
    while True:
        for address in addresses:
            try:
                brokers, layout = metadata(address, topic)
            except OSError as e:
                last = e
                continue
            if layout and all(i.leader >= 0 for i in layout.values()):
                try:
                    hws = {p: high_watermark(brokers[i.leader], topic, p)
                           for p, i in layout.items()}
                    again = partitions(address, topic)
                except (OSError, KeyError) as e:
                    last = e
                    continue
                if again == layout:  # no leader change while the HWs were read
                    if all(len(i.isr) >= want_isr for i in layout.values()):
                        return layout, hws, True
                    fallback = layout, hws
            last = layout
        if time.monotonic() > deadline:
            if fallback is not None:
                return fallback[0], fallback[1], False
            raise TimeoutError(f"{topic}: ISRs not full ({want_isr}) within {timeout}s: {last}")
        time.sleep(0.5)


def check(producers: IdempotentProducers, bootstrap: str, topic: str, n_partitions: int,
          readers: Iterable[Reader] = (), txn: TxnWriter | None = None,
          committer: GroupCommitter | None = None, log_dirs: dict[int, Path] | None = None,
          broker_addresses: list[str] | None = None, want_isr: int = 1,
          report: Report | None = None) -> Report:
    """Judge a finished workload on the healed cluster (see the module docstring)."""
    report = report or Report()
    try:
        final = read_all(bootstrap, topic, n_partitions, "read_uncommitted")
    except (TimeoutError, KafkaException) as e:
        report.problem(f"cannot read {topic} back, nothing judged of its values: {e}")
    else:
        check_values(report, producers, final, topic, log_dirs)
    aborted = txn.aborted if txn is not None else set()
    for reader in readers:
        check_reader(report, reader, aborted)
    if txn is not None:
        try:
            committed = read_all(bootstrap, txn.topic, n_partitions, "read_committed")
        except (TimeoutError, KafkaException) as e:
            report.problem(f"cannot read {txn.topic} back (read_committed): {e}")
        else:
            check_txn(report, txn, committed)
    if committer is not None:
        check_group(report, committer)
    if log_dirs is not None and broker_addresses is not None:
        for t in sorted({topic, *([txn.topic] if txn is not None else [])}):
            try:
                layout, hws, full = cluster_layout(broker_addresses, t, want_isr)
            except TimeoutError as e:
                report.problem(f"replicas of {t} not compared: {e}")
                continue
            if not full:
                report.problem(f"{t}: ISRs not back to {want_isr} replicas after the run: "
                               + "; ".join(f"{p}: {list(i.isr)}" for p, i in layout.items()))
            check_replicas(report, log_dirs, t, layout, hws)
    return report
