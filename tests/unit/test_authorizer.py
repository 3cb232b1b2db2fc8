"""StandardAuthorizer semantics of samsa.security.authorizer, ACL records through the metadata
image (encode/decode, snapshot), and CreateAcls/DeleteAcls' record building."""

from __future__ import annotations

import uuid

import pytest

from samsa.cluster.metadata import records as rec
from samsa.cluster.metadata.image import MetadataImage
from samsa.security import acl_control
from samsa.security import authorizer as az
from samsa.security.principal import KafkaPrincipal

ALICE = KafkaPrincipal("User", "alice")
BOB = KafkaPrincipal("User", "bob")


def binding(name: str, op: int, perm: int = az.PERM_ALLOW, principal: str = "User:alice",
            pattern: int = az.P_LITERAL, rtype: int = az.R_TOPIC,
            host: str = "*") -> az.AclBinding:
    return az.AclBinding(rtype, name, pattern, principal, host, op, perm)


def authorizer(*bindings: az.AclBinding, supers: tuple[str, ...] = (),
               allow_if_none: bool = False) -> tuple[az.Authorizer, MetadataImage]:
    image = MetadataImage()
    for b in bindings:
        image.apply(rec.AccessControlEntryRecord(uuid.uuid4(), b.resource_type, b.resource_name,
                                                 b.pattern_type, b.principal, b.host,
                                                 b.operation, b.permission))
    return az.Authorizer(lambda: image.acls, supers, allow_if_none), image


def test_literal_allow_only_for_that_principal_and_operation() -> None:
    a, _ = authorizer(binding("orders", az.OP_READ))
    assert a.authorize(ALICE, "10.0.0.1", az.OP_READ, az.R_TOPIC, "orders")
    assert not a.authorize(BOB, "10.0.0.1", az.OP_READ, az.R_TOPIC, "orders")
    assert not a.authorize(ALICE, "10.0.0.1", az.OP_WRITE, az.R_TOPIC, "orders")
    assert not a.authorize(ALICE, "10.0.0.1", az.OP_READ, az.R_TOPIC, "orders2")
    assert not a.authorize(ALICE, "10.0.0.1", az.OP_READ, az.R_GROUP, "orders")


def test_implied_operations() -> None:
    a, _ = authorizer(binding("t", az.OP_WRITE), binding("c", az.OP_ALTER_CONFIGS))
    assert a.authorize(ALICE, "h", az.OP_DESCRIBE, az.R_TOPIC, "t")  # WRITE implies DESCRIBE
    assert not a.authorize(ALICE, "h", az.OP_READ, az.R_TOPIC, "t")
    assert a.authorize(ALICE, "h", az.OP_DESCRIBE_CONFIGS, az.R_TOPIC, "c")
    assert not a.authorize(ALICE, "h", az.OP_DESCRIBE, az.R_TOPIC, "c")
    for op in (az.OP_READ, az.OP_DELETE, az.OP_ALTER):
        b, _ = authorizer(binding("t", op))
        assert b.authorize(ALICE, "h", az.OP_DESCRIBE, az.R_TOPIC, "t")


def test_all_allows_everything_and_deny_wins() -> None:
    a, _ = authorizer(binding("t", az.OP_ALL), binding("t", az.OP_WRITE, az.PERM_DENY))
    assert a.authorize(ALICE, "h", az.OP_READ, az.R_TOPIC, "t")
    assert not a.authorize(ALICE, "h", az.OP_WRITE, az.R_TOPIC, "t")
    # a DENY of READ does not deny DESCRIBE (implications apply to ALLOW only)
    b, _ = authorizer(binding("t", az.OP_ALL), binding("t", az.OP_READ, az.PERM_DENY))
    assert b.authorize(ALICE, "h", az.OP_DESCRIBE, az.R_TOPIC, "t")
    # DENY ALL beats an ALLOW through a wildcard principal and a prefix
    c, _ = authorizer(binding("t", az.OP_READ, principal="User:*", pattern=az.P_PREFIXED),
                      binding("t", az.OP_ALL, az.PERM_DENY))
    assert not c.authorize(ALICE, "h", az.OP_READ, az.R_TOPIC, "t")
    assert c.authorize(BOB, "h", az.OP_READ, az.R_TOPIC, "tx")


