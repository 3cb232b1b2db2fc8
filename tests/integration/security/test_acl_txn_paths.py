"""ACL checks of the transactional paths as Kafka's KafkaApis makes them, driven with raw requests
over TLS as a certificate principal (`bob`) that may WRITE one topic and nothing else: a Produce
carrying transactional batches but no transactional id is refused (Kafka answers
TRANSACTIONAL_ID_AUTHORIZATION_FAILED), so no principal can open a transaction no coordinator knows
and hold the partition's last stable offset; DescribeTransactions shows only the topics of a
transaction the principal may DESCRIBE."""

from __future__ import annotations

import ssl
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AclBinding,
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
pytestmark = pytest.mark.timeout(120)

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
BOB = "User:CN=bob,OU=eng,O=acme"
TOPIC = "txw"
SECRET = "payroll"
TXN_DENIED = 53


class Env:
    def __init__(self, broker: SamsaBroker, tls: Any, ssl_port: int) -> None:
        self.broker, self.tls = broker, tls
        self.bootstrap = f"127.0.0.1:{ssl_port}"

    def admin(self) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0,
                            **self.tls.confluent("admin")})

    def wire(self, client: str) -> Wire:
        w = Wire(self.bootstrap)
        ctx: ssl.SSLContext = self.tls.ssl_context(client)
        w.sock = ctx.wrap_socket(w.sock, server_hostname="127.0.0.1")
        return w


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    tls = tls_mod.TlsFiles.create(tmp_path_factory.mktemp("acl-txn-tls"), clients=("admin", "bob"))
    plain = free_port()
    overrides, ssl_port = tls_mod.ssl_listener_overrides(tls, plain, client_auth="required", extra={
        "authorizer.class.name": STANDARD, "super.users": "User:CN=admin,OU=eng,O=acme"})
    with SamsaBroker(port=plain, overrides=overrides) as b:
        e = Env(b, tls, ssl_port)
        admin = e.admin()
        for t in (TOPIC, SECRET):
            admin.create_topics([NewTopic(t, 1, 1)])[t].result(20)
        for op in (AclOperation.WRITE, AclOperation.DESCRIBE):
            acl = AclBinding(ResourceType.TOPIC, TOPIC, ResourcePatternType.LITERAL, BOB, "*", op,
                             AclPermissionType.ALLOW)
            for f in admin.create_acls([acl], request_timeout=10).values():
                f.result(15)
        yield e


def _produce(w: Wire, records: bytes, tid: str | None = None) -> Any:
    r = w.request(0, 9, {"transactional_id": tid, "acks": -1, "timeout": 5000, "topic_data": [
        {"name": TOPIC, "partition_data": [{"index": 0, "records": records}]}]})
    return r.responses[0].partition_responses[0]


