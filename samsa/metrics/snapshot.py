"""A copy of the broker's numbers as metric families, taken on the broker's event loop (so nothing
changes under it) and rendered later by the admin thread. The cost is one pass over local
partitions, groups and connections per scrape; nothing here runs per record.

A family is (name, type, help, samples); a sample is (sample name, labels, value). Names follow
the Prometheus JMX exporter's rules for Kafka's MBeans (lowercased `kafka_<domain>_<type>_<name>`,
`_total` for *PerSec counters); consumer-group lag follows kafka-exporter.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .counters import BUCKETS_MS, TIMES, TopicStats

if TYPE_CHECKING:
    from samsa.broker.broker import Broker

Sample = tuple[str, dict[str, str], float]


@dataclass
class Family:
    name: str
    type: str  # counter, gauge, histogram
    help: str
    samples: list[Sample] = field(default_factory=list)

    def add(self, value: float, suffix: str = "", **labels: str) -> None:
        self.samples.append((self.name + suffix, labels, float(value)))


_TOPIC_METRICS = (  # (TopicStats slot, JMX exporter name, help)
    ("messages_in", "messagesin", "Records appended by produce requests (MessagesInPerSec)."),
    ("bytes_in", "bytesin", "Record batch bytes received by produce requests (BytesInPerSec)."),
    ("bytes_out", "bytesout", "Record bytes sent to consumers by fetch requests (BytesOutPerSec)."),
    ("failed_produce", "failedproducerequests",
     "Partition appends refused after reaching the leader (FailedProduceRequestsPerSec)."),
    ("failed_fetch", "failedfetchrequests",
     "Partition reads answered with an error (FailedFetchRequestsPerSec)."),
    ("total_produce", "totalproducerequests",
     "Partition appends attempted on this leader (TotalProduceRequestsPerSec)."),
    ("total_fetch", "totalfetchrequests",
     "Partition reads by consumers (TotalFetchRequestsPerSec)."),
    ("bytes_rejected", "bytesrejected", "Bytes of refused batches (BytesRejectedPerSec)."),
)


def take(broker: Broker, ready: bool) -> list[Family]:
    """Every family /metrics serves except process_* (prometheus-client's own collector)."""
    out: list[Family] = []
    image = broker.node.image
    m = broker.metrics
    m.forget_topics(set(image.topics))
    out += _topic_families(m.topics, m.gone)
    f = Family("kafka_server_brokertopicmetrics_replicationbytesout", "counter",
               "Record bytes sent to follower replicas (ReplicationBytesOutPerSec).")
    f.add(m.replication_bytes_out, "_total")
    out.append(f)
    f = Family("kafka_server_brokertopicmetrics_replicationbytesin", "counter",
               "Record bytes this broker's follower replicas appended (ReplicationBytesInPerSec).")
    f.add(broker.replicas.replication_bytes_in if broker.is_broker else 0, "_total")
    out.append(f)
    out += _request_families(broker)
    if broker.is_broker:
        out += _replica_families(broker)
        out += _log_families(broker)
        out += _group_families(broker)
    out += _controller_families(broker)
    out += _network_families(broker)
    state = Family("kafka_server_kafkaserver_brokerstate", "gauge",
                   "Broker state (Kafka's BrokerState: 1 STARTING, 3 RUNNING).")
    state.add(3 if ready else 1)
    out.append(state)
    return out


def _topic_families(topics: dict[str, TopicStats], gone: TopicStats) -> list[Family]:
    total = TopicStats()
    total.add(gone)
    for t in topics.values():
        total.add(t)
    out = []
    for slot, name, doc in _TOPIC_METRICS:
        f = Family(f"kafka_server_brokertopicmetrics_{name}", "counter", doc)
        f.add(getattr(total, slot), "_total")
        for topic, t in sorted(topics.items()):
            f.add(getattr(t, slot), "_total", topic=topic)
        out.append(f)
    return out


def _request_families(broker: Broker) -> list[Family]:
    reqs = Family("kafka_network_requestmetrics_requests", "counter",
                  "Requests received, per request type and version (RequestsPerSec).")
    hists = [Family(f"kafka_network_requestmetrics_{t}", "histogram", _TIME_HELP[t]) for t in TIMES]
    for name, r in sorted(broker.metrics.requests.items()):
        for version, n in sorted(r.versions.items()):
            reqs.add(n, "_total", request=name, version=str(version))
        for f, h in zip(hists, r.times, strict=True):
            acc = 0
            for bound, c in zip(BUCKETS_MS, h.counts, strict=False):
                acc += c
                f.add(acc, "_bucket", request=name, le=_le(bound))
            acc += h.counts[-1]
            f.add(acc, "_bucket", request=name, le="+Inf")
            f.add(acc, "_count", request=name)
            f.add(h.total, "_sum", request=name)
    errors = Family("kafka_network_requestmetrics_errors", "counter",
                    "Requests answered with an error, per request type and error (ErrorsPerSec); "
                    "counted only for requests whose handler failed (UNKNOWN_SERVER_ERROR).")
    for (name, error), n in sorted(broker.metrics.errors.items()):
        errors.add(n, "_total", request=name, error=error)
    queue = Family("kafka_network_requestchannel_requestqueuesize", "gauge",
                   "Requests read and not yet answered (queued.max.requests counts these).")
    queue.add(broker.network_limits.in_flight)
    return [reqs, *hists, errors, queue]


_TIME_HELP = {
    "requestqueuetimems": "Milliseconds from a request's bytes arriving to its handler starting, per "
                          "request type (RequestQueueTimeMs).",
    "localtimems": "Milliseconds of a request's handler work on the event loop (LocalTimeMs).",
    "remotetimems": "Milliseconds a request waited after that: followers, a flush, a long poll "
                    "(RemoteTimeMs).",
    "totaltimems": "Milliseconds from a request's bytes arriving to its answer being ready "
                   "(TotalTimeMs).",
}


def _le(bound: float) -> str:
    return repr(float(bound))


def _replica_families(broker: Broker) -> list[Family]:
    rm = broker.replicas
    under = under_min = at_min = 0
    delayed_produce = 0
    for lead in rm.leaders.values():
        isr, replicas = len(lead.state.isr), len(lead.state.replicas)
        under += isr < replicas
        under_min += isr < lead.min_isr
        at_min += isr == lead.min_isr
        delayed_produce += len(lead.waiters)
    out = []

    def gauge(name: str, value: float, doc: str) -> None:
        f = Family(f"kafka_server_replicamanager_{name}", "gauge", doc)
        f.add(value)
        out.append(f)

    gauge("partitioncount", len(rm.leaders) + len(rm.following), "Partitions with a replica here.")
    gauge("leadercount", len(rm.leaders), "Partitions this broker leads.")
    gauge("underreplicatedpartitions", under, "Led partitions whose ISR is smaller than replicas.")
    gauge("underminisrpartitioncount", under_min, "Led partitions with ISR < min.insync.replicas.")
    gauge("atminisrpartitioncount", at_min, "Led partitions with ISR = min.insync.replicas.")
    gauge("offlinereplicacount", 0, "Replicas on an offline log dir (Samsa: always 0).")
    for name, value, doc in (("isrshrinks", rm.isr_shrinks, "ISR shrinks (IsrShrinksPerSec)."),
                             ("isrexpands", rm.isr_expands, "ISR expansions (IsrExpandsPerSec).")):
        f = Family(f"kafka_server_replicamanager_{name}", "counter", doc)
        f.add(value, "_total")
        out.append(f)
    fetches = sum(len(c.fetches) for c in broker.connections)
    purg = Family("kafka_server_delayedoperationpurgatory_purgatorysize", "gauge",
                  "Requests parked waiting (Produce: acks=all for followers; Fetch: long polls).")
    purg.add(delayed_produce, delayedOperation="Produce")
    purg.add(fetches, delayedOperation="Fetch")
    num = Family("kafka_server_delayedoperationpurgatory_numdelayedoperations", "gauge",
                 "Delayed operations waiting (as purgatorysize in Samsa).")
    num.add(delayed_produce, delayedOperation="Produce")
    num.add(fetches, delayedOperation="Fetch")
    return [*out, purg, num]


def _log_families(broker: Broker) -> list[Family]:
    size = Family("kafka_log_log_size", "gauge", "Bytes of a partition's log on this broker.")
    start = Family("kafka_log_log_logstartoffset", "gauge", "A partition's log start offset.")
    end = Family("kafka_log_log_logendoffset", "gauge", "A partition's log end offset.")
    segs = Family("kafka_log_log_numlogsegments", "gauge", "Segments of a partition's log.")
    for (topic, p), lg in sorted(broker.logs.logs.items()):
        labels = {"topic": topic, "partition": str(p)}
        size.add(lg.size_bytes, **labels)
        start.add(lg.log_start_offset, **labels)
        end.add(lg.end_offset, **labels)
        segs.add(len(lg.segments), **labels)
    return [size, start, end, segs]


_STATES = (("Stable", "numgroupsstable"), ("PreparingRebalance", "numgroupspreparingrebalance"),
           ("CompletingRebalance", "numgroupscompletingrebalance"), ("Empty", "numgroupsempty"),
           ("Dead", "numgroupsdead"))


def _group_families(broker: Broker) -> list[Family]:
    """Group coordinator gauges, and kafka-exporter's lag for the groups this broker coordinates
    (lag = the partition's high watermark - the committed offset, for partitions with a replica
    on this broker)."""
    gc = getattr(broker, "groups", None)
    prefix = "kafka_coordinator_group_groupmetadatamanager_"
    counts = {name: 0 for _, name in _STATES}
    nums = Family(prefix + "numgroups", "gauge", "Groups this broker coordinates.")
    offsets = Family(prefix + "numoffsets", "gauge", "Committed offsets this broker holds.")
    lag = Family("kafka_consumergroup_lag", "gauge",
                 "Committed offset's distance from the high watermark (kafka-exporter).")
    cur = Family("kafka_consumergroup_current_offset", "gauge",
                 "Committed offset of a group at a partition (kafka-exporter).")
    lag_sum = Family("kafka_consumergroup_lag_sum", "gauge", "A group's lag summed over a topic.")
    cur_sum = Family("kafka_consumergroup_current_offset_sum", "gauge",
                     "A group's committed offsets summed over a topic.")
    members = Family("kafka_consumergroup_members", "gauge", "Members of a consumer group.")
    n_groups = n_offsets = 0
    if gc is not None:
        cgs = getattr(gc, "consumer_groups", {})
        ids = sorted(set(gc.groups) | set(cgs))
        for gid in ids:
            g = gc.groups.get(gid)
            cg = cgs.get(gid)
            n_groups += 1
            state = str(cg.state) if cg is not None else str(g.state) if g is not None else ""
            for label, name in _STATES:
                if state.lower() == label.lower():
                    counts[name] += 1
            n_members = (len(cg.members) if cg is not None else 0) + (
                len(g.members) if g is not None else 0)
            members.add(n_members, consumergroup=gid)
            if g is None:
                continue
            n_offsets += len(g.offsets)
            sums: dict[str, list[int]] = {}
            for (topic, p), entry in sorted(g.offsets.items()):
                labels = {"consumergroup": gid, "topic": topic, "partition": str(p)}
                cur.add(entry.offset, **labels)
                s = sums.setdefault(topic, [0, 0])
                s[0] += entry.offset
                lg = broker.partition_log(topic, p)
                if lg is None:  # a replica here follows: its high watermark trails the leader's
                    fol = broker.replicas.following.get((topic, p))  # by at most one fetch
                    lg = fol.log if fol is not None else None
                if lg is not None:
                    value = max(0, lg.high_watermark - entry.offset)
                    lag.add(value, **labels)
                    s[1] += value
            for topic, (offs, lags) in sums.items():
                cur_sum.add(offs, consumergroup=gid, topic=topic)
                lag_sum.add(lags, consumergroup=gid, topic=topic)
    nums.add(n_groups)
    offsets.add(n_offsets)
    out = [nums, offsets]
    for _, name in _STATES:
        f = Family(prefix + name, "gauge", f"Groups in state {name[9:]}.")
        f.add(counts[name])
        out.append(f)
    return [*out, cur, lag, cur_sum, lag_sum, members]


def _controller_families(broker: Broker) -> list[Family]:
    """kafka.controller KafkaController gauges: the cluster-wide ones are reported by the active
    controller only (0 elsewhere), as in Kafka."""
    node = broker.node
    active = bool(getattr(node, "active", False))
    image = node.image
    out = []

    def gauge(name: str, value: float, doc: str) -> None:
        f = Family(f"kafka_controller_kafkacontroller_{name}", "gauge", doc)
        f.add(value if active or name == "activecontrollercount" else 0)
        out.append(f)

    parts = [st for t in image.topics.values() for st in t.partitions.values()]
    gauge("activecontrollercount", 1 if active else 0, "1 on the active controller.")
    gauge("offlinepartitionscount", sum(st.leader < 0 for st in parts),
          "Partitions without a leader.")
    gauge("globaltopiccount", len(image.topics), "Topics in the cluster.")
    gauge("globalpartitioncount", len(parts), "Partitions in the cluster.")
    gauge("activebrokercount", sum(not b.fenced for b in image.brokers.values()),
          "Registered, unfenced brokers.")
    gauge("fencedbrokercount", sum(b.fenced for b in image.brokers.values()),
          "Registered, fenced brokers.")
    gauge("preferredreplicaimbalancecount",
          sum(bool(st.replicas) and st.leader != st.replicas[0] for st in parts),
          "Partitions not led by their preferred replica.")
    if broker.is_broker:  # kafka-exporter's cluster view (every broker can serve it)
        brokers = Family("kafka_brokers", "gauge", "Brokers in the cluster (kafka-exporter).")
        brokers.add(len(image.brokers))
        tp = Family("kafka_topic_partitions", "gauge", "Partitions of a topic (kafka-exporter).")
        for name, t in sorted(image.topics.items()):
            tp.add(len(t.partitions), topic=name)
        out += [brokers, tp]
        cur = Family("kafka_topic_partition_current_offset", "gauge",
                     "High watermark of a partition led here (kafka-exporter).")
        old = Family("kafka_topic_partition_oldest_offset", "gauge",
                     "Log start offset of a partition led here (kafka-exporter).")
        for (topic, p), lead in sorted(broker.replicas.leaders.items()):
            cur.add(lead.log.high_watermark, topic=topic, partition=str(p))
            old.add(lead.log.log_start_offset, topic=topic, partition=str(p))
        out += [cur, old]
    return out


def _network_families(broker: Broker) -> list[Family]:
    prefix = "kafka_server_socket_server_metrics_"
    count = Family(prefix + "connection_count", "gauge", "Open connections per listener.")
    created = Family(prefix + "connection_creation", "counter", "Connections accepted.")
    closed = Family(prefix + "connection_close", "counter", "Connections closed.")
    per: dict[str, int] = {ln.name: 0 for ln in broker.bind_listeners}
    for c in broker.connections:
        name = c.listener_name or "PLAINTEXT"
        per[name] = per.get(name, 0) + 1
    stats = broker.metrics.listeners
    for name in sorted(set(per) | set(stats)):
        labels = {"listener": name, "networkProcessor": "0"}
        count.add(per.get(name, 0), **labels)
        s = stats.get(name)
        created.add(s.created if s else 0, "_total", **labels)
        closed.add(s.closed if s else 0, "_total", **labels)
    return [count, created, closed]


def flatten(families: list[Family]) -> dict[str, list[tuple[dict[str, str], float]]]:
    """{sample name: [(labels, value)]}: what ConsoleContext.metrics_snapshot() returns."""
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for f in families:
        for name, labels, value in f.samples:
            out.setdefault(name, []).append((labels, value))
    return out
