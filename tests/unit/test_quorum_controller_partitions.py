"""QuorumController's replication control: AlterPartition (ISR changes from partition leaders),
leader elections (preferred, unclean, automatic) and partition reassignments (KIP-455), with
Kafka's error codes. The controller runs without a quorum (tests/unit/test_quorum_controller.py's
harness) but its records are applied by the real MetadataImage, so epochs and reassignment fields
move as every node would move them."""

from __future__ import annotations

import logging
import uuid
from typing import Any

import pytest

from samsa.cluster.controller.quorum import IsrChange
from samsa.cluster.metadata.image import PartitionState
from samsa.cluster.metadata.records import PartitionChangeRecord, Record
from samsa.protocol.errors import Err
from tests.unit.test_quorum_controller import Harness, run


class ImageHarness(Harness):
    """The harness with the real image's apply."""

    async def propose(self, records: list[Record]) -> int:
        self.batches.append(list(records))
        for r in records:
            self.log.append(r)
            self.image.apply(r, len(self.log) - 1)
        return len(self.log) - 1


def started(brokers: int = 3, **config: str) -> ImageHarness:
    h = ImageHarness(**config)
    run(h.start(brokers))
    return h


def topic(h: ImageHarness, name: str, *assignment: list[int], **configs: str) -> uuid.UUID:
    """A topic whose partitions start with the leader alone in the ISR (as after its followers
    fell behind): these tests grow the ISR with AlterPartition themselves. A new partition's ISR
    is every live replica (test_new_partitions_start_with_every_live_replica_in_sync)."""
    run(h.ctl.create_topic(name, -1, -1, {k.replace("_", "."): v for k, v in configs.items()},
                           assignments=list(enumerate(assignment))))
    for ps in h.image.topics[name].partitions.values():
        ps.isr = (ps.leader,)
    return h.image.topics[name].topic_id


def test_new_partitions_start_with_every_live_replica_in_sync() -> None:
    h = started(4)
    topic_id = run(h.ctl.create_topic("fresh", -1, -1, {}, assignments=[(0, [1, 2, 3])]))
    ps = h.image.topics["fresh"].partitions[0]
    assert h.image.topics["fresh"].topic_id == topic_id
    assert ps.isr == (1, 2, 3) and ps.leader == 1


def part(h: ImageHarness, name: str, p: int = 0) -> PartitionState:
    return h.image.topics[name].partitions[p]


def alter(h: ImageHarness, sender: int, name: str, isr: list[int] | list[tuple[int, int]],
          p: int = 0, *, leader_epoch: int | None = None, partition_epoch: int | None = None,
          recovery: int = 0, broker_epoch: int | None = None,
          topic_id: uuid.UUID | None = None) -> tuple[int, PartitionState | None]:
    """AlterPartition from `sender` with the partition's current epochs unless given; plain ids
    in `isr` are sent with their registered broker epoch (AlterPartition v3)."""
    ps = h.image.topics[name].partitions.get(p) if name in h.image.topics else None
    pairs = [b if isinstance(b, tuple) else (b, h.epochs.get(b, -1)) for b in isr]
    return run(h.ctl.alter_partition(
        sender, h.epochs[sender] if broker_epoch is None else broker_epoch,
        h.image.topics[name].topic_id if topic_id is None else topic_id, p,
        (ps.leader_epoch if ps else 0) if leader_epoch is None else leader_epoch,
        pairs, recovery, (ps.partition_epoch if ps else 0) if partition_epoch is None
        else partition_epoch))


def refused(h: ImageHarness, code: int, *args: Any, **kw: Any) -> None:
    n = len(h.log)
    got = alter(h, *args, **kw)
    assert got == (code, None), Err.name_of(got[0])
    assert len(h.log) == n, "a refused AlterPartition wrote records"


# ---- AlterPartition ---------------------------------------------------------------------------

