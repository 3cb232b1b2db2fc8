"""Client worker processes for the throughput cells of bench/run.py.

One Python process running confluent-kafka tops out near 1M msg/s of 100 B (the per-message work
of the Python binding), so with a single client both brokers would be measured at the client's
limit. The pool keeps N long-lived worker processes (spawned once, each with its own librdkafka
client per task) and starts their tasks together, so a cell's load comes from N clients, as a
broker sees in production.

Producers use produce_batch (chunks of 1,000 messages, round-robin over partitions) with
delivery.report.only.error, so the Python side does no per-message callback; delivery is still
checked: every error is reported and flush() must leave nothing queued. Consumers each read every
partition from offset 0 (N independent readers of the same data, like N consumer groups) and
check every message's error flag and the payload byte count.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import random
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

from common import QUIET

CHUNK = 1_000
TASK_TIMEOUT = 180.0   # one task (produce or consume share), flush included
STALL_TIMEOUT = 20.0   # consumer: no progress for this long -> give up


@dataclass(frozen=True)
class Task:
    kind: str            # "produce" | "consume"
    bootstrap: str
    topic: str
    partitions: int
    size: int
    count: int           # produce: messages this worker sends; consume: messages to read
    acks: str = "1"
    compression: str = "none"
    worker: int = 0


@dataclass
class Outcome:
    """A task's result: finish time on the shared monotonic clock, or an error."""
    finished: float = 0.0
    messages: int = 0
    payload_bytes: int = 0
    error: str | None = None


_WORDS = ("kafka samsa tansu broker topic partition offset record batch producer consumer fetch "
          "produce commit leader replica segment index log append flush ack latency throughput "
          "order event stream key value header timestamp").split()


