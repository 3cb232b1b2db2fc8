"""The cluster metadata image and the records that build it (DESIGN principle 3).

Records are JSON objects stored one per batch in the local `__cluster_metadata` log; replaying the
log from the start rebuilds the image. The record kinds mirror KRaft's (TopicRecord, PartitionRecord,
ConfigRecord, RemoveTopicRecord, ProducerIdsRecord) in a simpler encoding.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from samsa.protocol.records import decode_batch, encode_batch
from samsa.storage.log import LogConfig, PartitionLog

METADATA_TOPIC = "__cluster_metadata"


@dataclass
class TopicImage:
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)
    internal: bool = False


@dataclass
class MetadataImage:
    cluster_id: str = ""
    topics: dict[str, TopicImage] = field(default_factory=dict)
    by_id: dict[uuid.UUID, TopicImage] = field(default_factory=dict)
    next_producer_id: int = 0
    broker_configs: dict[str, str] = field(default_factory=dict)  # cluster-wide defaults ("")
    node_configs: dict[str, str] = field(default_factory=dict)  # this broker's own (resource "1")

    def broker_configs_for_topics(self) -> dict[str, str]:
        """Dynamic broker settings translated to topic config names; the broker's own override
        the cluster-wide defaults (Kafka: DYNAMIC_BROKER_CONFIG above DYNAMIC_DEFAULT_BROKER_CONFIG)."""
        from samsa.config import TOPIC_CONFIGS
        out = {}
        for d in TOPIC_CONFIGS.values():
            for layer in (self.node_configs, self.broker_configs):
                if d.broker_synonym and d.broker_synonym in layer:
                    out[d.name] = layer[d.broker_synonym]
                    break
        return out

    def apply(self, rec: dict[str, Any]) -> None:
        kind = rec["type"]
        if kind == "cluster":
            self.cluster_id = rec["cluster_id"]
        elif kind == "topic":
            t = TopicImage(rec["name"], uuid.UUID(rec["topic_id"]), rec["partitions"],
                           dict(rec.get("configs", {})), rec.get("internal", False))
            self.topics[t.name] = t
            self.by_id[t.topic_id] = t
        elif kind == "partitions":
            self.topics[rec["name"]].partitions = rec["partitions"]
        elif kind == "topic_config":
            t = self.topics[rec["name"]]
            for k, v in rec["configs"].items():
                if v is None:
                    t.configs.pop(k, None)
                else:
                    t.configs[k] = v
        elif kind == "broker_config":
            layer = self.node_configs if rec.get("node") else self.broker_configs
            for k, v in rec["configs"].items():
                if v is None:
                    layer.pop(k, None)
                else:
                    layer[k] = v
        elif kind == "remove_topic":
            gone = self.topics.pop(rec["name"], None)
            if gone is not None:
                self.by_id.pop(gone.topic_id, None)
        elif kind == "producer_ids":
            self.next_producer_id = max(self.next_producer_id, rec["next"])


class MetadataLog:
    """Appends metadata records durably (fsync per write: metadata changes are rare) and replays
    them at start."""

    def __init__(self, log_dir: Path, clean: bool) -> None:
        cfg = LogConfig(segment_bytes=64 << 20, cleanup_policy="compact")
        self.log = PartitionLog.open(log_dir / f"{METADATA_TOPIC}-0", METADATA_TOPIC, 0, cfg, clean)
        self.image = MetadataImage()

    def replay(self) -> MetadataImage:
        offset = self.log.log_start_offset
        while offset < self.log.end_offset:
            data = self.log.read(offset, 1 << 20)
            if not data:
                break
            pos = 0
            while pos + 12 <= len(data):
                size = int.from_bytes(data[pos + 8 : pos + 12], "big") + 12
                if pos + size > len(data):
                    break
                for r in decode_batch(data, pos):
                    if r.value is not None:
                        self.image.apply(json.loads(r.value))
                    offset = r.offset + 1
                pos += size
        return self.image

    async def write(self, records: list[dict[str, Any]]) -> None:
        now = int(time.time() * 1000)
        batch = encode_batch([(None, json.dumps(r).encode(), [], now) for r in records])
        self.log.append(bytearray(batch))
        for r in records:
            self.image.apply(r)
        await self.log.flush()

    def close(self, clean: bool = True) -> None:
        self.log.close(clean)