def test_alter_partition_expands_and_shrinks_the_isr() -> None:
    h = started()
    topic(h, "t", [1, 2, 3])
    before = part(h, "t")
    assert (before.leader, before.isr, before.leader_epoch, before.partition_epoch) == \
        (1, (1,), 0, 0)
    code, st = alter(h, 1, "t", [1, 2, 3])
    assert code == Err.NONE and st is not None
    assert (st.leader, st.isr, st.leader_epoch, st.partition_epoch) == (1, (1, 2, 3), 0, 1)
    assert st.replicas == (1, 2, 3)
    assert h.log[-1] == PartitionChangeRecord(0, h.image.topics["t"].topic_id, isr=(1, 2, 3))
    assert part(h, "t").isr == (1, 2, 3) and part(h, "t").partition_epoch == 1
    # a shrink (metadata.version 3.7: no leader epoch bump) and broker epochs not given (-1)
    code, st = alter(h, 1, "t", [(1, -1), (3, -1)])
    assert code == Err.NONE and st is not None
    assert (st.isr, st.leader_epoch, st.partition_epoch) == ((1, 3), 0, 2)
    # the same ISR again: accepted, nothing written
    n = len(h.log)
    assert alter(h, 1, "t", [1, 3])[0] == Err.NONE
    assert len(h.log) == n


def test_alter_partition_stale_broker_epoch() -> None:
    h = started()
    topic(h, "t", [1, 2, 3])
    refused(h, Err.STALE_BROKER_EPOCH, 1, "t", [1, 2], broker_epoch=h.epochs[1] - 1)
    refused(h, Err.STALE_BROKER_EPOCH, 1, "t", [1, 2], broker_epoch=h.epochs[1] + 1000)
    h.epochs[9] = 5  # never registered
    refused(h, Err.STALE_BROKER_EPOCH, 9, "t", [1, 2])
    # a stale epoch fails the whole request, whatever its partitions
    code, results = run(h.ctl.alter_partitions(1, h.epochs[1] - 1, [
        IsrChange(uuid.uuid4(), 0, 0, ((1, -1),), 0, 0)]))
    assert (code, results) == (Err.STALE_BROKER_EPOCH, [])


def test_alter_partition_unknown_topic_or_partition() -> None:
    h = started()
    topic(h, "t", [1, 2, 3])
    refused(h, Err.UNKNOWN_TOPIC_ID, 1, "t", [1, 2], topic_id=uuid.uuid4())
    refused(h, Err.UNKNOWN_TOPIC_ID, 1, "t", [1, 2], topic_id=uuid.UUID(int=0))
    refused(h, Err.UNKNOWN_TOPIC_OR_PARTITION, 1, "t", [1, 2], p=1, leader_epoch=0,
            partition_epoch=0)


def test_alter_partition_epochs() -> None:
    h = started()
    topic(h, "t", [1, 2, 3])
    assert alter(h, 1, "t", [1, 2])[0] == Err.NONE  # partition epoch 1
    # an older partition epoch: the leader's view is outdated
    refused(h, Err.INVALID_UPDATE_VERSION, 1, "t", [1, 2, 3], partition_epoch=0)
    # newer epochs than the controller's: this controller must be stale
    refused(h, Err.NOT_CONTROLLER, 1, "t", [1, 2, 3], partition_epoch=2)
    refused(h, Err.NOT_CONTROLLER, 1, "t", [1, 2, 3], leader_epoch=1)
    # leadership moves to 2 (1 is fenced): 1's leader epoch is fenced, 2 may change the ISR
    run(h.beat(1, fence=True))
    ps = part(h, "t")
    assert (ps.leader, ps.isr, ps.leader_epoch) == (2, (2,), 1)
    refused(h, Err.FENCED_LEADER_EPOCH, 1, "t", [1, 2], leader_epoch=0)
    assert alter(h, 2, "t", [2, 3])[0] == Err.NONE


