"""Small contexts implementing the connect api Protocols for driving connector tasks directly in
unit tests: an offset reader backed by a dict, and source / sink task contexts."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from samsa.connect.api import SinkTaskContext, SourceTask, SourceTaskContext, TopicPartition
from samsa.connect.data import SourceRecord


def partition_key(partition: dict[str, Any]) -> str:
    return json.dumps(partition, sort_keys=True)


class DictOffsetReader:
    """Offsets by source partition, as the runtime's reader would return them after a commit."""

    def __init__(self, offsets: dict[str, dict[str, Any]] | None = None) -> None:
        self.stored: dict[str, dict[str, Any]] = dict(offsets or {})

    def put(self, partition: dict[str, Any], offset: dict[str, Any] | None) -> None:
        if offset is None:
            self.stored.pop(partition_key(partition), None)
        else:
            self.stored[partition_key(partition)] = json.loads(json.dumps(offset))

    def commit(self, records: Sequence[SourceRecord]) -> None:
        """Store each record's offset the way the runtime does (JSON round trip, last one wins)."""
        for r in records:
            assert r.source_partition is not None
            self.put(r.source_partition, r.source_offset)

    def offset(self, partition: dict[str, Any]) -> dict[str, Any] | None:
        return self.stored.get(partition_key(partition))

    def offsets(self, partitions: Sequence[dict[str, Any]]) -> dict[Any, dict[str, Any] | None]:
        return {partition_key(p): self.offset(p) for p in partitions}


class SourceContext:
    def __init__(self, configs: dict[str, str], reader: DictOffsetReader | None = None) -> None:
        self._configs = configs
        self.reader = reader or DictOffsetReader()

    @property
    def configs(self) -> dict[str, str]:
        return self._configs

    @property
    def offset_storage_reader(self) -> DictOffsetReader:
        return self.reader

    def transaction_context(self) -> None:
        return None


class SinkContext:
    def __init__(self, configs: dict[str, str]) -> None:
        self._configs = configs
        self.assigned: set[TopicPartition] = set()

    @property
    def configs(self) -> dict[str, str]:
        return self._configs

    def offset(self, offsets: dict[TopicPartition, int]) -> None:
        pass

    def timeout(self, timeout_ms: int) -> None:
        pass

    def assignment(self) -> set[TopicPartition]:
        return self.assigned

    def pause(self, *partitions: TopicPartition) -> None:
        pass

    def resume(self, *partitions: TopicPartition) -> None:
        pass

    def request_commit(self) -> None:
        pass

    def errant_record_reporter(self) -> None:
        return None


def started_source(task: SourceTask, props: dict[str, str],
                   reader: DictOffsetReader | None = None) -> SourceContext:
    ctx = SourceContext(props, reader)
    _source_ctx: SourceTaskContext = ctx  # the Protocol is satisfied
    task.initialize(_source_ctx)
    task.start(props)
    return ctx


def sink_context(props: dict[str, str]) -> SinkTaskContext:
    return SinkContext(props)


def poll_until(task: SourceTask, count: int, max_polls: int = 200) -> list[SourceRecord]:
    """Poll until `count` records came (bounded by `max_polls` polls)."""
    out: list[SourceRecord] = []
    for _ in range(max_polls):
        if len(out) >= count:
            break
        out.extend(task.poll() or [])
    return out
