"""Kafka's `meta.properties`: the file `samsa storage format` writes in every log directory, which
ties the directory to one cluster and one node (so a node never starts on another's data).

Version 1 (KRaft): `version=1`, `cluster.id`, `node.id`, `directory.id` (KIP-858). Cluster and
directory ids are Kafka Uuids as Kafka prints them: URL-safe base64 of 16 bytes, no padding.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

from samsa.storage import fsio

FILE_NAME = "meta.properties"


class MetaPropertiesError(Exception):
    """A log directory that is unformatted, unreadable, or formatted for another node/cluster."""


def random_uuid() -> str:
    """A new Kafka Uuid string (as kafka-storage.sh random-uuid): never the zero id, the
    reserved metadata topic id (1), or one whose text starts with '-' (it would read as a flag)."""
    while True:
        raw = os.urandom(16)
        n = int.from_bytes(raw, "big")
        text = _encode(raw)
        if n > 1 and not text.startswith("-"):
            return text


def _encode(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def parse_uuid(text: str) -> uuid.UUID:
    """Decode a Kafka Uuid string; MetaPropertiesError in Kafka's Uuid.fromString wording when
    it is not URL-safe base64 of exactly 16 bytes."""
    if len(text) > 24:
        raise MetaPropertiesError(f"Input string with prefix `{text[:24]}` is too long to be "
                                  f"decoded as a base64 UUID")
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError) as e:
        raise MetaPropertiesError(f"Input string `{text}` is not URL-safe base64: {e}") from None
    if len(raw) != 16:
        raise MetaPropertiesError(f"Input string `{text}` decoded as {len(raw)} bytes, which is "
                                  f"not equal to the expected 16 bytes of a base64-encoded UUID")
    if _encode(raw) != text:
        raise MetaPropertiesError(f"Input string `{text}` is not the 22-character form of a "
                                  f"base64-encoded UUID")
    return uuid.UUID(bytes=raw)


@dataclass(frozen=True, slots=True)
class MetaProperties:
    cluster_id: str
    node_id: int
    directory_id: str | None = None
    version: int = 1

    def to_text(self) -> str:
        lines = ["#", f"#{datetime.datetime.now(datetime.UTC).strftime('%a %b %d %H:%M:%S UTC %Y')}",
                 f"cluster.id={self.cluster_id}"]
        if self.directory_id is not None:
            lines.append(f"directory.id={self.directory_id}")
        lines += [f"node.id={self.node_id}", f"version={self.version}"]
        return "\n".join(lines) + "\n"


def read(directory: Path) -> MetaProperties | None:
    """The directory's meta.properties, None when there is none; MetaPropertiesError when it
    cannot be used."""
    path = Path(directory) / FILE_NAME
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as e:
        raise MetaPropertiesError(f"Unable to read {path}: {e}") from None
    props: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise MetaPropertiesError(f"{path}: cannot parse line {raw!r} (expected key=value)")
        props[key.strip()] = value.strip()
    version = props.get("version")
    if version != "1":
        raise MetaPropertiesError(f"{path}: unsupported version {version!r} (Samsa reads KRaft "
                                  f"meta.properties, version=1)")
    for key in ("cluster.id", "node.id"):
        if not props.get(key):
            raise MetaPropertiesError(f"{path}: no {key}")
    try:
        node_id = int(props["node.id"])
    except ValueError:
        raise MetaPropertiesError(f"{path}: node.id {props['node.id']!r} is not an integer") from None
    return MetaProperties(props["cluster.id"], node_id, props.get("directory.id") or None)


def write(directory: Path, meta: MetaProperties) -> None:
    """Durably (re)write the directory's meta.properties: temp file fsynced, renamed, dir fsynced
    (the directory and its parents are created as needed)."""
    directory = Path(directory)
    made = fsio.makedirs(directory)
    fsio.replace_file(directory / FILE_NAME, meta.to_text().encode("utf-8"), sync=True)
    fsio.fsync_dir(directory)
    for d in made:
        fsio.fsync_dir(d.parent)


def check_log_dirs(dirs: list[Path], node_id: int, cluster_id: str | None = None,
                   metadata_dir: Path | None = None) -> str:
    """Check that every directory is formatted for this node and one cluster (the `cluster_id`
    given, if any); returns the cluster id. When the metadata log dir is formatted, a log dir
    that is missing or empty (a newly added disk) is formatted for the same cluster, as Kafka does."""
    all_dirs = list(dict.fromkeys([Path(d) for d in dirs]
                                  + ([Path(metadata_dir)] if metadata_dir is not None else [])))
    if not all_dirs:
        raise MetaPropertiesError("No log directories configured (log.dirs)")
    found: dict[Path, MetaProperties | None] = {d: read(d) for d in all_dirs}
    meta_dir = Path(metadata_dir) if metadata_dir is not None else all_dirs[0]
    anchor = found[meta_dir]
    if anchor is None:
        raise MetaPropertiesError(f"No {FILE_NAME} found in {meta_dir} (have you run "
                                  f"`samsa storage format`?)")
    expected_cluster = cluster_id if cluster_id is not None else anchor.cluster_id
    seen_dir_ids: dict[str, Path] = {}
    for d, meta in found.items():
        if meta is None:
            if d.exists() and (not d.is_dir() or any(d.iterdir())):
                raise MetaPropertiesError(f"No {FILE_NAME} found in {d} (have you run "
                                          f"`samsa storage format`?)")
            continue
        if meta.cluster_id != expected_cluster:
            raise MetaPropertiesError(f"Invalid cluster.id in {d / FILE_NAME}: expected "
                                      f"{expected_cluster}, but read {meta.cluster_id} (this "
                                      f"directory belongs to another cluster)")
        if meta.node_id != node_id:
            raise MetaPropertiesError(f"Stored node id {meta.node_id} in {d / FILE_NAME} does not "
                                      f"match the configured node.id {node_id}. If you moved your "
                                      f"data, configure the node id it was formatted for; for a new "
                                      f"node, format empty directories.")
        if meta.directory_id is not None:
            if meta.directory_id in seen_dir_ids:
                raise MetaPropertiesError(f"Duplicate directory.id {meta.directory_id} in "
                                          f"{seen_dir_ids[meta.directory_id]} and {d}")
            seen_dir_ids[meta.directory_id] = d
    for d, meta in found.items():
        if meta is None:
            write(d, MetaProperties(expected_cluster, node_id, random_uuid()))
    return expected_cluster


def format_dirs(dirs: list[Path], cluster_id: str, node_id: int) -> None:
    """Write a fresh meta.properties (own directory.id) in each directory: `samsa storage format`,
    and the embedded default node formatting itself on first start."""
    parse_uuid(cluster_id)
    for d in dirs:
        write(d, MetaProperties(cluster_id, node_id, random_uuid()))
