"""KRaft's epoch states (after Kafka's QuorumState/EpochState) and the persisted quorum-state record.

Every state holds the leader epoch it lives in. Timers are absolute deadlines in the caller's
milliseconds; the node never reads a clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from samsa.cluster.quorum.log import OffsetAndEpoch
from samsa.cluster.quorum.messages import FetchRequest


@dataclass(frozen=True, slots=True)
class QuorumStateRecord:
    """What must be on disk (fsynced) before the node acts on it: epoch, leader, vote.

    The `quorum-state` file of Kafka. A vote is binding only once this record is durable, so the
    driver writes it before sending any message of the same `Output`.
    """

    epoch: int
    leader_id: int | None
    voted_id: int | None


@dataclass(slots=True)
class Unattached:
    """No leader known in `epoch`; maybe voted (then bound to that candidate for the epoch)."""

    epoch: int
    voted_id: int | None
    election_deadline: int
    bootstrap_at: int = 0  # an observer asks a random voter who leads at this time
    name = "unattached"


@dataclass(slots=True)
class Prospective:
    """KIP-996: asking for pre-votes before bumping the epoch; nobody's state changes."""

    epoch: int
    leader_id: int | None
    voted_id: int | None
    election_deadline: int
    granted: set[int] = field(default_factory=set)
    rejected: set[int] = field(default_factory=set)
    retry_at: dict[int, int] = field(default_factory=dict)  # voters to ask again (failed sends)
    name = "prospective"


@dataclass(slots=True)
class Candidate:
    """Bumped the epoch and voted for itself; waits for a majority, or backs off."""

    epoch: int
    election_deadline: int
    retries: int
    granted: set[int] = field(default_factory=set)
    rejected: set[int] = field(default_factory=set)
    backoff_until: int | None = None
    retry_at: dict[int, int] = field(default_factory=dict)
    unreachable: set[int] = field(default_factory=set)  # voters our Vote could not reach
    name = "candidate"


@dataclass(slots=True)
class ReplicaProgress:
    end_offset: int = -1
    last_fetch_ms: int = -1
    last_caught_up_ms: int = -1


@dataclass(slots=True)
class Parked:
    """A Fetch the leader holds until there is something new (Kafka's long poll)."""

    request: FetchRequest
    deadline: int
    high_watermark: int


@dataclass(slots=True)
class Leader:
    epoch: int
    epoch_start_offset: int
    replicas: dict[int, ReplicaProgress]
    unacked: set[int]  # voters that have neither answered BeginQuorumEpoch nor fetched
    sent_at: dict[int, int]
    check_quorum_deadline: int
    fetched: set[int] = field(default_factory=set)  # voters fetched since the check-quorum reset
    parked: dict[int, Parked] = field(default_factory=dict)
    name = "leader"


@dataclass(slots=True)
class Follower:
    epoch: int
    leader_id: int
    fetch_deadline: int
    inflight: tuple[int, int] | None = None  # (fetch_offset, last_fetched_epoch) of the live Fetch
    inflight_until: int = 0
    retry_at: int = 0
    has_fetched: bool = False  # a successful Fetch in this epoch: then pre-votes are refused
    leader_resigned: bool = False  # EndQuorumEpoch from our leader
    snapshot: tuple[OffsetAndEpoch, bytearray] | None = None  # FetchSnapshot in progress
    name = "follower"


@dataclass(slots=True)
class Resigned:
    """A leader that gave up its epoch (shutdown or check-quorum); it never votes in that epoch."""

    epoch: int
    election_deadline: int
    preferred_successors: tuple[int, ...]
    unacked: set[int]
    sent_at: dict[int, int]
    name = "resigned"


EpochState = Unattached | Prospective | Candidate | Leader | Follower | Resigned
