"""`samsa demo`: the main job. Start a single-node broker on the embedded default
(127.0.0.1:9092, data in ./samsa-data), create a topic, produce and consume ~1000 messages, explain
each step, and stop the broker cleanly."""

from __future__ import annotations

import argparse
import collections
import errno
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from ._common import (
    CliError,
    UsageError,
    base_config,
    describe_error,
    guarded,
    header_list,
    position,
)
from .consume import consumer_config
from .produce import producer_config

HOST = "127.0.0.1"
DEFAULT_PORT = 9092
DATA_DIR = "samsa-data"
TOPIC = "demo"
PARTITIONS = 3
STARTUP_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 20.0


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("demo", help="start a broker, produce and consume, explain, stop",
                       description="Start a single-node Samsa broker on 127.0.0.1:9092 (another "
                                   "free port if that one is busy) with its data in ./samsa-data, "
                                   f"create topic '{TOPIC}', produce messages, read them back, "
                                   "print what happened, and stop the broker cleanly.")
    p.add_argument("--messages", type=int, default=1000, metavar="N",
                   help="how many messages to produce (default: 1000)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT,
                   help=f"preferred port (default: {DEFAULT_PORT})")
    p.add_argument("--data-dir", default=DATA_DIR,
                   help=f"broker data directory (default: ./{DATA_DIR})")
    p.set_defaults(func=guarded("samsa demo", run))


def port_is_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the broker's listener does
        try:
            s.bind((HOST, port))
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                return False
            raise
    return True


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


