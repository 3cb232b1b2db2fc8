"""Driver-side offset work: which partitions a subscription covers, their earliest/latest offsets,
and resolving startingOffsets/endingOffsets/timestamps to concrete per-partition offsets.

Offset maps are dicts keyed by "topic/partition" (string keys: Spark round-trips them through JSON)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition

from .. import kafka_util
from ..client_security import fail_on_auth_error
from .options import EARLIEST, LATEST, OffsetSpec, SourceOptions, Subscription, key, split_key

TIMEOUT_S = 30.0
ATTEMPT_S = 2.0  # one ListOffsets attempt of watermark()


class DataLossError(RuntimeError):
    pass


def consumer_conf(client: dict[str, Any]) -> dict[str, object]:
    # Spark (the Java client) reads uncommitted by default; librdkafka defaults to read_committed.
    # A failed TLS handshake or SASL login fails the next poll at once, as in the Java client.
    conf: dict[str, object] = {"group.id": "samsa-spark", "enable.auto.commit": False,
                               "isolation.level": "read_uncommitted",
                               "enable.auto.offset.store": False, "log_level": 3,
                               "error_cb": fail_on_auth_error}
    conf.update(client)
    return conf


@contextmanager
def consumer(client: dict[str, Any]) -> Iterator[Consumer]:
    c = Consumer(consumer_conf(client))
    try:
        yield c
    finally:
        c.close()


def partitions(c: Consumer, sub: Subscription) -> list[str]:
    """The partitions the subscription covers right now, as sorted "topic/partition" keys."""
    md = metadata(c)
    if sub.kind == "assign":
        return [key(t, p) for t, p in sub.assigned if t in md.topics and p in md.topics[t].partitions]
    out: list[str] = []
    for name, tmd in md.topics.items():
        if tmd.error is not None or not sub.matches(name):
            continue
        if sub.kind == "subscribePattern" and name.startswith("__"):
            continue  # internal topics are not matched by patterns, as in Kafka
        out.extend(key(name, p) for p in tmd.partitions)
    return sorted(out)


def metadata(c: Consumer, timeout_s: float = TIMEOUT_S) -> Any:
    """All topics' metadata, asked in short attempts with a poll between two so that a failed
    authentication (error_cb) ends the wait at once."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return c.list_topics(timeout=max(0.1, min(ATTEMPT_S, deadline - time.monotonic())))
        except KafkaException:
            c.poll(0)  # no assignment: serves callbacks only (and raises an auth failure)
            if time.monotonic() >= deadline:
                raise


def watermark(c: Consumer, tp: TopicPartition, timeout_s: float = TIMEOUT_S) -> tuple[int, int]:
    """(earliest, latest) of one partition, robust to a leader change (kafka_util.watermark)."""
    return kafka_util.watermark(c, tp, timeout_s, ATTEMPT_S)


def watermarks(c: Consumer, keys: Iterable[str]) -> dict[str, tuple[int, int]]:
    """(earliest, latest) per partition; latest is the last stable offset for read_committed."""
    return {k: watermark(c, TopicPartition(*split_key(k))) for k in keys}


def by_timestamp(c: Consumer, wanted: dict[str, int], strategy: str) -> dict[str, int]:
    """The first offset whose timestamp is >= the given one; none (after the end) → latest, or an
    error when strategy is "error" (as Spark's startingOffsetsByTimestampStrategy)."""
    tps = [TopicPartition(*split_key(k), int(ts)) for k, ts in wanted.items()]
    res = c.offsets_for_times(tps, timeout=TIMEOUT_S)
    out = {}
    marks = None
    for tp in res:
        if tp.error is not None:
            raise KafkaException(tp.error)
        k = key(tp.topic, tp.partition)
        if tp.offset < 0:
            if strategy == "error":
                raise ValueError(f"no offset matched timestamp {wanted[k]} in {k} (set "
                                 "startingOffsetsByTimestampStrategy=latest to start from the end)")
            marks = marks or watermarks(c, wanted)
            out[k] = marks[k][1]
        else:
            out[k] = int(tp.offset)
    return out


def resolve(c: Consumer, spec: OffsetSpec, keys: list[str], opts: SourceOptions,
            marks: dict[str, tuple[int, int]], what: str) -> dict[str, int]:
    """Concrete offsets for `keys` from a starting or ending spec."""
    if spec.kind == "earliest":
        return {k: marks[k][0] for k in keys}
    if spec.kind == "latest":
        return {k: marks[k][1] for k in keys}
    if spec.kind == "timestamp":
        return by_timestamp(c, {k: spec.timestamp for k in keys}, opts.timestamp_strategy)
    if spec.kind == "timestamps":
        missing = sorted(set(keys) - set(spec.timestamps))
        if missing:
            raise ValueError(f"{what}OffsetsByTimestamp does not cover {', '.join(missing)}")
        return by_timestamp(c, {k: spec.timestamps[k] for k in keys}, opts.timestamp_strategy)
    missing = sorted(set(keys) - set(spec.offsets))
    if missing and opts.subscription.kind != "subscribePattern":
        raise ValueError(f"{what}Offsets does not cover {', '.join(missing)}")
    out = {}
    for k in keys:
        o = spec.offsets.get(k, EARLIEST if what == "starting" else LATEST)
        out[k] = marks[k][0] if o == EARLIEST else marks[k][1] if o == LATEST else o
    return out


def check_loss(start: dict[str, int], marks: dict[str, tuple[int, int]], fail: bool,
               log: list[str] | None = None) -> dict[str, int]:
    """Move starts below the log start offset (retention deleted data) up to it, or fail."""
    out = dict(start)
    for k, o in start.items():
        if k not in marks:
            msg = f"partition {k} is gone (topic deleted?); some data may have been lost"
        elif o < marks[k][0]:
            msg = (f"offsets {o}..{marks[k][0] - 1} of {k} no longer exist (retention deleted them); "
                   "some data may have been lost")
            out[k] = marks[k][0]
        else:
            continue
        if fail:
            raise DataLossError(msg + ". Set failOnDataLoss=false to skip lost data and continue.")
        if log is not None:
            log.append(msg)
    return out
