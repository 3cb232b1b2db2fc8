"""The quorum's RPCs as plain dataclasses, field for field after Kafka's KRaft messages.

A network driver maps them to kio's classes: Vote (api key 52), BeginQuorumEpoch (53),
EndQuorumEpoch (54), Fetch (1, the replica fields), DescribeQuorum (55), FetchSnapshot (59). The
topic/partition nesting is left out (one partition, `__cluster_metadata`-0). Fields marked *echo*
are not on the wire: the driver copies them into a response from the request it answers (it keeps
one in-flight request per destination and kind, as Kafka's RaftClient does), so the core can tell
a late answer to an old request from the answer to the current one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from samsa.cluster.quorum.log import Entry, OffsetAndEpoch

NONE = 0
NOT_LEADER_OR_FOLLOWER = 6
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75
INCONSISTENT_VOTER_SET = 94
SNAPSHOT_NOT_FOUND = 98
POSITION_OUT_OF_RANGE = 99
INCONSISTENT_CLUSTER_ID = 104

NO_LEADER = -1


@dataclass(frozen=True, slots=True)
class VoteRequest:
    cluster_id: str | None
    replica_epoch: int  # the candidate's epoch (a pre-vote's: the prospective's current epoch)
    replica_id: int
    voter_id: int
    last_offset_epoch: int
    last_offset: int
    pre_vote: bool  # KIP-996: asks "would you vote for me?" without changing anyone's state


@dataclass(frozen=True, slots=True)
class VoteResponse:
    error_code: int
    leader_id: int
    leader_epoch: int
    vote_granted: bool
    pre_vote: bool  # echo


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochRequest:
    cluster_id: str | None
    voter_id: int
    leader_id: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochResponse:
    error_code: int
    leader_id: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class EndQuorumEpochRequest:
    cluster_id: str | None
    leader_id: int
    leader_epoch: int
    preferred_successors: tuple[int, ...]  # the resigning leader's voters, best replicated first


@dataclass(frozen=True, slots=True)
class EndQuorumEpochResponse:
    error_code: int
    leader_id: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class FetchRequest:
    cluster_id: str | None
    replica_id: int
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    max_wait_ms: int


@dataclass(frozen=True, slots=True)
class FetchResponse:
    error_code: int
    leader_id: int
    leader_epoch: int
    high_watermark: int  # -1 while the leader does not know it in its epoch
    log_start_offset: int
    records: tuple[Entry, ...] = ()
    diverging_epoch: OffsetAndEpoch | None = None  # DivergingEpoch: (EndOffset, Epoch)
    snapshot_id: OffsetAndEpoch | None = None  # SnapshotId: fetch below log start, load this
    fetch_offset: int = -1  # echo
    last_fetched_epoch: int = -1  # echo


@dataclass(frozen=True, slots=True)
class FetchSnapshotRequest:
    cluster_id: str | None
    replica_id: int
    current_leader_epoch: int
    snapshot_id: OffsetAndEpoch
    position: int
    max_bytes: int


@dataclass(frozen=True, slots=True)
class FetchSnapshotResponse:
    error_code: int
    leader_id: int
    leader_epoch: int
    snapshot_id: OffsetAndEpoch
    size: int
    position: int
    unaligned_records: bytes = b""


@dataclass(frozen=True, slots=True)
class DescribeQuorumRequest:
    pass


@dataclass(frozen=True, slots=True)
class ReplicaState:
    replica_id: int
    log_end_offset: int
    last_fetch_timestamp: int
    last_caught_up_timestamp: int


@dataclass(frozen=True, slots=True)
class DescribeQuorumResponse:
    error_code: int
    leader_id: int
    leader_epoch: int
    high_watermark: int
    current_voters: tuple[ReplicaState, ...] = ()
    observers: tuple[ReplicaState, ...] = ()


Request = VoteRequest | BeginQuorumEpochRequest | EndQuorumEpochRequest | FetchRequest | FetchSnapshotRequest


@dataclass(frozen=True, slots=True)
class RequestFailed:
    """Not an RPC: the driver tells the sender that `request` could not be delivered or answered
    (connection refused or dropped). The core retries after `controller.quorum.retry.backoff.ms`
    instead of waiting for `controller.quorum.request.timeout.ms`, as Kafka's client does."""

    request: Request


Body = (
    RequestFailed
    | VoteRequest
    | VoteResponse
    | BeginQuorumEpochRequest
    | BeginQuorumEpochResponse
    | EndQuorumEpochRequest
    | EndQuorumEpochResponse
    | FetchRequest
    | FetchResponse
    | FetchSnapshotRequest
    | FetchSnapshotResponse
    | DescribeQuorumRequest
    | DescribeQuorumResponse
)


@dataclass(frozen=True, slots=True)
class Message:
    """One RPC between two nodes (a request, or the response to one)."""

    src: int
    dst: int
    body: Body = field()
