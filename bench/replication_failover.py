"""Partition failover time (issue 14): `kill -9` of a partition leader, and controlled shutdown
(SIGTERM) of one, to the first acknowledged write on the new leader; p50/p99 over many rounds.

    .venv/bin/python bench/replication_failover.py [--kills 50] [--shutdowns 50]
                                                   [--session-timeout-ms 9000] [--out FILE]

Cluster: samsa.testing.SamsaCluster, node 1 a dedicated controller (so killing a partition
leader never kills the active controller too), nodes 2-4 brokers; defaults except
broker.session.timeout.ms (--session-timeout-ms; Kafka's default 9000) and, with
--heartbeat-ms, broker.heartbeat.interval.ms (default 2000). One topic, 1 partition, RF=3,
min.insync.replicas=2.

A producer thread (confluent-kafka, acks=all, enable.idempotence=true, linger.ms=0, every other
setting at librdkafka's default) writes one 1 KiB record every 2 ms for the whole run and
records, per record, when produce() was called and when its delivery report arrived (offset or
error). Each round:
1. wait until the partition has a leader L, its full ISR (3) and the producer is being acked;
2. t0 = just before the signal: SIGKILL (`kill` rounds) or SIGTERM (`shutdown` rounds: the broker
   asks the controller to move its leaderships away, then exits) to L;
3. measure from t0 (same monotonic clock):
   - elected: the new leader's node log line "leader at epoch E" (wall-clock timestamps of the
     log, against the wall clock read at t0; ms resolution). That line also gives the log end
     offset X at which the new leader's epoch starts;
   - metadata: a raw Metadata poll (every 5 ms) of a surviving broker first names a new leader;
   - **failover**: the first delivery report received after the new leader's "leader at epoch"
     line, i.e. the first write acknowledged by the new leader (the issue's measure): the old
     leader acknowledges nothing after that (killed, or it stopped leading in the same metadata
     update, failing its pending acks=all waits). Often that write is a batch the old leader
     took but never acknowledged, retried by the idempotent client and answered by the new
     leader as a duplicate (an offset below X);
   - own offset: the first delivery report of an offset >= X (a record the new leader appended);
   - first ack of a record produced after t0 (on either leader; after a kill the same as
     failover give or take one record);
   - the longest gap between consecutive delivery reports around t0 (write unavailability);
4. restart L and wait until it is back in the ISR (timed: "rejoin").
Delivery errors are counted (with idempotence and infinite retries there should be none).
"""

from __future__ import annotations

import argparse
import bisect
import datetime as dt
import logging
import re
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cluster_common import (  # noqa: E402
    METADATA,
    METADATA_VERSION,
    Link,
    cell,
    load_line,
    percentile,
    run_header,
    write_report,
)
from confluent_kafka import KafkaError, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from samsa.cli import _cluster_wire as w  # noqa: E402
from samsa.protocol.records import encode_batch  # noqa: E402
from samsa.testing import SamsaCluster  # noqa: E402

TOPIC = "failover"
PRODUCE, PRODUCE_VERSION = 0, 9
INTERVAL = 0.002
ROUND_TIMEOUT = 60.0
LEADER_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) INFO samsa\.replication: "
                         + TOPIC + r"-0: leader at epoch (\d+) \(ISR \[[^\]]*\], log end (\d+),")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


@dataclass
class Acks:
    """Delivery reports in arrival order (monotonic time, offset, produce() time)."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    times: list[float] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)
    sent: list[float] = field(default_factory=list)
    errors: list[tuple[float, str]] = field(default_factory=list)


class ClientLog(logging.Handler):
    """librdkafka's debug lines with this process's monotonic time (--client-debug)."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self.out = open(path, "w")  # noqa: SIM115 - closed at exit

    def emit(self, record: logging.LogRecord) -> None:
        self.out.write(f"{time.monotonic():.4f} {record.getMessage()}\n")


