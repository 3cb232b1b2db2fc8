"""ACLs against a real broker (authorizer.class.name = Kafka's StandardAuthorizer): principals
come from TLS client certificates (User:CN=<name>,OU=eng,O=acme). The matrix drives each API a
client uses with raw requests as `bob`, first without and then with the ACL it needs, and checks
Kafka's error codes; real clients (confluent-kafka) produce, consume and manage ACLs; ACLs
survive kill -9; PREFIXED and DENY ACLs behave as in Kafka."""

from __future__ import annotations

import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from samsa.protocol.records import encode_batch
from samsa.testing import SamsaBroker, free_port
from tests.wire import Wire

tls_mod = pytest.importorskip("samsa.testing.tls")
pytest.importorskip("trustme")

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
BOB = "User:CN=bob,OU=eng,O=acme"
ALICE = "User:CN=alice,OU=eng,O=acme"
# Kafka's error codes
TOPIC_DENIED, GROUP_DENIED, CLUSTER_DENIED, TXN_DENIED, SECURITY_DISABLED = 29, 30, 31, 53, 54
READ, WRITE, DESCRIBE = 3, 4, 8


class Secured:
    def __init__(self, broker: SamsaBroker, tls: Any, ssl_port: int) -> None:
        self.broker, self.tls, self.ssl_port = broker, tls, ssl_port
        self.ssl_bootstrap = f"127.0.0.1:{ssl_port}"

    def admin(self, client: str = "admin") -> AdminClient:
        return AdminClient({"bootstrap.servers": self.ssl_bootstrap, "log_level": 0,
                            **self.tls.confluent(client)})

    def wire(self, client: str) -> Wire:
        w = Wire(self.ssl_bootstrap)
        ctx: ssl.SSLContext = self.tls.ssl_context(client)
        w.sock = ctx.wrap_socket(w.sock, server_hostname="127.0.0.1")
        return w

    def grant(self, principal: str, rtype: ResourceType, name: str, op: AclOperation,
              pattern: ResourcePatternType = ResourcePatternType.LITERAL,
              perm: AclPermissionType = AclPermissionType.ALLOW) -> None:
        b = AclBinding(rtype, name, pattern, principal, "*", op, perm)
        admin = self.admin()  # kept referenced until its futures are done
        for f in admin.create_acls([b], request_timeout=10).values():
            f.result(15)


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    tls = tls_mod.TlsFiles.create(tmp_path_factory.mktemp("acl-tls"),
                                  clients=("admin", "alice", "bob", "dan"))
    plain = free_port()
    overrides, ssl_port = tls_mod.ssl_listener_overrides(tls, plain, client_auth="required", extra={
        "authorizer.class.name": STANDARD,
        "super.users": "User:CN=admin,OU=eng,O=acme"})
    with SamsaBroker(port=plain, overrides=overrides) as b:
        s = Secured(b, tls, ssl_port)
        admin = s.admin()
        for f in admin.create_topics([NewTopic("mx", 1, 1), NewTopic("fin-pay", 1, 1),
                                          NewTopic("hr-pay", 1, 1)]).values():
            f.result(15)
        yield s


def _records(n: int = 1) -> bytes:
    return encode_batch([(b"k", f"v{i}".encode(), [], 1_700_000_000_000 + i) for i in range(n)])


def _produce(w: Wire, topic: str, tid: str | None = None) -> int:
    r = w.request(0, 9, {"transactional_id": tid, "acks": -1, "timeout": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": _records()}]}]})
    return int(r.responses[0].partition_responses[0].error_code)


def _list_offsets(w: Wire, topic: str) -> int:
    r = w.request(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                        "timestamp": -1}]}]})
    return int(r.topics[0].partitions[0].error_code)


def _fetch(w: Wire, topic: str) -> int:
    r = w.request(1, 12, {"replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                          "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                          "topics": [{"topic": topic, "partitions": [
                              {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                               "last_fetched_epoch": -1, "log_start_offset": -1,
                               "partition_max_bytes": 1 << 20}]}],
                          "forgotten_topics_data": [], "rack_id": ""})
    return int(r.responses[0].partitions[0].error_code)


def _metadata(w: Wire, topics: list[str] | None, ops: bool = False) -> dict[str, tuple[int, int]]:
    r = w.request(3, 12, {"topics": None if topics is None else [
        {"name": t, "topic_id": None} for t in topics], "allow_auto_topic_creation": True,
        "include_topic_authorized_operations": ops})
    return {t.name: (int(t.error_code), int(t.topic_authorized_operations)) for t in r.topics}


