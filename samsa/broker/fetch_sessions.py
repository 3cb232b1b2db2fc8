"""Incremental fetch sessions (KIP-227).

A client opens a session with a full fetch (session id 0, epoch 0); later fetches (epoch 1, 2, …)
list only partitions that changed and the forgotten ones; the response lists only partitions with
news (records, an error, or a moved high watermark / log start offset). Sessions live in a bounded
broker-wide cache (`max.incremental.fetch.session.cache.slots`), least recently used evicted first.
"""

from __future__ import annotations

import random
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1


@dataclass
class PartitionState:
    """What the session remembers of one partition: the client's request and what we last said."""
    request: Any
    last_hw: int = -2
    last_log_start: int = -2


@dataclass
class FetchSession:
    id: int
    epoch: int  # the epoch the next request must carry
    partitions: OrderedDict[tuple[Any, int], PartitionState] = field(default_factory=OrderedDict)


class FetchSessionCache:
    def __init__(self, slots: int = 1000) -> None:
        self.slots = slots
        self.sessions: OrderedDict[int, FetchSession] = OrderedDict()

    def create(self) -> FetchSession | None:
        if self.slots <= 0:
            return None
        while len(self.sessions) >= self.slots:
            self.sessions.popitem(last=False)
        sid = random.randint(1, 2**31 - 1)
        while sid in self.sessions:
            sid = random.randint(1, 2**31 - 1)
        s = FetchSession(sid, 1)
        self.sessions[sid] = s
        return s

    def get(self, sid: int) -> FetchSession | None:
        s = self.sessions.get(sid)
        if s is not None:
            self.sessions.move_to_end(sid)
        return s

    def remove(self, sid: int) -> None:
        self.sessions.pop(sid, None)