class BrokerProcess:
    """`samsa serve` as a child process; its output is kept (last lines) to explain failures."""

    def __init__(self, port: int, data_dir: Path) -> None:
        self.port = port
        self.data_dir = data_dir
        self.argv = [sys.executable, "-m", "samsa.cli.main", "serve",
                     "--listeners", f"PLAINTEXT://{HOST}:{port}", "--log-dirs", str(data_dir)]
        self.proc: subprocess.Popen[str] | None = None
        self.output: collections.deque[str] = collections.deque(maxlen=40)
        self._ready = threading.Event()
        self._reader: threading.Thread | None = None

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            self.output.append(line.rstrip("\n"))
            if "broker listening on" in line:
                self._ready.set()

    def start(self) -> float:
        """Start and wait until it accepts connections; returns the seconds it took."""
        t0 = time.monotonic()
        # settings come from the command line only, not from the caller's SAMSA_* variables
        env = {k: v for k, v in os.environ.items() if not k.startswith("SAMSA_")}
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=env, text=True,
                                     errors="replace", start_new_session=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        deadline = t0 + STARTUP_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._ready.wait(0.05):
                return time.monotonic() - t0
            if self.proc.poll() is not None:
                self._reader.join(2)
                raise CliError(f"the broker exited with code {self.proc.returncode} while "
                               f"starting:\n{self.tail()}")
        self.kill()
        raise CliError(f"the broker did not start within {STARTUP_TIMEOUT_S:.0f} s:\n"
                       f"{self.tail()}")

    def tail(self) -> str:
        return "\n".join(f"    | {line}" for line in self.output) or "    (no output)"

    def stop(self) -> int:
        """SIGTERM and wait: the broker flushes its logs and writes its clean-shutdown marker."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.kill()
                raise CliError(f"the broker did not stop within {STOP_TIMEOUT_S:.0f} s after "
                               "SIGTERM and was killed") from None
        if self._reader is not None:
            self._reader.join(2)
        return int(self.proc.returncode)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


@dataclass
class Sent:
    key: str
    value: str
    headers: list[tuple[str, str | bytes | None]]


@dataclass
class Report:
    sent: dict[tuple[int, int], Sent] = field(default_factory=dict)  # (partition, offset) -> msg
    errors: list[str] = field(default_factory=list)


def _str(b: str | bytes | None) -> str:
    return b.decode("utf-8", errors="replace") if isinstance(b, bytes) else (b or "")


def _say(text: str = "") -> None:
    print(text, flush=True)


def _step(text: str) -> None:
    """A numbered step or its explanation, wrapped, continuation lines indented."""
    indent = " " * (len(text) - len(text.lstrip(" ")) or 3)
    _say(textwrap.fill(text.strip(), width=90, initial_indent=indent if text[0] == " " else "",
                       subsequent_indent=indent, break_on_hyphens=False))


def make_message(i: int, run_id: str) -> Sent:
    customer = f"customer-{(i * 7) % 40:02d}"
    value = (f'{{"order": {i}, "customer": "{customer}", "amount": {(i * 37) % 500 + 0.99:.2f}, '
             f'"run": "{run_id}"}}')
    return Sent(customer, value, [("source", b"samsa-demo"), ("seq", str(i).encode())])


def ensure_topic(admin: AdminClient) -> tuple[bool, int]:
    """Create the demo topic if needed; returns (created, partition count)."""
    md = admin.list_topics(timeout=10)
    if TOPIC in md.topics:
        return False, len(md.topics[TOPIC].partitions)
    try:
        admin.create_topics([NewTopic(TOPIC, PARTITIONS)], request_timeout=30)[TOPIC].result(35)
    except KafkaException as e:
        err = e.args[0] if e.args else None
        if not (isinstance(err, KafkaError) and err.code() == KafkaError.TOPIC_ALREADY_EXISTS):
            raise CliError(f"cannot create topic {TOPIC!r}: {describe_error(e)}") from None
    md = admin.list_topics(timeout=10)
    return True, len(md.topics[TOPIC].partitions)


def produce_all(bootstrap: str, n: int, run_id: str) -> Report:
    report = Report()

    def delivered(sent: Sent) -> Callable[[KafkaError | None, Message], None]:
        def cb(err: KafkaError | None, msg: Message) -> None:
            if err is not None:
                report.errors.append(err.str())
            else:
                report.sent[position(msg)] = sent
        return cb

    producer = Producer(producer_config(bootstrap))
    for i in range(n):
        m = make_message(i, run_id)
        while True:
            try:
                producer.produce(TOPIC, key=m.key, value=m.value, headers=m.headers,
                                 on_delivery=delivered(m))
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    left = producer.flush(40)
    if left:
        report.errors.append(f"{left} message(s) not acknowledged in time")
    return report


def consume_range(bootstrap: str, start: dict[int, int],
                  end: dict[int, int]) -> dict[tuple[int, int], Message]:
    """Read [start, end) of every partition with assign(): Samsa has no consumer groups yet."""
    consumer = Consumer(consumer_config(bootstrap))
    got: dict[tuple[int, int], Message] = {}
    todo = {p for p in start if end[p] > start[p]}
    consumer.assign([TopicPartition(TOPIC, p, start[p]) for p in sorted(todo)])
    deadline = time.monotonic() + 30
    try:
        while todo and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error() is not None:
                continue
            p, off = position(msg)
            if off < end[p]:
                got[(p, off)] = msg
            if off + 1 >= end[p]:
                todo.discard(p)
    finally:
        consumer.close()
    return got


def run(args: argparse.Namespace) -> int:
    if args.messages <= 0:
        raise UsageError("--messages must be positive")
    data_dir = Path(args.data_dir)
    port = args.port
    _step("Samsa demo: a single-node Kafka-compatible broker, a topic, "
          f"{args.messages} messages in and out.")
    _say()
    if not port_is_free(port):
        new = free_port()
        _step(f"Note: port {port} is busy (another broker running?), so this demo uses port {new}.")
        port = new
    broker = BrokerProcess(port, data_dir)
    fresh = not data_dir.exists()
    _step("1. Starting the broker as a child process:")
    _say(f"     samsa serve --listeners PLAINTEXT://{HOST}:{port} --log-dirs {data_dir}")
    try:
        took = broker.start()
        pid = broker.proc.pid if broker.proc else "?"
        _step(f"   Up at {broker.bootstrap} in {took:.1f} s (pid {pid}), "
              f"{'new data directory' if fresh else 'reusing the data directory'} {data_dir}/")
        ok = _walkthrough(broker.bootstrap, args.messages)
    except BaseException:
        broker.stop()
        raise
    _step("5. Stopping the broker with SIGTERM (a clean shutdown: logs flushed, clean marker "
          "written).")
    rc = broker.stop()
    if rc != 0:
        raise CliError(f"the broker exited with code {rc}:\n{broker.tail()}")
    _say("   Stopped cleanly.")
    _say()
    if not ok:
        raise CliError("the messages read back did not match what was produced (see above)")
    _say(f"Done. The data stays in {data_dir}/; to explore it yourself:")
    _say(f"  samsa serve --log-dirs {data_dir}            # broker on 127.0.0.1:9092")
    _say(f"  samsa topics describe {TOPIC}")
    _say(f"  samsa consume {TOPIC} --from-beginning --print-key --max-messages 5")
    _say(f"  echo 'hello' | samsa produce {TOPIC}")
    return 0


def _walkthrough(bootstrap: str, n: int) -> bool:
    admin = AdminClient(base_config(bootstrap))
    created, partitions = ensure_topic(admin)
    if created:
        _step(f"2. Created topic '{TOPIC}' with {partitions} partitions "
              "(a partition is an append-only log; offsets number its messages from 0).")
    else:
        _step(f"2. Topic '{TOPIC}' already exists from an earlier run ({partitions} partitions); "
              "new messages are appended after the old ones.")

    tps = [TopicPartition(TOPIC, p) for p in range(partitions)]
    probe = Consumer(consumer_config(bootstrap))
    try:
        before = {tp.partition: probe.get_watermark_offsets(tp, timeout=10)[1] for tp in tps}
    finally:
        probe.close()

    run_id = time.strftime("%Y%m%dT%H%M%S")
    _step(f"3. Producing {n} messages: keys customer-00..customer-39 (the key picks the "
          "partition, so one customer's orders stay in order), JSON values, and headers "
          "source=samsa-demo and seq=<n>.")
    t0 = time.monotonic()
    report = produce_all(bootstrap, n, run_id)
    if report.errors:
        raise CliError(f"{len(report.errors)} message(s) were not delivered: {report.errors[0]}")
    _step(f"   All {len(report.sent)} acknowledged by the broker (acks=all) in "
          f"{time.monotonic() - t0:.2f} s.")
    counts = collections.Counter(p for p, _ in report.sent)
    end = dict(before)
    for p, off in report.sent:
        end[p] = max(end[p], off + 1)
    for p in range(partitions):
        rng = f"offsets {before[p]}..{end[p] - 1}" if counts[p] else "no new offsets"
        _say(f"     partition {p}: {counts[p]:4d} messages, {rng}")

    _step("4. Consuming them back: assign() each partition at the offset it had before step 3 "
          "and read up to the new end.")
    t0 = time.monotonic()
    got = consume_range(bootstrap, before, end)
    _step(f"   Read {len(got)} messages in {time.monotonic() - t0:.2f} s.")
    problems = []
    for pos, sent in sorted(report.sent.items()):
        msg = got.get(pos)
        if msg is None:
            problems.append(f"missing {TOPIC}/{pos[0]}@{pos[1]}")
        elif (_str(msg.key()) != sent.key or _str(msg.value()) != sent.value
              or header_list(msg) != sent.headers):
            problems.append(f"different content at {TOPIC}/{pos[0]}@{pos[1]}")
    extra = set(got) - set(report.sent)
    if extra:
        problems.append(f"{len(extra)} unexpected message(s)")
    if problems:
        for line in problems[:10]:
            _say(f"   MISMATCH: {line}")
        return False
    _step("   Every key, value and header matches what was produced, in the same per-partition "
          "order.")
    _say("   A few of them (topic/partition@offset):")
    samples = [pos for pos in sorted(got) if pos[1] < before[pos[0]] + 2][:6]
    for p, off in samples:
        msg = got[(p, off)]
        hdrs = ", ".join(f"{k}={(v or b'').decode()}" for k, v in header_list(msg))
        _say(f"     {TOPIC}/{p}@{off}  key={_str(msg.key())}  value={_str(msg.value())}  "
             f"headers: {hdrs}")
    return True