def test_alter_partition_from_a_broker_that_is_not_the_leader() -> None:
    h = started()
    topic(h, "t", [1, 2, 3])
    refused(h, Err.INVALID_REQUEST, 2, "t", [1, 2])  # Kafka: INVALID_REQUEST, not the leader
    refused(h, Err.INVALID_REQUEST, 3, "t", [3])


def test_alter_partition_invalid_isr() -> None:
    h = started(4)
    topic(h, "t", [1, 2, 3])
    refused(h, Err.INVALID_REQUEST, 1, "t", [2, 3])        # the leader left out of its ISR
    refused(h, Err.INVALID_REQUEST, 1, "t", [])            # empty
    refused(h, Err.INVALID_REQUEST, 1, "t", [1, 4])        # 4 is not a replica
    refused(h, Err.INVALID_REQUEST, 1, "t", [1, 2, 2])     # a broker twice
    refused(h, Err.INVALID_REQUEST, 1, "t", [1], recovery=7)  # no such recovery state


def test_alter_partition_ineligible_replicas() -> None:
    h = started(4)
    topic(h, "t", [1, 2, 3, 4])
    run(h.beat(2, fence=True))
    refused(h, Err.INELIGIBLE_REPLICA, 1, "t", [1, 2])                 # fenced
    refused(h, Err.INELIGIBLE_REPLICA, 1, "t", [1, (2, -1)])           # fenced, no epoch given
    run(h.beat(3, shut_down=True))
    refused(h, Err.INELIGIBLE_REPLICA, 1, "t", [1, 3])                 # shutting down
    refused(h, Err.INELIGIBLE_REPLICA, 1, "t", [1, (4, h.epochs[4] - 1)])  # old incarnation
    assert alter(h, 1, "t", [1, (4, h.epochs[4])])[0] == Err.NONE
    assert part(h, "t").isr == (1, 4)


def test_alter_partition_leader_recovery_state() -> None:
    """An unclean election leaves the leader RECOVERING; the leader says when it has recovered,
    with an ISR of itself alone, and only then grows it; it can never go back to RECOVERING."""
    h = started(unclean_leader_election_enable="true")
    topic(h, "t", [1, 2, 3])
    run(h.beat(1, fence=True))  # 1 alone in the ISR: 2 takes over uncleanly
    ps = part(h, "t")
    assert (ps.leader, ps.isr, ps.leader_recovery_state) == (2, (2,), 1)
    refused(h, Err.INVALID_REQUEST, 2, "t", [2, 3], recovery=1)  # still recovering: ISR of one
    code, st = alter(h, 2, "t", [2], recovery=0)
    assert code == Err.NONE and st is not None and st.leader_recovery_state == 0
    assert part(h, "t").leader_recovery_state == 0
    refused(h, Err.INVALID_REQUEST, 2, "t", [2], recovery=1)     # RECOVERED -> RECOVERING
    assert alter(h, 2, "t", [2, 3])[0] == Err.NONE


def test_alter_partitions_in_one_batch() -> None:
    h = started()
    tid = topic(h, "t", [1, 2, 3], [2, 3, 1], [1, 3, 2])
    e1 = h.epochs[1]
    code, results = run(h.ctl.alter_partitions(1, e1, [
        IsrChange(tid, 0, 0, ((1, e1), (2, h.epochs[2])), 0, 0),
        IsrChange(tid, 1, 0, ((2, -1), (1, -1)), 0, 0),          # 1 does not lead partition 1
        IsrChange(tid, 2, 0, ((1, e1), (3, -1)), 0, 0),
        IsrChange(tid, 0, 0, ((1, e1),), 0, 0),                  # stale once the first applies
    ]))
    assert code == Err.NONE
    assert [c for c, _ in results] == [Err.NONE, Err.INVALID_REQUEST, Err.NONE,
                                       Err.INVALID_UPDATE_VERSION]
    assert len(h.batches[-1]) == 2  # the accepted changes, written together
    assert part(h, "t", 0).isr == (1, 2) and part(h, "t", 2).isr == (1, 3)


