"""Kafka offsets kept in Iceberg snapshot summaries: each commit's snapshot carries, per topic,
`kafka.connect.offsets.<topic>.<group>` = {"<partition>": <next offset>} (JSON) for the
partitions of the task that committed it, plus `kafka.connect.commit-id` and
`kafka.connect.task-id`. A table therefore
says itself how far into each partition its data goes, which is what makes the sink exactly-once
without a transaction spanning Kafka and the catalog."""

from __future__ import annotations

import json
import uuid
from typing import Any

from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import ancestors_of

from ...api import TopicPartition

OFFSETS_PREFIX = "kafka.connect.offsets."
COMMIT_ID_PROP = "kafka.connect.commit-id"
TASK_ID_PROP = "kafka.connect.task-id"

Offsets = dict[TopicPartition, int]


def offsets_key(topic: str, group: str) -> str:
    return f"{OFFSETS_PREFIX}{topic}.{group}"


def parse_summary(summary: dict[str, Any], group: str) -> Offsets | None:
    """This connector's offsets in one snapshot summary, or None when it has none."""
    suffix = "." + group
    found: Offsets | None = None
    for key, value in summary.items():
        if not (key.startswith(OFFSETS_PREFIX) and key.endswith(suffix)):
            continue
        topic = key[len(OFFSETS_PREFIX):-len(suffix)]
        if not topic:
            continue
        try:
            parsed = json.loads(value)
        except (TypeError, ValueError):
            continue
        if not isinstance(parsed, dict):
            continue
        found = found if found is not None else {}
        for part, off in parsed.items():
            try:
                found[TopicPartition(topic, int(part))] = int(off)
            except (TypeError, ValueError):
                continue
    return found


def table_offsets(metadata: TableMetadata, group: str,
                  wanted: set[TopicPartition] | None = None) -> Offsets:
    """The connector's offsets on the table's current branch: per partition, the one in the
    newest ancestor snapshot that records it (each commit records the committing task's
    partitions; other writers' snapshots, say a compaction, record none). Stops early once
    every `wanted` partition is found."""
    found: Offsets = {}
    for snap in ancestors_of(metadata.current_snapshot(), metadata):
        if snap.summary is None:
            continue
        props = parse_summary(dict(snap.summary.additional_properties), group)
        for tp, off in (props or {}).items():
            found.setdefault(tp, off)
        if wanted is not None and wanted.issubset(found):
            break
    return found


def summary_properties(offsets: Offsets, group: str, task_id: str) -> dict[str, str]:
    """Snapshot properties recording this task's `offsets` (never other tasks' partitions: a
    commit pyiceberg retries on top of a concurrent one must not carry stale values over)."""
    by_topic: dict[str, dict[str, int]] = {}
    for tp, off in sorted(offsets.items()):
        by_topic.setdefault(tp.topic, {})[str(tp.partition)] = off
    props = {offsets_key(topic, group): json.dumps(parts, separators=(",", ":"))
             for topic, parts in by_topic.items()}
    props[COMMIT_ID_PROP] = str(uuid.uuid4())
    props[TASK_ID_PROP] = task_id
    return props