class Writer(threading.Thread):
    def __init__(self, bootstrap: str, debug_path: str | None = None) -> None:
        super().__init__(name="failover-producer", daemon=True)
        self.acks = Acks()
        self.stop = threading.Event()
        extra: dict[str, object] = {"log_level": 0}
        if debug_path:
            logger = logging.getLogger("rdkafka")
            logger.addHandler(ClientLog(debug_path))
            logger.setLevel(logging.DEBUG)
            extra = {"debug": "broker,topic,metadata,msg,eos", "logger": logger,
                     "log_level": 7}
        self.p = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                           "enable.idempotence": True, "linger.ms": 0,
                           "error_cb": lambda e: None, **extra})

    def _on_delivery(self, err: KafkaError | None, msg: object, sent: float) -> None:
        now = time.monotonic()
        with self.acks.lock:
            if err is not None:
                self.acks.errors.append((now, str(err)))
            else:
                self.acks.times.append(now)
                self.acks.offsets.append(msg.offset())  # type: ignore[attr-defined]
                self.acks.sent.append(sent)

    def run(self) -> None:
        pad = b"x" * 1016
        next_at = time.monotonic()
        while not self.stop.is_set():
            sent = time.monotonic()
            try:
                self.p.produce(TOPIC, sent.hex().encode()[:8] + pad, partition=0,
                               on_delivery=lambda e, m, s=sent: self._on_delivery(e, m, s))
            except BufferError:
                pass
            next_at += INTERVAL
            self.p.poll(max(0.0, next_at - time.monotonic()))
        self.p.flush(30)