def test_fenced_leader_with_unclean_election_logs_a_warning(
        caplog: pytest.LogCaptureFixture) -> None:
    h = started()
    topic(h, "clean", [1, 2, 3])
    topic(h, "dirty", [1, 2, 3], unclean_leader_election_enable="true")
    with caplog.at_level(logging.WARNING, logger="samsa.controller"):
        run(h.beat(1, fence=True))
    assert part(h, "clean").leader == -1 and part(h, "clean").isr == (1,)
    assert part(h, "dirty").leader == 2 and part(h, "dirty").isr == (2,)
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and "dirty-0" in warned[0] and "may be lost" in warned[0]


# ---- reassignments (KIP-455) ------------------------------------------------------------------

def reassign(h: ImageHarness, *entries: tuple[str, int, list[int] | None]
             ) -> list[tuple[int, str | None]]:
    return run(h.ctl.alter_reassignments(list(entries)))  # type: ignore[no-any-return]


def listed(h: ImageHarness, topics: list[tuple[str, list[int]]] | None = None
           ) -> dict[tuple[str, int], tuple[tuple[int, ...], ...]]:
    return {(name, r.partition): (r.replicas, r.adding, r.removing)
            for name, found in h.ctl.list_reassignments(topics) for r in found}


def test_reassignment_moves_the_leader_once_the_new_replicas_are_in_sync() -> None:
    h = started(4)
    tid = topic(h, "t", [1, 2, 3])
    assert alter(h, 1, "t", [1, 2, 3])[0] == Err.NONE
    assert reassign(h, ("t", 0, [2, 3, 4])) == [(Err.NONE, None)]
    ps = part(h, "t")
    # target first, then the replicas being removed; the ISR and leader as they were
    assert (ps.replicas, ps.adding_replicas, ps.removing_replicas) == ((2, 3, 4, 1), (4,), (1,))
    assert (ps.leader, ps.isr, ps.leader_epoch, ps.partition_epoch) == (1, (1, 2, 3), 0, 2)
    assert h.log[-1] == PartitionChangeRecord(0, tid, replicas=(2, 3, 4, 1),
                                              removing_replicas=(1,), adding_replicas=(4,))
    assert listed(h) == {("t", 0): ((2, 3, 4, 1), (4,), (1,))}
    assert listed(h, [("t", [0, 1]), ("nope", [0])]) == listed(h)
    # the leader's AlterPartition brings 4 into the ISR: the reassignment completes, 1 (the
    # leader) leaves, so leadership moves to the first new replica in the ISR
    assert alter(h, 1, "t", [1, 2, 3, 4]) == (Err.NEW_LEADER_ELECTED, None)
    ps = part(h, "t")
    assert (ps.replicas, ps.isr, ps.adding_replicas, ps.removing_replicas) == \
        ((2, 3, 4), (2, 3, 4), (), ())
    assert (ps.leader, ps.leader_epoch, ps.partition_epoch) == (2, 1, 3)
    assert listed(h) == {}
    refused(h, Err.FENCED_LEADER_EPOCH, 1, "t", [1, 2], leader_epoch=0)


def test_reassignment_keeping_the_leader_bumps_its_epoch() -> None:
    h = started(4)
    topic(h, "t", [1, 2, 3])
    assert alter(h, 1, "t", [1, 2, 3])[0] == Err.NONE
    assert reassign(h, ("t", 0, [1, 2, 4])) == [(Err.NONE, None)]
    assert part(h, "t").adding_replicas == (4,) and part(h, "t").removing_replicas == (3,)
    # 4 not in sync yet: nothing completes
    assert alter(h, 1, "t", [1, 2])[0] == Err.NONE
    assert part(h, "t").replicas == (1, 2, 4, 3)
    code, st = alter(h, 1, "t", [1, 2, 4])
    assert code == Err.NONE and st is not None
    assert (st.replicas, st.isr, st.leader, st.leader_epoch) == ((1, 2, 4), (1, 2, 4), 1, 1)
    assert st.adding_replicas == () and st.removing_replicas == ()
    assert part(h, "t") == st


