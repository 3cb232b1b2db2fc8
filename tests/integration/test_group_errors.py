"""Group coordinator error semantics over the raw protocol (Kafka's codes), and admin APIs:
ListGroups (with state filter), DescribeGroups, DeleteGroups, OffsetDelete, OffsetFetch."""

from __future__ import annotations

import struct

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.testing import SamsaBroker
from tests.wire import Wire

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def broker() -> SamsaBroker:  # type: ignore[misc]
    with SamsaBroker(overrides={"group.initial.rebalance.delay.ms": "0"}) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic("ge", 2, 1)])["ge"].result(10)
        p = Producer({"bootstrap.servers": b.bootstrap})
        p.produce("ge", b"x")
        p.flush(10)
        yield b


def subscription(*topics: str) -> bytes:
    body = struct.pack(">hi", 0, len(topics))
    for t in topics:
        body += struct.pack(">h", len(t)) + t.encode()
    return body + struct.pack(">i", -1)


def join(w: Wire, group: str, member: str = "", session: int = 10000, instance: str | None = None):  # type: ignore[no-untyped-def]
    return w.request(11, 5, {"group_id": group, "session_timeout": session,
                             "rebalance_timeout": 10000, "member_id": member,
                             "group_instance_id": instance, "protocol_type": "consumer",
                             "protocols": [{"name": "range", "metadata": subscription("ge")}]})


def joined_member(w: Wire, group: str) -> tuple[str, int]:
    r = join(w, group)
    assert int(r.error_code) == 79  # MEMBER_ID_REQUIRED (KIP-394)
    r = join(w, group, r.member_id)
    assert int(r.error_code) == 0 and r.leader == r.member_id
    s = w.request(14, 3, {"group_id": group, "generation_id": r.generation_id,
                          "member_id": r.member_id, "group_instance_id": None,
                          "assignments": [{"member_id": r.member_id, "assignment": b"a"}]})
    assert int(s.error_code) == 0 and s.assignment == b"a"
    return r.member_id, r.generation_id


def commit(w: Wire, group: str, member: str, gen: int, topic: str = "ge", p: int = 0,
           meta: str = "") -> int:
    r = w.request(8, 8, {"group_id": group, "generation_id_or_member_epoch": gen,
                         "member_id": member, "group_instance_id": None,
                         "topics": [{"name": topic, "partitions": [
                             {"partition_index": p, "committed_offset": 1,
                              "committed_leader_epoch": -1, "committed_metadata": meta}]}]})
    return int(r.topics[0].partitions[0].error_code)


def test_join_validation(broker: SamsaBroker) -> None:
    w = Wire(broker.bootstrap)
    assert int(join(w, "").error_code) == 24  # INVALID_GROUP_ID
    assert int(join(w, "gv", session=10).error_code) == 26  # INVALID_SESSION_TIMEOUT
    assert int(join(w, "gv", member="who-is-this").error_code) == 25  # UNKNOWN_MEMBER_ID
    member, gen = joined_member(w, "gv")
    other = w.request(11, 5, {"group_id": "gv", "session_timeout": 10000,
                              "rebalance_timeout": 10000, "member_id": "",
                              "group_instance_id": None, "protocol_type": "other",
                              "protocols": [{"name": "x", "metadata": b""}]})
    assert int(other.error_code) == 23  # INCONSISTENT_GROUP_PROTOCOL


def test_heartbeat_and_sync_errors(broker: SamsaBroker) -> None:
    w = Wire(broker.bootstrap)
    member, gen = joined_member(w, "gh")

    def hb(group: str, m: str, g: int) -> int:
        return int(w.request(12, 3, {"group_id": group, "generation_id": g, "member_id": m,
                                     "group_instance_id": None}).error_code)

    assert hb("gh", member, gen) == 0
    assert hb("gh", member, gen + 5) == 22  # ILLEGAL_GENERATION
    assert hb("gh", "nobody", gen) == 25
    assert hb("no-such-group", member, gen) == 25
    s = w.request(14, 3, {"group_id": "gh", "generation_id": gen + 1, "member_id": member,
                          "group_instance_id": None, "assignments": []})
    assert int(s.error_code) == 22