def dan_denied_scram(secured: Secured) -> bool:
    """dan holds no cluster ACL: DescribeUserScramCredentials is refused."""
    d = secured.wire("dan")
    try:
        return int(d.request(50, 0, {"users": None}).error_code) == CLUSTER_DENIED
    finally:
        d.close()


def test_topic_apis_matrix(secured: Secured) -> None:
    w = secured.wire("bob")
    # no ACL at all: bob may not describe, list offsets, produce or fetch, and does not see mx
    assert _metadata(w, None) == {}
    assert _metadata(w, ["mx"])["mx"][0] == TOPIC_DENIED
    assert _list_offsets(w, "mx") == TOPIC_DENIED
    assert _produce(w, "mx") == TOPIC_DENIED
    assert _fetch(w, "mx") == TOPIC_DENIED
    # DESCRIBE: metadata and list offsets, with the authorized-operations bitfield
    secured.grant(BOB, ResourceType.TOPIC, "mx", AclOperation.DESCRIBE)
    assert _metadata(w, None, ops=True) == {"mx": (0, 1 << DESCRIBE)}
    assert _list_offsets(w, "mx") == 0
    assert _produce(w, "mx") == TOPIC_DENIED
    # WRITE: produce (and, implied, DESCRIBE)
    secured.grant(BOB, ResourceType.TOPIC, "mx", AclOperation.WRITE)
    assert _produce(w, "mx") == 0
    assert _fetch(w, "mx") == TOPIC_DENIED
    secured.grant(BOB, ResourceType.TOPIC, "mx", AclOperation.READ)
    assert _fetch(w, "mx") == 0
    assert _metadata(w, ["mx"], ops=True)["mx"] == (0, (1 << READ) | (1 << WRITE)
                                                     | (1 << DESCRIBE))
    # DENY wins over ALLOW, for this operation only
    secured.grant(BOB, ResourceType.TOPIC, "mx", AclOperation.READ,
                  perm=AclPermissionType.DENY)
    assert _fetch(w, "mx") == TOPIC_DENIED
    assert _produce(w, "mx") == 0
    # auto-creation through Metadata needs CREATE (on the cluster or the topic)
    secured.grant(BOB, ResourceType.TOPIC, "auto-", AclOperation.DESCRIBE,
                  pattern=ResourcePatternType.PREFIXED)
    assert _metadata(w, ["auto-1"])["auto-1"][0] == TOPIC_DENIED
    admin = secured.admin()
    assert "auto-1" not in admin.list_topics(timeout=10).topics
    secured.grant(BOB, ResourceType.TOPIC, "auto-", AclOperation.CREATE,
                  pattern=ResourcePatternType.PREFIXED)
    assert _metadata(w, ["auto-1"])["auto-1"][0] in (0, 5)  # created (leader may be pending)
    assert "auto-1" in admin.list_topics(timeout=10).topics
    w.close()


def test_prefixed_acls(secured: Secured) -> None:
    secured.grant(ALICE, ResourceType.TOPIC, "fin-", AclOperation.WRITE,
                  pattern=ResourcePatternType.PREFIXED)
    w = secured.wire("alice")
    assert _produce(w, "fin-pay") == 0
    assert _produce(w, "hr-pay") == TOPIC_DENIED
    assert set(_metadata(w, None)) == {"fin-pay"}
    # a prefixed DENY covers what a literal ALLOW grants
    secured.grant(ALICE, ResourceType.TOPIC, "hr-pay", AclOperation.WRITE)
    assert _produce(w, "hr-pay") == 0
    secured.grant(ALICE, ResourceType.TOPIC, "hr", AclOperation.ALL,
                  pattern=ResourcePatternType.PREFIXED, perm=AclPermissionType.DENY)
    assert _produce(w, "hr-pay") == TOPIC_DENIED
    w.close()


