"""KRaft's `quorum-state` file: the epoch, leader and vote the core must not forget.

Stored as Kafka's QuorumStateData (version 0) in JSON with a `data_version` field, replaced
atomically and durably (`files.replace_durably`) before the node sends anything of the same step.
A missing file is a fresh node; an unreadable one is an error: silently starting fresh would let a
node vote twice in one epoch.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from samsa.cluster.quorum.disk.files import replace_durably
from samsa.cluster.quorum.state import QuorumStateRecord
from samsa.storage import fsio

FILE_NAME = "quorum-state"
DATA_VERSION = 0
NONE_ID = -1


class CorruptQuorumStateError(Exception):
    """The quorum-state file exists but cannot be trusted; an operator must look at it."""


class FileQuorumStateStore:
    """Reads and writes `<metadata log dir>/quorum-state`."""

    def __init__(self, directory: Path, voters: Iterable[int] = ()) -> None:
        self.path = directory / FILE_NAME
        self.voters = sorted(voters)

    def read(self) -> QuorumStateRecord | None:
        """The last durable record; None when the file does not exist (a fresh node)."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return None
        try:
            doc = json.loads(raw)
            if not isinstance(doc, dict):
                raise ValueError("not a JSON object")
            version = doc.get("data_version")
            if version != DATA_VERSION:
                raise ValueError(f"unsupported data_version {version!r}")
            epoch = _int(doc, "leaderEpoch")
            leader = _int(doc, "leaderId")
            voted = _int(doc, "votedId")
        except (ValueError, UnicodeDecodeError) as e:
            raise CorruptQuorumStateError(f"{self.path}: {e}") from e
        if epoch < 0:
            raise CorruptQuorumStateError(f"{self.path}: negative leaderEpoch {epoch}")
        return QuorumStateRecord(
            epoch,
            None if leader == NONE_ID else leader,
            None if voted == NONE_ID else voted,
        )

    def write(self, rec: QuorumStateRecord) -> None:
        """Replace the file; returns once the record survives a power loss."""
        doc = {
            "leaderId": NONE_ID if rec.leader_id is None else rec.leader_id,
            "leaderEpoch": rec.epoch,
            "votedId": NONE_ID if rec.voted_id is None else rec.voted_id,
            "appliedOffset": 0,
            "currentVoters": [{"voterId": v} for v in self.voters] or None,
            "data_version": DATA_VERSION,
        }
        made = fsio.makedirs(self.path.parent)
        for d in made:
            fsio.fsync_dir(d.parent)
        replace_durably(self.path, json.dumps(doc).encode())


def _int(doc: dict[str, object], key: str) -> int:
    v = doc.get(key)
    if not isinstance(v, int) or isinstance(v, bool):
        raise ValueError(f"field {key!r} is {v!r}, not an integer")
    return v