def partition_state(link: Link) -> tuple[int, int, list[int]]:
    """(leader, leader epoch, ISR) of TOPIC-0 from a raw Metadata request."""
    resp = link.request(METADATA, METADATA_VERSION, {
        "topics": [{"name": TOPIC}], "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False})
    p = resp.topics[0].partitions[0]
    return int(p.leader_id), int(p.leader_epoch), sorted(int(b) for b in p.isr_nodes)


def state_via(cluster: SamsaCluster, links: dict[int, Link],
              skip: int = -1) -> tuple[int, int, list[int]] | None:
    for node in cluster.brokers:
        if node.node_id == skip or not node.running:
            continue
        try:
            return partition_state(links[node.node_id])
        except (w.CliError, IndexError, AttributeError):
            continue
    return None


def wait_ready(cluster: SamsaCluster, links: dict[int, Link], writer: Writer,
               timeout: float = ROUND_TIMEOUT) -> tuple[int, int]:
    """Until TOPIC-0 has a leader, all 3 brokers in its ISR and fresh acknowledgements."""
    deadline = time.monotonic() + timeout
    while True:
        st = state_via(cluster, links)
        with writer.acks.lock:
            last = writer.acks.times[-1] if writer.acks.times else 0.0
        if st is not None and st[0] >= 0 and len(st[2]) == 3 and time.monotonic() - last < 0.1:
            return st[0], st[1]
        if time.monotonic() > deadline:
            raise TimeoutError(f"partition not ready: {st}")
        time.sleep(0.02)


def leader_line(node_log: Path, epoch_min: int, after_wall: float) -> tuple[float, int, int] | None:
    """(wall time, epoch, log end) of the first 'leader at epoch E' line with E > epoch_min
    logged after `after_wall`."""
    try:
        text = node_log.read_text(errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        m = LEADER_LINE.match(line)
        if not m or int(m.group(2)) <= epoch_min:
            continue
        when = dt.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
        if when >= after_wall - 0.002:
            return when, int(m.group(2)), int(m.group(3))
    return None


def probe_writes(survivors: list[str], ids: list[int], old: int, old_epoch: int, t0: float,
                 out: dict[str, float | int], stop: threading.Event) -> None:
    """A client without librdkafka's timers: every 5 ms, raw Metadata from a survivor; once it
    names a new leader (epoch > old), a raw acks=all Produce of one record to that leader, until
    one is acknowledged without error ("raw": Samsa's own failover time)."""
    meta = {i: Link(a, timeout=1.0) for i, a in zip(ids, survivors, strict=True)}
    prod = {i: Link(a, timeout=6.0) for i, a in zip(ids, survivors, strict=True)}
    attempts = 0
    try:
        while not stop.is_set() and time.monotonic() - t0 < ROUND_TIMEOUT:
            for lk in meta.values():
                try:
                    leader, epoch, _ = partition_state(lk)
                except (w.CliError, IndexError, AttributeError):
                    continue
                if leader == old or leader not in prod or epoch <= old_epoch:
                    break
                batch = encode_batch([(None, b"probe", [], int(time.time() * 1000))])
                attempts += 1
                try:
                    resp = prod[leader].request(PRODUCE, PRODUCE_VERSION, {
                        "transactional_id": None, "acks": -1,
                        "timeout": dt.timedelta(seconds=5),
                        "topic_data": [{"name": TOPIC, "partition_data": [
                            {"index": 0, "records": batch}]}]})
                    code = int(resp.responses[0].partition_responses[0].error_code)
                except (w.CliError, IndexError, AttributeError):
                    code = -1
                if code == 0:
                    out["raw"] = (time.monotonic() - t0) * 1000
                    out["raw_attempts"] = attempts
                    return
                break
            time.sleep(0.005)
    finally:
        for lk in [*meta.values(), *prod.values()]:
            lk.close()


def one_round(cluster: SamsaCluster, links: dict[int, Link], writer: Writer, kind: str,
              i: int) -> dict[str, float | int | str]:
    leader, epoch = wait_ready(cluster, links, writer)
    node = cluster.node(leader)
    survivors = [n for n in cluster.brokers if n.node_id != leader]
    with writer.acks.lock:
        n_err0 = len(writer.acks.errors)
    t0 = time.monotonic()
    wall0 = time.time()
    row: dict[str, float | int | str] = {"round": i, "kind": kind, "old": leader,
                                         "old_epoch": epoch, "t0": t0}
    meta: dict[str, float | int] = {}
    stop = threading.Event()

    def poll_metadata() -> None:
        poll_links = [Link(n.bootstrap, timeout=1.0) for n in survivors]
        try:
            while not stop.is_set() and time.monotonic() - t0 < ROUND_TIMEOUT:
                for lk in poll_links:
                    try:
                        new, new_epoch, _ = partition_state(lk)
                    except (w.CliError, IndexError, AttributeError):
                        continue
                    if new >= 0 and new != leader and new_epoch > epoch:
                        meta["metadata"] = (time.monotonic() - t0) * 1000
                        meta["leader"], meta["epoch"] = new, new_epoch
                        return
                time.sleep(0.005)
        finally:
            for lk in poll_links:
                lk.close()

    poller = threading.Thread(target=poll_metadata, daemon=True)
    raw: dict[str, float | int] = {}
    prober = threading.Thread(target=probe_writes, daemon=True, args=(
        [n.bootstrap for n in survivors], [n.node_id for n in survivors], leader, epoch, t0, raw,
        stop))
    poller.start()
    prober.start()
    if kind == "kill":
        node.kill()
    else:
        node.stop()  # SIGTERM; returns once the process exited (controlled shutdown inside)
    row["exited"] = (time.monotonic() - t0) * 1000
    poller.join(ROUND_TIMEOUT)
    prober.join(ROUND_TIMEOUT)
    stop.set()
    row.update(raw)
    if "leader" not in meta:
        row["error"] = "no new leader in metadata"
        node.start()
        return row
    row.update(meta)
    new = int(meta["leader"])
    line = None
    deadline = time.monotonic() + 10
    while line is None and time.monotonic() < deadline:
        line = leader_line(cluster.node(new).log_path, epoch, wall0)
        if line is None:
            time.sleep(0.05)
    first_offset = -1
    if line is not None:
        row["elected"] = (line[0] - wall0) * 1000
        row["elected_wall"] = line[0]
        first_offset = line[2]
        row["epoch_start"] = first_offset
    # the first delivery report after the new leader took over (its log line); and the first of
    # an offset the new leader itself assigned (>= its epoch start)
    elected_at = t0 + float(row["elected"]) / 1000 if "elected" in row else None
    deadline = time.monotonic() + ROUND_TIMEOUT
    while time.monotonic() < deadline:
        with writer.acks.lock:
            k = bisect.bisect_right(writer.acks.times, t0)
            times = writer.acks.times[k:]
            offsets = writer.acks.offsets[k:]
            sents = writer.acks.sent[k:]
            prev = writer.acks.times[k - 1] if k else t0
        first = None if elected_at is None else next(
            (j for j, t in enumerate(times) if t > elected_at), None)
        own = next((j for j, o in enumerate(offsets) if first_offset >= 0 and o >= first_offset),
                   None)
        after = next((j for j, s in enumerate(sents) if s > t0), None)
        if first is not None and own is not None and after is not None:
            row["failover"] = (times[first] - t0) * 1000
            row["after_elected"] = (times[first] - elected_at) * 1000  # type: ignore[operator]
            row["own_offset"] = (times[own] - t0) * 1000
            row["sent_after"] = (times[after] - t0) * 1000
            row["retried_first"] = int(offsets[first] < first_offset)
            gaps = [b - a for a, b in zip([prev, *times], times, strict=False)]
            row["gap"] = max(gaps) * 1000 if gaps else 0.0
            break
        time.sleep(0.01)
    else:
        row["error"] = f"no acknowledged write on the new leader in {ROUND_TIMEOUT:.0f} s"
    with writer.acks.lock:
        errs = writer.acks.errors[n_err0:]
    row["delivery_errors"] = len(errs)
    if errs:
        row["error"] = (str(row.get("error", "")) + " " + errs[0][1])[:200]
    t1 = time.monotonic()
    node.start()
    try:
        wait_ready(cluster, links, writer)
        row["rejoin"] = (time.monotonic() - t1) * 1000
    except TimeoutError as e:
        row["error"] = (str(row.get("error", "")) + f" rejoin: {e}")[:200]
    return row


def table(rows: list[dict[str, float | int | str]], kind: str) -> list[str]:
    sel = [r for r in rows if r["kind"] == kind]

    def col(key: str) -> list[float]:
        return [float(r[key]) for r in sel if isinstance(r.get(key), (int, float))]

    out = ["| ms from the signal | p50 | p99 | max | min | rounds without it |",
           "|---|---:|---:|---:|---:|---:|"]
    for key, label in (("exited", "process exited"),
                       ("elected", "new leader leads (its log line)"),
                       ("metadata", "a surviving broker's Metadata names the new leader"),
                       ("failover", "**first write acknowledged by the new leader**"),
                       ("after_elected", "↳ of which: new leader leads → that first ack"),
                       ("own_offset", "first ack of an offset the new leader assigned"),
                       ("raw", "**raw client (5 ms polling): first acks=all Produce acknowledged "
                               "by the new leader**"),
                       ("sent_after", "first ack of a record produced after the signal"),
                       ("gap", "longest gap between delivery reports"),
                       ("rejoin", "restart → back in the ISR (from the restart)")):
        v = col(key)
        if v:
            out.append(f"| {label} | {percentile(v, 50):.0f} | {percentile(v, 99):.0f} | "
                       f"{max(v):.0f} | {min(v):.0f} | {len(sel) - len(v)} |")
        else:
            out.append(f"| {label} | – | – | – | – | {len(sel)} |")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=50)
    ap.add_argument("--shutdowns", type=int, default=50)
    ap.add_argument("--session-timeout-ms", type=int, default=9000)
    ap.add_argument("--heartbeat-ms", type=int, default=2000)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" /
                                         "replication-failover-latest.md"))
    ap.add_argument("--client-debug", default=None, metavar="FILE",
                    help="librdkafka debug log (broker,topic,metadata,msg,eos) with monotonic "
                         "times; the round lines of the report carry t0 on the same clock")
    ap.add_argument("--data-dir", default=None,
                    help="keep the cluster's data and node logs here (default: a temp dir)")
    args = ap.parse_args()
    # SIGTERM (a background run has SIGINT ignored): leave through the context managers, so the
    # cluster's processes are stopped
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    command = "python bench/replication_failover.py " + " ".join(sys.argv[1:])
    lines = run_header("Partition failover: leader kill -9 and controlled shutdown", command)
    overrides = {"broker.session.timeout.ms": str(args.session_timeout_ms),
                 "broker.heartbeat.interval.ms": str(args.heartbeat_ms)}
    rows: list[dict[str, float | int | str]] = []
    start = time.monotonic()
    with SamsaCluster(4, roles="controller", controllers=1, overrides=overrides,
                      data_dir=args.data_dir) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 3})
        fs = admin.create_topics([NewTopic(TOPIC, 1, 3, config={"min.insync.replicas": "2"})])
        fs[TOPIC].result(30)
        links = {n.node_id: Link(n.bootstrap, timeout=1.0) for n in cluster.brokers}
        writer = Writer(cluster.bootstrap, args.client_debug)
        writer.start()
        plan = ["kill"] * args.kills + ["shutdown"] * args.shutdowns
        try:
            for i, kind in enumerate(plan):
                row = one_round(cluster, links, writer, kind, i)
                rows.append(row)

                def f(k: str, row: dict[str, float | int | str] = row) -> str:
                    v = row.get(k)
                    return f"{v:.0f}" if isinstance(v, float) else str(v)
                log(f"t0 {row['t0']:.4f} {kind} {i}: node {row['old']} -> {f('leader')} "
                    f"(epoch {f('epoch')}): "
                    f"elected {f('elected')} ms, metadata {f('metadata')} ms, raw {f('raw')} ms, failover "
                    f"{f('failover')} ms, sent-after {f('sent_after')} ms, gap {f('gap')} ms, "
                    f"rejoin {f('rejoin')} ms {row.get('error', '')}")
        finally:
            writer.stop.set()
            writer.join(40)
            for lk in links.values():
                lk.close()
        acked = len(writer.acks.times)
        offsets = writer.acks.offsets
        dup = len(offsets) - len(set(offsets))
    elapsed = time.monotonic() - start
    st, hb = args.session_timeout_ms, args.heartbeat_ms
    lines += [f"1 dedicated controller + 3 brokers, broker.session.timeout.ms={st}, "
              f"broker.heartbeat.interval.ms={hb}, other settings default; topic of 1 partition, "
              f"RF=3, min.insync.replicas=2; producer acks=all, idempotent, one 1 KiB record "
              f"every {INTERVAL * 1000:.0f} ms. {len(rows)} rounds in {elapsed:.0f} s; "
              f"{acked:,} records acknowledged in all, {dup} acknowledged offsets seen twice, "
              f"{sum(int(r.get('delivery_errors', 0)) for r in rows)} delivery errors.", ""]
    for kind, title, goal in (("kill", "kill -9 of the partition leader",
                               f"goal ≤ broker.session.timeout.ms + 1 s = {st + 1000} ms"),
                              ("shutdown", "controlled shutdown (SIGTERM) of the partition leader",
                               "goal ≤ 1000 ms")):
        sel = [r for r in rows if r["kind"] == kind]
        if not sel:
            continue
        fo = [float(r["failover"]) for r in sel if isinstance(r.get("failover"), float)]
        limit = st + 1000 if kind == "kill" else 1000
        met = sum(1 for x in fo if x <= limit)
        lines += [f"## {title} ({len(sel)} rounds; {goal})", "", *table(rows, kind), "",
                  f"{met}/{len(sel)} rounds within the goal; p99 is nearest-rank (with 50 "
                  "samples, the largest).", ""]
    lines += ["## Every round", "",
              "| round | kind | old leader | new leader | epoch | epoch start | exited | elected | "
              "metadata | raw | failover | retried first | own offset | sent after | gap | rejoin | "
              "errors |",
              "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        def g(k: str, r: dict[str, float | int | str] = r) -> str:
            return cell(r.get(k))
        lines.append(f"| {r['round']} | {r['kind']} | {r['old']} | {g('leader')} | {g('epoch')} | "
                     f"{g('epoch_start')} | {g('exited')} | {g('elected')} | {g('metadata')} | {g('raw')} | "
                     f"{g('failover')} | {g('retried_first')} | {g('own_offset')} | "
                     f"{g('sent_after')} | {g('gap')} | {g('rejoin')} | "
                     f"{r.get('error', '')} |")
    lines += ["", load_line()]
    write_report(args.out, "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