def _latest(w: Wire, isolation: int) -> int:
    r = w.request(2, 7, {"replica_id": -1, "isolation_level": isolation, "topics": [
        {"name": TOPIC, "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                        "timestamp": -1}]}]})
    p = r.topics[0].partitions[0]
    assert p.error_code == 0
    return int(p.offset)


def test_transactional_batch_without_transactional_id_is_refused(env: Env) -> None:
    w = env.wire("bob")
    try:
        plain = encode_batch([(b"k", b"plain", [], 1_700_000_000_000)])
        assert _produce(w, plain).error_code == 0  # bob may write the topic
        txn = encode_batch([(b"k", b"in-a-txn", [], 1_700_000_000_001)], producer_id=4242,
                           producer_epoch=0, base_sequence=0, attributes_extra=0x10)
        r = _produce(w, txn)
        assert r.error_code == TXN_DENIED
        # nothing was appended and no transaction holds the last stable offset
        end = _latest(w, 0)
        assert end == 1
        assert _latest(w, 1) == end
        # with a transactional id bob may not write: refused too
        assert _produce(w, txn, tid="not-bobs").error_code == TXN_DENIED
    finally:
        w.close()


def test_describe_transactions_hides_topics_the_principal_may_not_describe(env: Env) -> None:
    tid = "tx-mixed"
    acl = AclBinding(ResourceType.TRANSACTIONAL_ID, tid, ResourcePatternType.LITERAL, BOB, "*",
                     AclOperation.DESCRIBE, AclPermissionType.ALLOW)
    admin = env.admin()
    for f in admin.create_acls([acl], request_timeout=10).values():
        f.result(15)
    p = Producer({"bootstrap.servers": env.bootstrap, "transactional.id": tid, "log_level": 0,
                  **env.tls.confluent("admin")})
    p.init_transactions(30)
    p.begin_transaction()
    for t in (TOPIC, SECRET):
        p.produce(t, b"v")
    p.flush(30)  # the partitions are in the (still open) transaction now
    w = env.wire("bob")
    try:
        r = w.request(65, 0, {"transactional_ids": [tid]}).transaction_states[0]
        assert r.error_code == 0 and r.transaction_state == "Ongoing"
        assert {t.topic for t in r.topics} == {TOPIC}
    finally:
        w.close()
        p.abort_transaction(30)


def test_transactional_id_is_checked_before_topics(env: Env) -> None:
    """AddPartitionsToTxn (v3) and TxnOffsetCommit without WRITE on the transactional id: every
    partition gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED, also those of topics bob may not use
    (Kafka checks the transactional id first; a producer treats that error as fatal)."""
    w = env.wire("bob")
    try:
        r = w.request(24, 3, {"v3_and_below_transactional_id": "not-bobs",
                              "v3_and_below_producer_id": 1, "v3_and_below_producer_epoch": 0,
                              "v3_and_below_topics": [{"name": SECRET, "partitions": [0]},
                                                      {"name": TOPIC, "partitions": [0]}]})
        codes = {t.name: {p.partition_error_code for p in t.results_by_partition}
                 for t in r.results_by_topic_v3_and_below}
        assert codes == {SECRET: {TXN_DENIED}, TOPIC: {TXN_DENIED}}
        r = w.request(28, 3, {"transactional_id": "not-bobs", "group_id": "g", "producer_id": 1,
                              "producer_epoch": 0, "generation_id": -1, "member_id": "",
                              "group_instance_id": None, "topics": [
                                  {"name": SECRET, "partitions": [
                                      {"partition_index": 0, "committed_offset": 0,
                                       "committed_leader_epoch": -1,
                                       "committed_metadata": ""}]}]})
        assert r.topics[0].partitions[0].error_code == TXN_DENIED
    finally:
        w.close()


def test_consumer_group_describe_hides_groups_on_topics_not_describable(env: Env) -> None:
    """ConsumerGroupDescribe (KIP-848): a group whose assignments name a topic the principal may
    not DESCRIBE is answered TOPIC_AUTHORIZATION_FAILED without its members, as Kafka."""
    from confluent_kafka import Consumer

    gid = "g848-payroll"
    acl = AclBinding(ResourceType.GROUP, gid, ResourcePatternType.LITERAL, BOB, "*",
                     AclOperation.DESCRIBE, AclPermissionType.ALLOW)
    admin = env.admin()
    for f in admin.create_acls([acl], request_timeout=10).values():
        f.result(15)
    c = Consumer({"bootstrap.servers": env.bootstrap, "group.id": gid, "log_level": 0,
                  "group.protocol": "consumer", **env.tls.confluent("admin")})
    c.subscribe([SECRET])
    deadline = time.monotonic() + 20
    while not c.assignment() and time.monotonic() < deadline:
        c.poll(0.5)
    w = env.wire("bob")
    try:
        assert c.assignment()
        g = w.request(69, 0, {"group_ids": [gid], "include_authorized_operations": False}).groups[0]
        assert g.error_code == 29 and not g.members
    finally:
        w.close()
        c.close()