def test_group_apis_matrix(secured: Secured) -> None:
    secured.grant(BOB, ResourceType.TOPIC, "mx", AclOperation.DESCRIBE)
    w = secured.wire("bob")
    r = w.request(10, 3, {"key": "gx", "key_type": 0})
    assert r.error_code == GROUP_DENIED
    join = w.request(11, 5, {"group_id": "gx", "session_timeout": 10000,
                             "rebalance_timeout": 10000, "member_id": "", "group_instance_id": None,
                             "protocol_type": "consumer",
                             "protocols": [{"name": "range", "metadata": b""}]})
    assert join.error_code == GROUP_DENIED

    def commit() -> int:
        c = w.request(8, 8, {"group_id": "gx", "generation_id_or_member_epoch": -1,
                             "member_id": "", "group_instance_id": None, "topics": [
                                 {"name": "mx", "partitions": [
                                     {"partition_index": 0, "committed_offset": 1,
                                      "committed_leader_epoch": -1,
                                      "committed_metadata": ""}]}]})
        return int(c.topics[0].partitions[0].error_code)

    def fetch_offsets() -> Any:
        return w.request(9, 7, {"group_id": "gx", "topics": [
            {"name": "mx", "partition_indexes": [0]}], "require_stable": False})

    assert commit() == GROUP_DENIED
    assert fetch_offsets().error_code == GROUP_DENIED
    secured.grant(BOB, ResourceType.GROUP, "gx", AclOperation.READ)
    assert w.request(10, 3, {"key": "gx", "key_type": 0}).error_code == 0
    # READ on the group but no READ on the topic: the topic's partitions are refused
    secured.grant(BOB, ResourceType.TOPIC, "mx", AclOperation.READ,
                  perm=AclPermissionType.DENY)
    assert commit() == TOPIC_DENIED
    f = fetch_offsets()
    assert f.error_code == 0
    d = w.request(15, 5, {"groups": ["gx"], "include_authorized_operations": True})
    assert d.groups[0].error_code == 0
    assert w.request(42, 2, {"groups_names": ["gx"]}).results[0].error_code == GROUP_DENIED
    w.close()