def test_prefixed_and_wildcard_patterns() -> None:
    a, _ = authorizer(binding("fin-", az.OP_READ, pattern=az.P_PREFIXED),
                      binding("*", az.OP_DESCRIBE, principal="User:bob"))
    assert a.authorize(ALICE, "h", az.OP_READ, az.R_TOPIC, "fin-payments")
    assert a.authorize(ALICE, "h", az.OP_READ, az.R_TOPIC, "fin-")
    assert not a.authorize(ALICE, "h", az.OP_READ, az.R_TOPIC, "fi")
    assert not a.authorize(ALICE, "h", az.OP_READ, az.R_TOPIC, "hr-fin-x")
    assert a.authorize(BOB, "h", az.OP_DESCRIBE, az.R_TOPIC, "anything")
    assert not a.authorize(BOB, "h", az.OP_READ, az.R_TOPIC, "anything")
    # a PREFIXED "*" is a prefix, not a wildcard
    b, _ = authorizer(binding("*", az.OP_READ, pattern=az.P_PREFIXED))
    assert not b.authorize(ALICE, "h", az.OP_READ, az.R_TOPIC, "orders")


def test_hosts() -> None:
    a, _ = authorizer(binding("t", az.OP_READ, host="10.0.0.1"))
    assert a.authorize(ALICE, "10.0.0.1", az.OP_READ, az.R_TOPIC, "t")
    assert not a.authorize(ALICE, "10.0.0.2", az.OP_READ, az.R_TOPIC, "t")
    b, _ = authorizer(binding("t", az.OP_READ),
                      binding("t", az.OP_READ, az.PERM_DENY, host="10.0.0.9"))
    assert b.authorize(ALICE, "10.0.0.1", az.OP_READ, az.R_TOPIC, "t")
    assert not b.authorize(ALICE, "10.0.0.9", az.OP_READ, az.R_TOPIC, "t")


def test_super_users_and_no_acl_rule() -> None:
    a, _ = authorizer(binding("t", az.OP_ALL, az.PERM_DENY, principal="User:*"),
                      supers=("User:admin",))
    admin = KafkaPrincipal("User", "admin")
    assert a.authorize(admin, "h", az.OP_WRITE, az.R_TOPIC, "t")
    assert not a.authorize(ALICE, "h", az.OP_WRITE, az.R_TOPIC, "t")
    # no ACL names the resource: allow.everyone.if.no.acl.found decides
    assert not a.authorize(ALICE, "h", az.OP_WRITE, az.R_TOPIC, "other")
    b, _ = authorizer(binding("t", az.OP_READ, principal="User:bob"), allow_if_none=True)
    assert b.authorize(ALICE, "h", az.OP_WRITE, az.R_TOPIC, "other")
    assert not b.authorize(ALICE, "h", az.OP_READ, az.R_TOPIC, "t")  # an ACL exists for t


def test_authorize_any_topic() -> None:
    a, _ = authorizer(binding("t", az.OP_WRITE))
    assert a.authorize_any(ALICE, "h", az.OP_WRITE, az.R_TOPIC)
    assert not a.authorize_any(BOB, "h", az.OP_WRITE, az.R_TOPIC)
    b, _ = authorizer(binding("t", az.OP_WRITE), binding("t", az.OP_WRITE, az.PERM_DENY))
    assert not b.authorize_any(ALICE, "h", az.OP_WRITE, az.R_TOPIC)
    c, _ = authorizer(binding("ab", az.OP_WRITE),
                      binding("a", az.OP_WRITE, az.PERM_DENY, pattern=az.P_PREFIXED))
    assert not c.authorize_any(ALICE, "h", az.OP_WRITE, az.R_TOPIC)


def test_operations_bitfield() -> None:
    a, _ = authorizer(binding("t", az.OP_READ))
    bits = a.operations(ALICE, "h", az.R_TOPIC, "t")
    assert bits == (1 << az.OP_READ) | (1 << az.OP_DESCRIBE)


def test_index_follows_image_changes() -> None:
    a, image = authorizer(binding("t", az.OP_READ))
    assert a.authorize(ALICE, "h", az.OP_READ, az.R_TOPIC, "t")
    (acl_id,) = image.acls
    image.apply(rec.RemoveAccessControlEntryRecord(acl_id))
    assert not a.authorize(ALICE, "h", az.OP_READ, az.R_TOPIC, "t")