def test_reassignment_within_the_isr_completes_at_once() -> None:
    h = started(4)
    topic(h, "t", [1, 2, 3], [1, 2, 3])
    assert alter(h, 1, "t", [1, 2, 3])[0] == Err.NONE
    assert alter(h, 1, "t", [1, 2, 3], p=1)[0] == Err.NONE
    assert reassign(h, ("t", 0, [3, 2, 1]), ("t", 1, [2, 1])) == [(Err.NONE, None)] * 2
    assert len(h.batches[-1]) == 2
    p0, p1 = part(h, "t", 0), part(h, "t", 1)
    # a new order: same replicas, the leader stays and keeps its epoch
    assert (p0.replicas, p0.isr, p0.leader, p0.leader_epoch) == ((3, 2, 1), (1, 2, 3), 1, 0)
    # a replica leaves: done at once, with a leader epoch bump
    assert (p1.replicas, p1.isr, p1.leader, p1.leader_epoch) == ((2, 1), (1, 2), 1, 1)
    assert listed(h) == {}
    # the current assignment again: nothing to do, nothing written
    n = len(h.log)
    assert reassign(h, ("t", 1, [2, 1])) == [(Err.NONE, None)]
    assert len(h.log) == n


def test_reassignment_cancel_reverts() -> None:
    h = started(4)
    topic(h, "t", [1, 2, 3])
    assert reassign(h, ("t", 0, [2, 3, 4])) == [(Err.NONE, None)]
    assert reassign(h, ("t", 0, None)) == [(Err.NONE, None)]
    ps = part(h, "t")
    assert (ps.replicas, ps.isr, ps.leader, ps.adding_replicas, ps.removing_replicas) == \
        ((2, 3, 1), (1,), 1, (), ())
    assert listed(h) == {}
    assert reassign(h, ("t", 0, None)) == [
        (Err.NO_REASSIGNMENT_IN_PROGRESS, "No partition reassignment is in progress.")]


def test_reassignment_cancel_needing_an_unclean_election() -> None:
    """The only in-sync replica is one being added: going back means electing an out-of-sync
    replica, which only unclean.leader.election.enable allows."""
    h = started(3)
    topic(h, "t", [1], unclean_leader_election_enable="true")
    assert reassign(h, ("t", 0, [2])) == [(Err.NONE, None)]
    assert part(h, "t").adding_replicas == (2,)
    run(h.beat(1, fence=True))  # 1 alone in the ISR: 2 (being added) takes over uncleanly
    ps = part(h, "t")
    assert (ps.leader, ps.isr, ps.replicas, ps.adding_replicas) == (2, (2,), (2, 1), (2,))
    run(h.ctl.alter_topic_configs("t", {"unclean.leader.election.enable": "false"}, False))
    n = len(h.log)
    assert reassign(h, ("t", 0, None)) == [(
        Err.INVALID_REPLICA_ASSIGNMENT, "Unable to revert partition assignment for t:0 because "
        "it would require an unclean leader election.")]
    assert len(h.log) == n
    run(h.ctl.alter_topic_configs("t", {"unclean.leader.election.enable": "true"}, False))
    assert reassign(h, ("t", 0, None)) == [(Err.NONE, None)]
    ps = part(h, "t")
    # back to [1], which is fenced: the partition is offline until 1 returns
    assert (ps.replicas, ps.isr, ps.leader, ps.adding_replicas) == ((1,), (1,), -1, ())


