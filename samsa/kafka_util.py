"""confluent-kafka helpers shared by Samsa's Kafka-backed stores (the registry's `_schemas`, the
Connect worker's internal topics, Spark's offset queries): creating a compacted topic sized to
the cluster, and asking a partition's end in a way that survives a leader change."""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

log = logging.getLogger("samsa.kafka_util")

ATTEMPT_S = 2.0  # one ListOffsets attempt of watermark()


def watermark(c: Consumer, tp: TopicPartition, timeout_s: float,
              attempt_s: float = ATTEMPT_S) -> tuple[int, int]:
    """(earliest, latest) of one partition (latest is the last stable offset for a read_committed
    consumer), asked in short attempts with a metadata refresh between two: librdkafka sends the
    query to the leader its metadata names and waits for that broker, and never looks for the
    new leader of a partition it does not fetch, so after a leader change (a kill -9) a single
    call would wait out the whole timeout. Raises KafkaException once `timeout_s` has passed."""
    deadline = time.monotonic() + timeout_s
    while True:
        attempt = max(0.1, min(attempt_s, deadline - time.monotonic()))
        try:
            lo, hi = c.get_watermark_offsets(tp, timeout=attempt, cached=False)
            return int(lo), int(hi)
        except KafkaException:
            if time.monotonic() >= deadline:
                raise
        with contextlib.suppress(KafkaException):
            c.list_topics(tp.topic, timeout=attempt)  # learn the partition's current leader


def live_brokers(admin: AdminClient, timeout_s: float = 10.0) -> int:
    return len(admin.list_topics(timeout=timeout_s).brokers)


def capped_replication(admin: AdminClient, wanted: int) -> int:
    """`wanted` capped by the brokers the cluster has (-1, the broker default, is kept)."""
    if wanted == -1:
        return -1
    return max(1, min(wanted, live_brokers(admin)))


def create_compacted_topic(admin: AdminClient, name: str, partitions: int, replication: int,
                           config: dict[str, str] | None = None, timeout_s: float = 30.0) -> bool:
    """Create `name` (cleanup.policy=compact, on top of `config`) unless it exists; True when
    this call created it. Transient failures (no controller yet, a broker restarting) are retried
    until `timeout_s`; the last error is raised as KafkaException."""
    settings = {**(config or {}), "cleanup.policy": "compact"}
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            rf = capped_replication(admin, replication)
            fut = admin.create_topics([NewTopic(name, partitions, rf, config=settings)],
                                      operation_timeout=10)[name]
            fut.result(timeout=15)
            log.info("created %s (compacted, %d partitions, replication factor %d)",
                     name, partitions, rf)
            return True
        except KafkaException as e:
            err = e.args[0] if e.args else None
            if isinstance(err, KafkaError) and err.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                return False
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def topic_config(admin: AdminClient, name: str, timeout_s: float = 10.0) -> dict[str, str]:
    """The topic's effective configs (name -> value)."""
    res = ConfigResource(ConfigResource.Type.TOPIC, name)
    entries: dict[str, Any] = admin.describe_configs([res], request_timeout=timeout_s)[res].result(
        timeout=timeout_s)
    return {k: v.value for k, v in entries.items()}


def partition_count(admin: AdminClient, name: str, timeout_s: float = 10.0) -> int:
    md = admin.list_topics(name, timeout=timeout_s).topics.get(name)
    if md is None or md.error is not None:
        raise KafkaException(md.error if md is not None else KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))
    return len(md.partitions)