def test_commit_errors_and_the_coordinator_keeps_serving(broker: SamsaBroker) -> None:
    w = Wire(broker.bootstrap)
    member, gen = joined_member(w, "gc")
    assert commit(w, "gc", member, gen) == 0
    assert commit(w, "gc", member, gen, topic="missing") == 3  # UNKNOWN_TOPIC_OR_PARTITION
    assert commit(w, "gc", member, gen, p=7) == 3
    assert commit(w, "gc", member, gen + 1) == 22  # ILLEGAL_GENERATION
    assert commit(w, "gc", "stranger", gen) == 25  # UNKNOWN_MEMBER_ID
    assert commit(w, "gc", member, gen, meta="m" * 5000) == 12  # OFFSET_METADATA_TOO_LARGE
    assert commit(w, "unknown-group", "x", 3) == 22  # generation >= 0 for an unknown group
    assert commit(w, "standalone", "", -1) == 0  # simple consumer commit (no group management)
    # other groups are unaffected
    assert commit(w, "gc", member, gen, p=1) == 0
    f = w.request(9, 7, {"group_id": "gc", "topics": None, "require_stable": False})
    got = {(t.name, p.partition_index): p.committed_offset for t in f.topics for p in t.partitions}
    assert got == {("ge", 0): 1, ("ge", 1): 1}
    f = w.request(9, 7, {"group_id": "never-seen", "topics": [
        {"name": "ge", "partition_indexes": [0]}], "require_stable": False})
    assert f.topics[0].partitions[0].committed_offset == -1


def test_list_describe_delete_groups_and_offset_delete(broker: SamsaBroker) -> None:
    w = Wire(broker.bootstrap)
    member, gen = joined_member(w, "gd")
    assert commit(w, "gd", member, gen) == 0
    lg = w.request(16, 4, {"states_filter": ["Stable"]})
    assert "gd" in {g.group_id for g in lg.groups}
    assert all(g.group_state == "Stable" for g in lg.groups)
    d = w.request(15, 5, {"groups": ["gd", "ghost"], "include_authorized_operations": False})
    gd, ghost = d.groups
    assert gd.group_state == "Stable" and gd.protocol_data == "range"
    assert [m.member_id for m in gd.members] == [member] and gd.members[0].member_assignment == b"a"
    assert ghost.group_state == "Dead"
    dg = w.request(42, 2, {"groups_names": ["gd", "ghost"]})
    assert [int(r.error_code) for r in dg.results] == [68, 69]  # NON_EMPTY_GROUP, NOT_FOUND
    od = w.request(47, 0, {"group_id": "gd", "topics": [
        {"name": "ge", "partitions": [{"partition_index": 0}]}]})
    assert int(od.topics[0].partitions[0].error_code) == 86  # GROUP_SUBSCRIBED_TO_TOPIC
    lv = w.request(13, 3, {"group_id": "gd", "members": [
        {"member_id": member, "group_instance_id": None}]})
    assert int(lv.error_code) == 0 and int(lv.members[0].error_code) == 0
    od = w.request(47, 0, {"group_id": "gd", "topics": [
        {"name": "ge", "partitions": [{"partition_index": 0}]}]})
    assert int(od.topics[0].partitions[0].error_code) == 0
    dg = w.request(42, 2, {"groups_names": ["gd"]})
    assert int(dg.results[0].error_code) == 0
    assert "gd" not in {g.group_id for g in w.request(16, 4, {"states_filter": []}).groups}


def test_static_member_fencing(broker: SamsaBroker) -> None:
    w = Wire(broker.bootstrap)
    r = join(w, "gs", instance="i1")
    assert int(r.error_code) == 0
    first = r.member_id
    s = w.request(14, 3, {"group_id": "gs", "generation_id": r.generation_id, "member_id": first,
                          "group_instance_id": "i1",
                          "assignments": [{"member_id": first, "assignment": b"A"}]})
    assert int(s.error_code) == 0
    again = join(w, "gs", instance="i1")  # the same instance restarts: new member id, no rebalance
    assert int(again.error_code) == 0 and again.member_id != first
    assert again.generation_id == r.generation_id
    hb = w.request(12, 3, {"group_id": "gs", "generation_id": r.generation_id,
                           "member_id": first, "group_instance_id": "i1"})
    assert int(hb.error_code) == 82  # FENCED_INSTANCE_ID


def test_deleting_a_topic_forgets_its_committed_offsets(broker: SamsaBroker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("gone", 1, 1)])["gone"].result(10)
    w = Wire(broker.bootstrap)
    assert commit(w, "gf", "", -1, topic="gone") == 0
    admin.delete_topics(["gone"])["gone"].result(10)
    admin.create_topics([NewTopic("gone", 1, 1)])["gone"].result(10)
    f = w.request(9, 7, {"group_id": "gf", "topics": [
        {"name": "gone", "partition_indexes": [0]}], "require_stable": False})
    assert f.topics[0].partitions[0].committed_offset == -1  # not inherited by the new topic