def test_reassignment_errors() -> None:
    h = started(3)
    topic(h, "t", [1, 2])
    n = len(h.log)
    res = reassign(h, ("nope", 0, [1]), ("t", 4, [1]), ("t", 0, [1, 9]), ("t", 0, [1, 1]),
                   ("t", 0, []), ("t", 0, [3]))
    assert res[:5] == [
        (Err.UNKNOWN_TOPIC_OR_PARTITION, "Unable to find a topic named nope."),
        (Err.UNKNOWN_TOPIC_OR_PARTITION, "Unable to find partition t:4."),
        (Err.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes broker 9, "
                                         "but no such broker is registered."),
        (Err.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes the broker 1 "
                                         "more than once."),
        (Err.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes an empty "
                                         "replica list."),
    ]
    assert res[5] == (Err.NONE, None)  # the valid entry is written, the others are not
    assert len(h.log) == n + 1
    # a fenced (but registered) broker is a valid target, as in Kafka
    run(h.beat(2, fence=True))
    assert reassign(h, ("t", 0, [2, 3])) == [(Err.NONE, None)]


# ---- elections --------------------------------------------------------------------------------

def elect(h: ImageHarness, kind: int, partitions: list[tuple[str, list[int]]] | None
          ) -> dict[tuple[str, int], int]:
    out = run(h.ctl.elect_leaders(kind, partitions))
    return {(name, p): code for name, parts in out for p, code, _ in parts}


def test_preferred_election() -> None:
    h = started()
    topic(h, "t", [1, 2, 3], [1, 2, 3])
    assert alter(h, 1, "t", [1, 2, 3])[0] == Err.NONE
    run(h.beat(1, fence=True))
    assert part(h, "t").leader == 2 and part(h, "t", 1).leader == -1
    run(h.beat(1))  # back: partition 1 (ISR [1]) is led by 1 again; partition 0 stays with 2
    assert part(h, "t").leader == 2 and part(h, "t", 1).leader == 1
    # 1 is not in partition 0's ISR yet
    assert elect(h, 0, [("t", [0, 1, 5]), ("x", [0])]) == {
        ("t", 0): Err.PREFERRED_LEADER_NOT_AVAILABLE, ("t", 1): Err.ELECTION_NOT_NEEDED,
        ("t", 5): Err.UNKNOWN_TOPIC_OR_PARTITION, ("x", 0): Err.UNKNOWN_TOPIC_OR_PARTITION}
    assert alter(h, 2, "t", [2, 3, 1])[0] == Err.NONE
    # every partition: only those that needed an election are in the results
    assert elect(h, 0, None) == {("t", 0): Err.NONE}
    ps = part(h, "t")
    assert (ps.leader, ps.isr, ps.leader_epoch) == (1, (2, 3, 1), 2)
    assert elect(h, 0, [("t", [0])]) == {("t", 0): Err.ELECTION_NOT_NEEDED}
    # the preferred replica shutting down cannot lead
    assert alter(h, 1, "t", [1, 2])[0] == Err.NONE
    run(h.beat(1, shut_down=True))
    assert part(h, "t").leader == 2
    assert elect(h, 0, [("t", [0])]) == {("t", 0): Err.PREFERRED_LEADER_NOT_AVAILABLE}


def test_unclean_election(caplog: pytest.LogCaptureFixture) -> None:
    h = started()
    topic(h, "t", [1, 2, 3])
    topic(h, "s", [3])
    run(h.beat(1, fence=True))
    assert part(h, "t").leader == -1  # unclean elections are off for the topic
    with caplog.at_level(logging.WARNING, logger="samsa.controller"):
        assert elect(h, 1, [("t", [0])]) == {("t", 0): Err.NONE}  # asked for: allowed
    ps = part(h, "t")
    assert (ps.leader, ps.isr, ps.leader_recovery_state) == (2, (2,), 1)
    assert any("may be lost" in r.getMessage() for r in caplog.records)
    assert elect(h, 1, [("t", [0])]) == {("t", 0): Err.ELECTION_NOT_NEEDED}
    run(h.beat(3, fence=True))  # the only replica of s-0: nobody can lead it
    assert elect(h, 1, None) == {("s", 0): Err.ELIGIBLE_LEADERS_NOT_AVAILABLE}


def test_unknown_election_type() -> None:
    from samsa.cluster.controller import ControllerError

    h = started()
    with pytest.raises(ControllerError) as e:
        run(h.ctl.elect_leaders(2, None))
    assert e.value.code == Err.INVALID_REQUEST