def test_records_round_trip_and_snapshot() -> None:
    r = rec.AccessControlEntryRecord(uuid.uuid4(), az.R_GROUP, "g", az.P_PREFIXED, "User:a",
                                     "*", az.OP_READ, az.PERM_ALLOW)
    assert rec.decode(rec.encode(r)) == r
    gone = rec.RemoveAccessControlEntryRecord(r.id)
    assert rec.decode(rec.encode(gone)) == gone
    image = MetadataImage()
    image.apply(r)
    rebuilt = MetadataImage()
    for x in image.to_records():
        rebuilt.apply(rec.decode(rec.encode(x)))
    assert dict(rebuilt.acls) == dict(image.acls)


def test_create_and_delete_records() -> None:
    image = MetadataImage()
    good = binding("t", az.OP_READ)
    bad_op = binding("t", az.OP_ANY)  # a filter's ANY is no operation of an ACL
    bad_pattern = binding("x", az.OP_ALTER, pattern=az.P_MATCH)
    bad_principal = binding("t", az.OP_READ, principal="alice")
    records, results = acl_control.create_records(
        image.acls, [good, good, bad_op, bad_pattern, bad_principal], 42)
    assert [c for c, _ in results] == [0, 0, 42, 42, 42]
    assert len(records) == 1  # the same binding twice is stored once
    for r in records:
        image.apply(r)
    records, results = acl_control.create_records(image.acls, [good], 42)
    assert records == [] and results == [(0, None)]
    flt = az.AclFilter(resource_type=az.R_TOPIC, resource_name="t", pattern_type=az.P_MATCH)
    records, out = acl_control.delete_records(image.acls, [flt, az.AclFilter()], 42)
    assert len(records) == 1 and [len(m) for _, _, m in out] == [1, 1]


def test_filter_match_pattern() -> None:
    lit = binding("orders", az.OP_READ)
    pre = binding("ord", az.OP_READ, pattern=az.P_PREFIXED)
    wild = binding("*", az.OP_READ)
    other = binding("x", az.OP_READ)
    f = az.AclFilter(az.R_TOPIC, "orders", az.P_MATCH)
    assert [f.matches(b) for b in (lit, pre, wild, other)] == [True, True, True, False]
    g = az.AclFilter(az.R_TOPIC, "ord", az.P_PREFIXED)
    assert [g.matches(b) for b in (lit, pre, wild, other)] == [False, True, False, False]


@pytest.mark.parametrize("name,ok", [("", False), (az.STANDARD_AUTHORIZER, True),
                                     ("com.example.Mine", None)])
def test_from_config(name: str, ok: bool | None) -> None:
    conf = {"authorizer.class.name": name, "super.users": "User:a;User:b",
            "allow.everyone.if.no.acl.found": "true"}
    if ok is None:
        with pytest.raises(ValueError):
            az.Authorizer.from_config(conf.get, dict)
        return
    a = az.Authorizer.from_config(conf.get, dict)
    assert (a is not None) == ok
    if a is not None:
        assert a.super_users == {"User:a", "User:b"} and a.allow_if_no_acl


# ---- the handlers' side: samsa.broker.authz on a connection with a principal set directly ----
class _Conn:
    """A connection as handlers see it: its broker (with the authorizer), listener spec,
    principal and peer address."""

    def __init__(self, authorizer: az.Authorizer | None, principal: KafkaPrincipal,
                 controller: bool = False) -> None:
        from types import SimpleNamespace

        self.broker = SimpleNamespace(authorizer=authorizer)
        self.spec = SimpleNamespace(controller=controller)
        self.principal = principal
        self.peer_ip = "127.0.0.1"


def _create_topics_ctx(conn: _Conn, names: list[str]) -> tuple[object, object]:
    from kio.index import load_request_schema

    from samsa.broker.server import RequestContext
    from tests.wire import Wire

    w = Wire.__new__(Wire)
    w.corr = 0
    frame = w.encode(19, 5, {
        "topics": [{"name": n, "num_partitions": 1, "replication_factor": 1, "assignments": [],
                    "configs": []} for n in names], "timeout": 1000, "validate_only": False})
    frame = frame[4:]
    from samsa.protocol.codec import decode_request
    _, req = decode_request(19, 5, frame)
    assert type(req) is load_request_schema(19, 5)
    return RequestContext(19, 5, 1, "t", conn, frame), req  # type: ignore[arg-type]