def payloads(size: int, count: int = 256, seed: int = 7) -> list[bytes]:
    """Text-like values (lz4 compresses them roughly 2-3x, unlike b'x' * size)."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        parts = [f'{{"id": {i}, "body": "']
        n = len(parts[0])
        while n < size:
            w = rng.choice(_WORDS) + (str(rng.randrange(10_000)) if rng.random() < 0.3 else "")
            parts.append(w + " ")
            n += len(w) + 1
        out.append("".join(parts).encode()[:size])
    return out


def _produce(task: Task, go: Connection) -> Outcome:
    from confluent_kafka import Producer

    values = payloads(task.size)
    errors: list[str] = []

    def on_error(err: Any, _msg: Any) -> None:
        if err is not None and len(errors) < 5:
            errors.append(str(err))

    p = Producer({"bootstrap.servers": task.bootstrap, "acks": task.acks,
                  "compression.type": task.compression, "linger.ms": 5,
                  "enable.idempotence": False, "delivery.report.only.error": True,
                  "queue.buffering.max.messages": 1_000_000, **QUIET})
    p.list_topics(topic=task.topic, timeout=10)  # connect + metadata before the start signal
    chunks = [[{"value": values[(j * CHUNK + i) % len(values)]} for i in range(CHUNK)]
              for j in range(8)]
    go.send("ready")
    go.recv()  # start
    deadline = time.monotonic() + TASK_TIMEOUT
    sent = 0
    j = 0
    while sent < task.count and not errors:
        n = min(CHUNK, task.count - sent)
        batch = chunks[j % len(chunks)][:n]
        part = (j + task.worker) % task.partitions
        while batch:
            queued = p.produce_batch(task.topic, batch, partition=part, on_delivery=on_error)
            sent += queued
            if queued == len(batch):
                break
            # Queue full: retry the messages produce_batch marked as not queued.
            batch = [m for m in batch if m.pop("_error", None) is not None]
            p.poll(0.005)
            if time.monotonic() > deadline:
                return Outcome(error=f"produce: {sent}/{task.count} queued after "
                                     f"{TASK_TIMEOUT:.0f}s")
        p.poll(0)
        j += 1
    left = p.flush(max(1.0, deadline - time.monotonic()))
    done = time.monotonic()
    if errors:
        return Outcome(error=f"delivery errors: {'; '.join(errors)}")
    if left:
        return Outcome(error=f"produce: {left} messages undelivered after {TASK_TIMEOUT:.0f}s")
    return Outcome(done, sent, sent * task.size)


def _consume(task: Task, go: Connection) -> Outcome:
    from confluent_kafka import Consumer, TopicPartition

    # fetch.queue.backoff.ms: librdkafka >= 2.1 pauses a partition whose local queue is over
    # queued.min.messages and then waits this long (default 1000 ms) before fetching again; a
    # Python loop drains slower than librdkafka fetches, so the default measures that backoff.
    c = Consumer({"bootstrap.servers": task.bootstrap, "group.id": "samsa-bench",
                  "enable.auto.commit": False, "enable.auto.offset.store": False,
                  "enable.partition.eof": False, "fetch.queue.backoff.ms": 10, **QUIET})
    try:
        c.assign([TopicPartition(task.topic, p, 0) for p in range(task.partitions)])
        go.send("ready")
        go.recv()
        deadline = time.monotonic() + TASK_TIMEOUT
        last_progress = time.monotonic()
        n = 0
        nbytes = 0
        while n < task.count:
            now = time.monotonic()
            if now > deadline or now - last_progress > STALL_TIMEOUT:
                why = "timeout" if now > deadline else f"stalled {STALL_TIMEOUT:.0f}s"
                return Outcome(error=f"consume {why}: {n}/{task.count} messages read")
            # Never ask for more than what is left: a batch consume waits out its timeout
            # when fewer messages than requested arrive.
            msgs = c.consume(num_messages=min(10_000, task.count - n), timeout=0.5)
            if not msgs:
                continue
            for m in msgs:
                if m.error() is not None:
                    return Outcome(error=f"consume error after {n} messages: {m.error()}")
            nbytes += sum(map(len, msgs))
            n += len(msgs)
            last_progress = time.monotonic()
        done = time.monotonic()
        if nbytes != task.count * task.size:
            return Outcome(error=f"consume: read {nbytes} payload bytes, "
                                 f"expected {task.count * task.size}")
        return Outcome(done, n, nbytes)
    finally:
        c.close()


def worker_main(conn: Connection) -> None:
    """Serve tasks until told to stop ("stop" or a closed pipe)."""
    while True:
        try:
            task = conn.recv()
        except EOFError:
            return
        if task == "stop":
            return
        try:
            out = _produce(task, conn) if task.kind == "produce" else _consume(task, conn)
        except Exception as e:  # noqa: BLE001 - reported to the driver
            out = Outcome(error=f"{type(e).__name__}: {e}")
        conn.send(out)


class ClientPool:
    """N worker processes; run() gives each a task, starts them together and returns the elapsed
    seconds from the start signal to the last worker's finish, with every worker's outcome."""

    def __init__(self, size: int) -> None:
        ctx = multiprocessing.get_context("spawn")  # no fork after librdkafka threads exist
        self.conns: list[Connection] = []
        self.procs: list[BaseProcess] = []
        for i in range(size):
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=worker_main, args=(child,), name=f"bench-client-{i}",
                               daemon=True)
            proc.start()
            child.close()
            self.conns.append(parent)
            self.procs.append(proc)

    @property
    def size(self) -> int:
        return len(self.conns)

    def _recv(self, conn: Connection, timeout: float) -> Any:
        if not conn.poll(timeout):
            raise TimeoutError("bench client worker did not answer")
        return conn.recv()

    def run(self, tasks: list[Task]) -> tuple[float, list[Outcome]]:
        assert len(tasks) == len(self.conns)
        for conn, task in zip(self.conns, tasks, strict=True):
            conn.send(task)
        early: dict[int, Outcome] = {}
        for i, conn in enumerate(self.conns):
            msg = self._recv(conn, 60)
            if isinstance(msg, Outcome):  # failed before it was ready
                early[i] = msg
        start = time.monotonic()
        for i, conn in enumerate(self.conns):
            if i not in early:
                conn.send("go")
        outcomes = [early[i] if i in early else self._recv(conn, TASK_TIMEOUT + 30)
                    for i, conn in enumerate(self.conns)]
        finished = [o.finished for o in outcomes if o.error is None]
        return (max(finished) - start if finished else 0.0), outcomes

    def close(self) -> None:
        for conn in self.conns:
            try:
                conn.send("stop")
            except OSError:
                pass
        for proc in self.procs:
            proc.join(10)
            if proc.is_alive():
                proc.kill()
