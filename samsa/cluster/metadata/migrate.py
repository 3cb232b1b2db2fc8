"""Reading a data dir written by the single-node broker (before the KRaft quorum) so it can be
migrated: its `__cluster_metadata-0` is a PartitionLog whose records are JSON objects
(`legacy.MetadataLog`). The KRaft log (`FileRaftLog`) in the same place holds one record batch
per entry whose payload is an ApiMessageAndVersion (first byte 1) or a control record; no JSON.

The files are only read here, never changed: moving the old directory aside is the caller's job.
"""

from __future__ import annotations

import json
import logging
import os
import struct
import uuid
from pathlib import Path
from typing import Any

from samsa.protocol.batch import HEADER_SIZE, LOG_OVERHEAD, crc_ok, read_header
from samsa.protocol.records import decode_batch

from .image import MetadataImage, PartitionState, TopicImage
from .records import Record

METADATA_DIR = "__cluster_metadata-0"
log = logging.getLogger("samsa.metadata.migrate")


class _NotLegacy(Exception):
    """The directory holds something other than the JSON metadata log."""


def legacy_records(log_dir: Path, node_id: int = 1,
                   dir_name: str = "") -> tuple[str, list[Record]] | None:
    """(cluster id, records rebuilding its topics, configs and producer ids) of the JSON metadata
    log in `log_dir/__cluster_metadata-0`; None if there is none or it is not that format.
    Every partition is placed on `node_id` alone (replicas = ISR = (node_id,), leader node_id),
    the broker's own dynamic configs become `node_id`'s. The cluster id is "" if the log never
    recorded one. `dir_name` reads it under another name (a migration in progress)."""
    d = Path(log_dir) / (dir_name or METADATA_DIR)
    if not d.is_dir():
        return None
    try:
        docs = _read_json_records(d)
    except _NotLegacy as e:
        log.debug("%s is not a legacy metadata log: %s", d, e)
        return None
    if not docs and not _has_partition_log_files(d):
        return None
    state = _Legacy()
    for doc in docs:
        try:
            state.apply(doc)
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            log.warning("%s: skipping legacy metadata record %r (%s)", d, doc, e)
    return state.cluster_id, state.image(node_id).to_records()


def _has_partition_log_files(d: Path) -> bool:
    """The files a PartitionLog creates and a FileRaftLog never does."""
    return any(n == "partition.meta" or n.endswith((".index", ".timeindex"))
               for n in os.listdir(d))


def _read_json_records(d: Path) -> list[dict[str, Any]]:
    """Every record value of the segments in offset order, parsed as JSON objects. A torn or
    corrupt tail ends the log (as the old replay did); a control batch, a checkpoint file or a
    value that is not a JSON object means another format."""
    names = os.listdir(d)
    if any(n.endswith(".checkpoint") or n == "quorum-state" for n in names):
        raise _NotLegacy("KRaft files present")
    bases = sorted(int(n[:-4]) for n in names if n.endswith(".log") and n[:-4].isdigit())
    out: list[dict[str, Any]] = []
    next_offset = -1
    for base in bases:
        data = (d / f"{base:020d}.log").read_bytes()
        pos = 0
        while pos + HEADER_SIZE <= len(data):
            h = read_header(data, pos)
            size = h.batch_length + LOG_OVERHEAD
            if h.magic != 2 or size < HEADER_SIZE or pos + size > len(data) \
                    or not crc_ok(data, pos, size):
                log.warning("%s: metadata log ends at a torn batch in %020d.log", d, base)
                return out
            if h.is_control:
                raise _NotLegacy("control batch")
            try:
                recs = decode_batch(data, pos)
            except (ValueError, IndexError, struct.error) as e:
                log.warning("%s: undecodable batch in %020d.log (%s): log ends there", d, base, e)
                return out
            for r in recs:
                if r.offset < next_offset:
                    continue  # a segment overlapping the previous one (a cleaner's leftover)
                next_offset = r.offset + 1
                if r.value is None:
                    continue
                try:
                    doc = json.loads(bytes(r.value))
                except ValueError:
                    raise _NotLegacy(f"record at offset {r.offset} is not JSON") from None
                if not isinstance(doc, dict) or not isinstance(doc.get("type"), str):
                    raise _NotLegacy(f"record at offset {r.offset} is not a metadata object")
                out.append(doc)
            pos += size
    return out


class _Legacy:
    """The old image, replayed with the old record kinds' meaning."""

    def __init__(self) -> None:
        self.cluster_id = ""
        self.topics: dict[str, tuple[uuid.UUID, int, dict[str, str]]] = {}
        self.cluster_configs: dict[str, str] = {}
        self.node_configs: dict[str, str] = {}
        self.next_producer_id = 0

    def apply(self, rec: dict[str, Any]) -> None:
        kind = rec["type"]
        if kind == "cluster":
            self.cluster_id = str(rec["cluster_id"])
        elif kind == "topic":
            configs = {str(k): str(v) for k, v in dict(rec.get("configs") or {}).items()
                       if v is not None}
            self.topics[str(rec["name"])] = (uuid.UUID(rec["topic_id"]), int(rec["partitions"]),
                                             configs)
        elif kind == "partitions":
            tid, _, configs = self.topics[rec["name"]]
            self.topics[rec["name"]] = (tid, int(rec["partitions"]), configs)
        elif kind == "topic_config":
            _merge(self.topics[rec["name"]][2], rec["configs"])
        elif kind == "broker_config":
            _merge(self.node_configs if rec.get("node") else self.cluster_configs, rec["configs"])
        elif kind == "remove_topic":
            self.topics.pop(rec["name"], None)
        elif kind == "producer_ids":
            self.next_producer_id = max(self.next_producer_id, int(rec["next"]))
        else:
            log.warning("unknown legacy metadata record kind %r: ignored", kind)

    def image(self, node_id: int) -> MetadataImage:
        img = MetadataImage(cluster_id=self.cluster_id, next_producer_id=self.next_producer_id)
        for name, (tid, count, configs) in self.topics.items():
            parts = {p: PartitionState((node_id,), (node_id,), node_id) for p in range(count)}
            t = TopicImage(name, tid, parts, dict(configs))
            img.topics[name] = t
            img.by_id[tid] = t
        img.cluster_configs = dict(self.cluster_configs)
        if self.node_configs:
            img.node_configs[node_id] = dict(self.node_configs)
        return img


def _merge(layer: dict[str, str], changes: dict[str, Any]) -> None:
    for k, v in dict(changes).items():
        if v is None:
            layer.pop(str(k), None)
        else:
            layer[str(k)] = str(v)