def test_narrowed_runs_allowed_items_and_answers_the_others() -> None:
    import asyncio

    from samsa.broker import authz
    from samsa.protocol.codec import decode_request

    a, _ = authorizer(binding("ok-", az.OP_CREATE, pattern=az.P_PREFIXED))
    conn = _Conn(a, ALICE)
    ctx, req = _create_topics_ctx(conn, ["ok-1", "no-1", "ok-2"])
    seen: list[list[str]] = []

    async def handler(broker: object, c: object, r: object) -> dict[str, object]:
        names = [t.name for t in r.topics]  # type: ignore[attr-defined]
        seen.append(names)
        # what a forwarding broker would send: the narrowed request, header unchanged
        _, again = decode_request(19, 5, c.frame)  # type: ignore[attr-defined]
        assert [t.name for t in again.topics] == names
        return {"throttle_time": 0, "topics": [{"name": n, "error_code": 0} for n in names]}

    out = asyncio.run(authz.narrowed(
        handler, None, ctx, req, "topics",  # type: ignore[arg-type]
        lambda t: authz.topic(ctx, az.OP_CREATE, t.name),  # type: ignore[arg-type]
        lambda t: {"name": t.name, "error_code": 29}, "topics"))
    assert seen == [["ok-1", "ok-2"]]
    assert [(t["name"], t["error_code"]) for t in out["topics"]] == [
        ("ok-1", 0), ("ok-2", 0), ("no-1", 29)]


def test_checks_skip_nodes_on_controller_listeners_and_absent_authorizer() -> None:
    """On a CONTROLLER listener a node (CLUSTER_ACTION on the cluster: a forwarding broker) is
    not checked again; any other principal is (sec-cluster: it was never checked before)."""
    from samsa.broker import authz
    from samsa.broker.server import RequestContext

    a, _ = authorizer(binding(az.CLUSTER_NAME, az.OP_CLUSTER_ACTION, principal="User:bob",
                              rtype=az.R_CLUSTER))
    denied = RequestContext(3, 12, 1, "t", _Conn(a, ALICE), b"")  # type: ignore[arg-type]
    assert authz.enabled(denied) and not authz.topic(denied, az.OP_DESCRIBE, "t")
    node = RequestContext(3, 12, 1, "t", _Conn(a, BOB, controller=True), b"")  # type: ignore[arg-type]
    assert not authz.enabled(node) and authz.topic(node, az.OP_DESCRIBE, "t")
    client = RequestContext(3, 12, 1, "t", _Conn(a, ALICE, controller=True), b"")  # type: ignore[arg-type]
    assert authz.enabled(client) and not authz.topic(client, az.OP_DESCRIBE, "t")
    off = RequestContext(3, 12, 1, "t", _Conn(None, ALICE), b"")  # type: ignore[arg-type]
    assert authz.topic(off, az.OP_WRITE, "t")
    assert authz.operations(off, az.R_TOPIC, "t") == sum(
        1 << op for op in az.RESOURCE_OPERATIONS[az.R_TOPIC])
    assert authz.operations(off, az.R_TOPIC, "t", asked=False) == az.OPS_NOT_REQUESTED


def test_acl_record_bytes_as_kafka_frames_them() -> None:
    """Kafka's AccessControlEntryRecord is metadata record type 18, RemoveAccessControlEntryRecord
    19 (v0, flexible): frame version, type, version, then the fields and an empty tag section."""
    i = uuid.UUID(int=1)
    r = rec.AccessControlEntryRecord(i, az.R_TOPIC, "t", az.P_LITERAL, "User:a", "*",
                                     az.OP_READ, az.PERM_ALLOW)
    assert rec.encode(r) == (bytes([1, 18, 0]) + i.bytes + bytes([2, 2]) + b"t" + bytes([3, 7])
                             + b"User:a" + bytes([2]) + b"*" + bytes([3, 3, 0]))
    assert rec.encode(rec.RemoveAccessControlEntryRecord(i)) == bytes([1, 19, 0]) + i.bytes + b"\0"