def test_transactions_and_admin_matrix(secured: Secured) -> None:
    w = secured.wire("bob")
    init = {"transactional_id": "tx-1", "transaction_timeout": 60000, "producer_id": -1,
            "producer_epoch": -1}
    assert w.request(22, 4, init).error_code == TXN_DENIED
    assert w.request(10, 3, {"key": "tx-1", "key_type": 1}).error_code == TXN_DENIED
    secured.grant(BOB, ResourceType.TRANSACTIONAL_ID, "tx-", AclOperation.WRITE,
                  pattern=ResourcePatternType.PREFIXED)
    assert w.request(10, 3, {"key": "tx-1", "key_type": 1}).error_code == 0
    deadline = time.monotonic() + 20
    while (code := w.request(22, 4, init).error_code) in (14, 15, 16) \
            and time.monotonic() < deadline:
        time.sleep(0.2)  # the transaction coordinator is still loading its new partition
    assert code == 0
    # idempotent producer ids: IDEMPOTENT_WRITE on the cluster or WRITE on some topic
    a = secured.wire("dan")
    idem = {"transactional_id": None, "transaction_timeout": 60000, "producer_id": -1,
            "producer_epoch": -1}
    assert a.request(22, 4, idem).error_code == CLUSTER_DENIED
    secured.grant("User:CN=dan,OU=eng,O=acme", ResourceType.TOPIC, "mx", AclOperation.WRITE)
    assert a.request(22, 4, idem).error_code == 0
    # ListTransactions lists only the transactional ids the principal may describe
    lt = {"state_filters": [], "producer_id_filters": []}
    assert "tx-1" in {t.transactional_id for t in w.request(66, 0, lt).transaction_states}
    assert "tx-1" not in {t.transactional_id for t in a.request(66, 0, lt).transaction_states}
    # admin: create/delete topics, configs, cluster
    ct = {"topics": [{"name": "adm-1", "num_partitions": 1, "replication_factor": 1,
                      "assignments": [], "configs": []}], "timeout": 10000,
          "validate_only": False}
    assert w.request(19, 5, ct).topics[0].error_code == TOPIC_DENIED
    secured.grant(BOB, ResourceType.TOPIC, "adm-", AclOperation.CREATE,
                  pattern=ResourcePatternType.PREFIXED)
    made = w.request(19, 5, ct).topics[0]
    # created, but its settings are not shown without DESCRIBE_CONFIGS (Kafka)
    assert made.error_code == 0 and made.topic_config_error_code == TOPIC_DENIED
    assert made.configs in (None, ())
    dt = {"topic_names": ["adm-1"], "timeout": 10000}
    assert w.request(20, 5, dt).responses[0].error_code == TOPIC_DENIED
    dc = {"resources": [{"resource_type": 2, "resource_name": "adm-1",
                         "configuration_keys": None},
                        {"resource_type": 4, "resource_name": "", "configuration_keys": None}],
          "include_synonyms": False, "include_documentation": False}
    assert [r.error_code for r in w.request(32, 4, dc).results] == [TOPIC_DENIED, CLUSTER_DENIED]
    ia = {"resources": [{"resource_type": 2, "resource_name": "adm-1", "configs": [
        {"name": "retention.ms", "config_operation": 0, "value": "60000"}]}],
        "validate_only": False}
    assert w.request(44, 1, ia).responses[0].error_code == TOPIC_DENIED
    secured.grant(BOB, ResourceType.TOPIC, "adm-1", AclOperation.ALTER_CONFIGS)
    assert w.request(44, 1, ia).responses[0].error_code == 0
    # ALTER_CONFIGS implies DESCRIBE_CONFIGS
    assert [r.error_code for r in w.request(32, 4, dc).results] == [0, CLUSTER_DENIED]
    secured.grant(BOB, ResourceType.TOPIC, "adm-1", AclOperation.DELETE)
    assert w.request(20, 5, dt).responses[0].error_code == 0
    c = w.request(60, 1, {"include_cluster_authorized_operations": True, "endpoint_type": 1})
    assert c.error_code == 0 and c.cluster_authorized_operations == 0
    sup = secured.wire("admin")  # a super user: every cluster operation
    c = sup.request(60, 1, {"include_cluster_authorized_operations": True, "endpoint_type": 1})
    assert c.cluster_authorized_operations == sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))
    sup.close()
    acl = {"creations": [{"resource_type": 2, "resource_name": "x", "resource_pattern_type": 3,
                          "principal": BOB, "host": "*", "operation": 2, "permission_type": 3}]}
    assert w.request(30, 3, acl).results[0].error_code == CLUSTER_DENIED
    # cluster-wide APIs: DescribeLogDirs, ListPartitionReassignments (DESCRIBE), ElectLeaders
    # (ALTER) on the cluster
    assert w.request(35, 4, {"topics": None}).error_code == CLUSTER_DENIED
    assert w.request(46, 0, {"timeout": 10000, "topics": None}).error_code == CLUSTER_DENIED
    assert w.request(43, 2, {"election_type": 0, "topic_partitions": None,
                             "timeout": 10000}).error_code == CLUSTER_DENIED
    secured.grant(BOB, ResourceType.BROKER, "kafka-cluster", AclOperation.DESCRIBE)
    assert w.request(35, 4, {"topics": None}).error_code == 0
    assert w.request(46, 0, {"timeout": 10000, "topics": None}).error_code == 0
    # client quotas: DESCRIBE_CONFIGS / ALTER_CONFIGS on the cluster
    dq = {"components": [], "strict": False}
    assert w.request(48, 1, dq).error_code == CLUSTER_DENIED
    aq = {"entries": [{"entity": [{"entity_type": "user", "entity_name": "bob"}], "ops": [
        {"key": "producer_byte_rate", "value": 1024.0, "remove": False}]}],
        "validate_only": False}
    assert w.request(49, 1, aq).entries[0].error_code == CLUSTER_DENIED
    secured.grant(BOB, ResourceType.BROKER, "kafka-cluster", AclOperation.ALTER_CONFIGS)
    assert w.request(49, 1, aq).entries[0].error_code == 0
    assert w.request(48, 1, dq).error_code == 0  # implied DESCRIBE_CONFIGS
    # SCRAM credentials (KIP-554): DESCRIBE / ALTER on the cluster; bob now has DESCRIBE only
    assert w.request(50, 0, {"users": None}).error_code == 0
    up = {"deletions": [], "upsertions": [{"name": "zed", "mechanism": 1, "iterations": 8192,
                                          "salt": b"s" * 16, "salted_password": b"p" * 32}]}
    assert w.request(51, 0, up).results[0].error_code == CLUSTER_DENIED
    assert dan_denied_scram(secured)
    # DescribeTopicPartitions: topics bob may not describe are refused, with bitfields
    secured.grant(BOB, ResourceType.TOPIC, "mx", AclOperation.DESCRIBE)
    dtp = w.request(75, 0, {"topics": [{"name": "mx"}, {"name": "hr-pay"}],
                            "response_partition_limit": 100, "cursor": None})
    by = {t.name: (int(t.error_code), t.topic_authorized_operations) for t in dtp.topics}
    assert by["hr-pay"][0] == TOPIC_DENIED
    assert by["mx"][0] == 0 and by["mx"][1] & (1 << DESCRIBE)
    w.close()
    a.close()