def keep_alive(h: ImageHarness, ms: int) -> None:
    h.now += ms
    for b in h.epochs:
        if not h.image.brokers[b].fenced:
            run(h.beat(b))


def test_offline_partition_elected_uncleanly_once_allowed() -> None:
    h = started()
    topic(h, "t", [1, 2])
    run(h.beat(1, fence=True))
    keep_alive(h, 1000)
    run(h.ctl.tick())
    assert part(h, "t").leader == -1
    run(h.ctl.alter_topic_configs("t", {"unclean.leader.election.enable": "true"}, False))
    keep_alive(h, 1000)
    run(h.ctl.tick())
    ps = part(h, "t")
    assert (ps.leader, ps.isr, ps.leader_recovery_state) == (2, (2,), 1)


def test_unclean_election_enabled_cluster_wide() -> None:
    h = started()
    topic(h, "t", [1, 2])
    run(h.ctl.alter_broker_configs({"unclean.leader.election.enable": "true"}, False))
    run(h.beat(1, fence=True))
    assert part(h, "t").leader == 2  # at once, when its leader is fenced
    topic(h, "u", [1, 3], unclean_leader_election_enable="false")  # the topic's own wins
    assert part(h, "u").leader == 3
    run(h.beat(3, fence=True))
    assert part(h, "u").leader == -1


def test_automatic_preferred_leader_rebalance() -> None:
    h = started(leader_imbalance_check_interval_seconds="2")
    topic(h, "t", *([[1, 2]] * 4))
    for p in range(4):
        assert alter(h, 1, "t", [1, 2], p=p)[0] == Err.NONE
    run(h.beat(1, fence=True))
    run(h.beat(1))
    for p in range(4):
        assert part(h, "t", p).leader == 2
        assert alter(h, 2, "t", [2, 1], p=p)[0] == Err.NONE
    keep_alive(h, 1000)
    run(h.ctl.tick())
    assert part(h, "t", 0).leader == 2  # not yet: the check runs every 2 s
    keep_alive(h, 1000)
    run(h.ctl.tick())
    assert all(part(h, "t", p).leader == 1 for p in range(4))


def test_rebalance_disabled_or_below_the_imbalance_percentage() -> None:
    h = started(leader_imbalance_check_interval_seconds="1",
                auto_leader_rebalance_enable="false")
    topic(h, "t", [1, 2])
    assert alter(h, 1, "t", [1, 2])[0] == Err.NONE
    run(h.beat(1, fence=True))
    run(h.beat(1))
    assert alter(h, 2, "t", [2, 1])[0] == Err.NONE
    keep_alive(h, 1000)
    run(h.ctl.tick())
    assert part(h, "t").leader == 2
    # 1 of 11 partitions whose preferred leader is 3 is led elsewhere: 9% <= 10%
    h = started(leader_imbalance_check_interval_seconds="1")
    topic(h, "u", *([[3, 2]] * 11))
    assert alter(h, 3, "u", [3, 2])[0] == Err.NONE
    run(h.beat(3, fence=True))
    run(h.beat(3))
    assert part(h, "u").leader == 2
    assert alter(h, 2, "u", [2, 3])[0] == Err.NONE
    keep_alive(h, 1000)
    run(h.ctl.tick())
    assert part(h, "u").leader == 2


# ---- ControllerClient.alter_partition: the broker's way to the controller -----------------------

class _Node:
    def __init__(self, h: ImageHarness, node_id: int, active: bool) -> None:
        self.controller = h.ctl
        self.node_id = node_id
        self.image = h.image
        self.active = active
        self.leader_id = node_id if active else 99  # the quorum leader (the active controller)


