"""Atomic file replacement and Kafka's small text formats (leader-epoch checkpoint, snapshot names).

Every change goes through `samsa.storage.fsio`, so the crash-consistency recorder
(`samsa.testing.crashfs`) sees it.
"""

from __future__ import annotations

from pathlib import Path

from samsa.cluster.quorum.log import OffsetAndEpoch
from samsa.storage import fsio

CHECKPOINT_SUFFIX = ".checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"


def replace_durably(path: Path, data: bytes) -> None:
    """Temp file, fsync, rename over `path`, fsync the directory: afterwards `path` holds `data`
    even after a power loss, and at no point does it hold a torn mix of old and new."""
    fsio.replace_file(path, data, sync=True)
    fsio.fsync_dir(path.parent)


def snapshot_name(sid: OffsetAndEpoch) -> str:
    """Kafka's `<20-digit end offset>-<10-digit epoch>.checkpoint`."""
    return f"{sid.offset:020d}-{sid.epoch:010d}{CHECKPOINT_SUFFIX}"


def parse_snapshot_name(name: str) -> OffsetAndEpoch | None:
    if not name.endswith(CHECKPOINT_SUFFIX):
        return None
    stem = name[: -len(CHECKPOINT_SUFFIX)]
    off, sep, ep = stem.partition("-")
    if not sep or len(off) != 20 or len(ep) != 10 or not off.isdigit() or not ep.isdigit():
        return None
    return OffsetAndEpoch(int(off), int(ep))


def encode_epoch_checkpoint(epochs: list[tuple[int, int]]) -> bytes:
    """Kafka's leader-epoch-checkpoint: version 0, the entry count, then `epoch startOffset`."""
    lines = ["0", str(len(epochs))] + [f"{e} {o}" for e, o in epochs]
    return ("\n".join(lines) + "\n").encode()


def decode_epoch_checkpoint(data: bytes) -> list[tuple[int, int]]:
    """Parse a leader-epoch-checkpoint; ValueError when malformed."""
    lines = data.decode().splitlines()
    if len(lines) < 2 or lines[0].strip() != "0":
        raise ValueError("unsupported leader-epoch-checkpoint version")
    count = int(lines[1])
    if len(lines) - 2 != count:
        raise ValueError(f"leader-epoch-checkpoint claims {count} entries, holds {len(lines) - 2}")
    out = []
    for line in lines[2:]:
        e, o = line.split()
        out.append((int(e), int(o)))
    return out