def test_real_clients_produce_and_consume(secured: Secured) -> None:
    secured.grant(ALICE, ResourceType.TOPIC, "fin-", AclOperation.ALL,
                  pattern=ResourcePatternType.PREFIXED)
    secured.grant(ALICE, ResourceType.GROUP, "fin-readers", AclOperation.READ)
    conf = {"bootstrap.servers": secured.ssl_bootstrap, "log_level": 0,
            **secured.tls.confluent("alice")}
    p = Producer({**conf, "message.timeout.ms": 10000})
    errors: list[Any] = []
    for i in range(5):
        p.produce("fin-pay", f"m{i}".encode(), on_delivery=lambda e, m: errors.append(e))
    p.flush(15)
    assert errors == [None] * 5
    c = Consumer({**conf, "group.id": "fin-readers", "auto.offset.reset": "earliest"})
    c.subscribe(["fin-pay"])
    got: list[bytes | None] = []
    want = {f"m{i}".encode() for i in range(5)}
    deadline = time.monotonic() + 20
    while not want <= set(got) and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value())
    # DescribeGroups' authorized-operations bitfield, asked for by a real admin client
    alice_admin = AdminClient(conf)
    desc = alice_admin.describe_consumer_groups(
        ["fin-readers"], include_authorized_operations=True, request_timeout=10)
    g = desc["fin-readers"].result(15)
    c.close()
    assert {f"m{i}".encode() for i in range(5)} <= set(got)
    assert set(g.authorized_operations) == {AclOperation.READ, AclOperation.DESCRIBE}
    # ConsumerGroupDescribe (KIP-848 group): the bitfield, and GROUP_AUTHORIZATION_FAILED for bob
    secured.grant(ALICE, ResourceType.GROUP, "fin-848", AclOperation.READ)
    c2 = Consumer({**conf, "group.id": "fin-848", "group.protocol": "consumer",
                   "auto.offset.reset": "earliest"})
    c2.subscribe(["fin-pay"])
    deadline = time.monotonic() + 20
    while not c2.assignment() and time.monotonic() < deadline:
        c2.poll(0.5)
    cgd = {"group_ids": ["fin-848"], "include_authorized_operations": True}
    aw, bw = secured.wire("alice"), secured.wire("bob")
    mine = aw.request(69, 0, cgd).groups[0]
    theirs = bw.request(69, 0, cgd).groups[0]
    aw.close()
    bw.close()
    c2.close()
    assert mine.error_code == 0 and mine.authorized_operations == (1 << READ) | (1 << DESCRIBE)
    assert theirs.error_code == GROUP_DENIED
    dw = secured.wire("alice")  # DescribeGroups v5 (classic group) asked for the bitfield
    dg = dw.request(15, 5, {"groups": ["fin-readers"], "include_authorized_operations": True})
    dw.close()
    assert dg.groups[0].error_code == 0
    assert dg.groups[0].authorized_operations == (1 << READ) | (1 << DESCRIBE)
    # ListGroups: without DESCRIBE on the cluster, only the groups the principal may describe
    for who, sees in (("alice", True), ("dan", False)):
        lw = secured.wire(who)
        listed = lw.request(16, 4, {"states_filter": []})
        lw.close()
        assert listed.error_code == 0
        assert ("fin-readers" in {x.group_id for x in listed.groups}) == sees
    # bob has no ACL on fin-*: his producer's deliveries fail with TOPIC_AUTHORIZATION_FAILED
    bp = Producer({**conf, **secured.tls.confluent("bob"), "message.timeout.ms": 5000})
    bob_errors: list[Any] = []
    bp.produce("fin-pay", b"x", on_delivery=lambda e, m: bob_errors.append(e))
    bp.flush(15)
    assert len(bob_errors) == 1 and bob_errors[0] is not None
    assert bob_errors[0].code() == 29  # KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_acls_describe_delete_and_survive_kill(secured: Secured) -> None:
    admin = secured.admin()
    principal = "User:CN=carol,OU=eng,O=acme"
    secured.grant(principal, ResourceType.GROUP, "cg-", AclOperation.READ,
                  pattern=ResourcePatternType.PREFIXED)
    secured.grant(principal, ResourceType.TOPIC, "ct", AclOperation.WRITE)
    flt = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, principal, None,
                           AclOperation.ANY, AclPermissionType.ANY)
    found = admin.describe_acls(flt, request_timeout=10).result(15)
    assert {(b.restype, b.name, b.resource_pattern_type) for b in found} == {
        (ResourceType.GROUP, "cg-", ResourcePatternType.PREFIXED),
        (ResourceType.TOPIC, "ct", ResourcePatternType.LITERAL)}
    # MATCH finds the prefixed ACL that applies to a literal group name
    match = AclBindingFilter(ResourceType.GROUP, "cg-x", ResourcePatternType.MATCH, principal,
                             None, AclOperation.ANY, AclPermissionType.ANY)
    assert len(admin.describe_acls(match, request_timeout=10).result(15)) == 1
    secured.broker.kill()
    secured.broker.start()
    admin = secured.admin()
    deadline = time.monotonic() + 30
    while True:
        try:
            after = admin.describe_acls(flt, request_timeout=10).result(15)
            break
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    assert sorted(map(str, after)) == sorted(map(str, found))
    topic_only = AclBindingFilter(ResourceType.TOPIC, "ct", ResourcePatternType.LITERAL,
                                  principal, None, AclOperation.ANY, AclPermissionType.ANY)
    deleted = admin.delete_acls([topic_only], request_timeout=10)[topic_only].result(15)
    assert len(deleted) == 1
    assert len(admin.describe_acls(flt, request_timeout=10).result(15)) == 1