class _WireChannel:
    """Carries a request to the CONTROLLER listener's AlterPartition handler as bytes: encoded
    and decoded with the protocol's own codecs both ways, as a ControllerChannel would."""

    def __init__(self, controller_broker: Any) -> None:
        self.broker = controller_broker
        self.requests: list[Any] = []

    async def request(self, api_key: int, version: int, body: Any,
                      timeout_s: float | None = None) -> Any:
        from kio.index import load_request_schema, load_response_schema
        from kio.serial import entity_reader, entity_writer

        from samsa.broker.handlers import CONTROLLER_HANDLERS
        from samsa.protocol.codec import Chunks, build

        req_cls = load_request_schema(api_key, version)
        out = Chunks()
        entity_writer(req_cls)(out, build(req_cls, body))
        req, _ = entity_reader(req_cls)(b"".join(out), 0)
        self.requests.append(req)
        ctx = type("Ctx", (), {"version": version, "api_key": api_key})()
        answer = await CONTROLLER_HANDLERS[api_key](self.broker, ctx, req)
        resp_cls = load_response_schema(api_key, version)
        out = Chunks()
        entity_writer(resp_cls)(out, build(resp_cls, answer))
        resp, _ = entity_reader(resp_cls)(b"".join(out), 0)
        return resp


def _client(h: ImageHarness, node_id: int, active: bool, channel: Any = None) -> Any:
    from samsa.broker.controller_client import ControllerClient

    broker = type("Broker", (), {})()
    broker.node = _Node(h, node_id, active)
    broker.lifecycle = type("Lifecycle", (), {"broker_epoch": h.epochs[node_id]})()
    broker.controller_channel = lambda: channel
    return ControllerClient(broker)


def test_controller_client_alter_partition_local_and_remote() -> None:
    h = started()
    tid = topic(h, "t", [1, 2, 3], [2, 3, 1])
    # this node (1) is the active controller: a direct call
    local = _client(h, 1, active=True)
    code, st = run(local.alter_partition(tid, 0, 0, [(1, h.epochs[1]), (2, h.epochs[2])], 0, 0))
    assert code == Err.NONE and st is not None and st.isr == (1, 2)
    assert part(h, "t").isr == (1, 2)
    # node 2 is not: AlterPartition v3 over the CONTROLLER listener to the active controller
    active = type("Broker", (), {"node": _Node(h, 1, True)})()
    channel = _WireChannel(active)
    remote = _client(h, 2, active=False, channel=channel)
    code, st = run(remote.alter_partition(tid, 1, 0, [(2, -1), (3, h.epochs[3])], 0, 0))
    assert code == Err.NONE and st is not None
    assert (st.leader, st.isr, st.leader_epoch, st.partition_epoch, st.replicas) == \
        (2, (2, 3), 0, 1, (2, 3, 1))
    sent = channel.requests[-1]
    assert (sent.broker_id, sent.broker_epoch) == (2, h.epochs[2])
    assert [(b.broker_id, b.broker_epoch) for b in
            sent.topics[0].partitions[0].new_isr_with_epochs] == [(2, -1), (3, h.epochs[3])]
    assert part(h, "t", 1).isr == (2, 3)
    # errors come back as codes, whichever way
    assert run(remote.alter_partition(tid, 1, 0, [(2, -1)], 0, 0)) == \
        (Err.INVALID_UPDATE_VERSION, None)
    assert run(remote.alter_partition(uuid.uuid4(), 1, 0, [(2, -1)], 0, 1)) == \
        (Err.UNKNOWN_TOPIC_ID, None)
    remote.broker.lifecycle.broker_epoch = h.epochs[2] - 1
    assert run(remote.alter_partition(tid, 1, 0, [(2, -1)], 0, 1)) == \
        (Err.STALE_BROKER_EPOCH, None)
    # a partition epoch ahead of the controller's: NOT_CONTROLLER, retried until the timeout
    remote.broker.lifecycle.broker_epoch = h.epochs[2]
    assert run(remote.alter_partition(tid, 1, 0, [(2, -1)], 0, 9, timeout_s=0.2)) == \
        (Err.NOT_CONTROLLER, None)
    assert len(channel.requests) >= 6