def test_security_disabled_without_authorizer(samsa_broker: SamsaBroker) -> None:
    """Off by default: the ACL APIs answer SECURITY_DISABLED and everything else is allowed."""
    w = Wire(samsa_broker.bootstrap)
    r = w.request(29, 3, {"resource_type_filter": 1, "resource_name_filter": None,
                          "pattern_type_filter": 1, "principal_filter": None,
                          "host_filter": None, "operation": 1, "permission_type": 1})
    assert r.error_code == SECURITY_DISABLED
    acl = {"creations": [{"resource_type": 2, "resource_name": "x", "resource_pattern_type": 3,
                          "principal": BOB, "host": "*", "operation": 2, "permission_type": 3}]}
    assert w.request(30, 3, acl).results[0].error_code == SECURITY_DISABLED
    w.close()


def test_cli_add_list_remove(secured: Secured, tmp_path: Path) -> None:
    props = tmp_path / "admin.properties"
    props.write_text("".join(f"{k}={v}\n" for k, v in secured.tls.confluent("admin").items()))
    base = [sys.executable, "-m", "samsa.cli.main", "acls"]
    common = ["--bootstrap-server", secured.ssl_bootstrap, "--command-config", str(props)]

    def run(*args: str) -> str:
        out = subprocess.run([*base, *args, *common], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return out.stdout

    added = run("add", "--allow-principal", "User:dave", "--operation", "Read", "--operation",
                "Describe", "--topic", "cli-t", "--group", "cli-g")
    assert ("Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=cli-t, "
            "patternType=LITERAL)`") in added
    listed = run("list", "--topic", "cli-t")
    assert "(principal=User:dave, host=*, operation=READ, permissionType=ALLOW)" in listed
    assert "(principal=User:dave, host=*, operation=DESCRIBE, permissionType=ALLOW)" in listed
    run("remove", "--allow-principal", "User:dave", "--operation", "Read", "--topic", "cli-t",
        "--force")
    listed = run("list", "--principal", "User:dave")
    sections = {s.split("`")[1]: s for s in listed.split("Current ACLs for resource ")[1:]}
    topic = next(v for k, v in sections.items() if "name=cli-t," in k)
    group = next(v for k, v in sections.items() if "name=cli-g," in k)
    assert "operation=READ" not in topic and "operation=DESCRIBE" in topic
    assert "operation=READ" in group
    # --deny-principal, and the --consumer shorthand (READ+DESCRIBE on topics, READ on groups)
    run("add", "--deny-principal", "User:dave", "--operation", "Write", "--topic", "cli-t")
    run("add", "--allow-principal", "User:erin", "--consumer", "--topic", "cli-t", "--group",
        "cli-g")
    listed = run("list", "--topic", "cli-t")
    assert "(principal=User:dave, host=*, operation=WRITE, permissionType=DENY)" in listed
    assert "(principal=User:erin, host=*, operation=READ, permissionType=ALLOW)" in listed
    assert "(principal=User:erin, host=*, operation=DESCRIBE, permissionType=ALLOW)" in listed
    erin_group = run("list", "--group", "cli-g", "--principal", "User:erin")
    assert "(principal=User:erin, host=*, operation=READ, permissionType=ALLOW)" in erin_group
    assert "operation=DESCRIBE" not in erin_group
