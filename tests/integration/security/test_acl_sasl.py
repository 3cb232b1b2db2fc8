"""ACLs with SASL principals: over SASL_PLAINTEXT with PLAIN, the authenticated user
(User:<name>) is the principal ACLs name, with real clients (confluent-kafka)."""

from __future__ import annotations

from typing import Any

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

from samsa.testing import SamsaBroker, free_port
from tests.sasl_util import plain_jaas

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
USERS = {"admin": "admin-pw", "alice": "alice-pw", "bob": "bob-pw"}


def _conf(port: int, user: str) -> dict[str, Any]:
    return {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": USERS[user],
            "log_level": 0}


def _produce(conf: dict[str, Any], topic: str) -> Any:
    p = Producer({**conf, "message.timeout.ms": 8000})
    got: list[Any] = []
    p.produce(topic, b"v", on_delivery=lambda e, m: got.append(e))
    p.flush(15)
    assert len(got) == 1
    return got[0]


def test_plain_users_are_acl_principals() -> None:
    plain, sasl = free_port(), free_port()
    overrides = {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas(USERS),
        "authorizer.class.name": STANDARD, "super.users": "User:admin"}
    with SamsaBroker(port=plain, overrides=overrides):
        admin = AdminClient(_conf(sasl, "admin"))
        admin.create_topics([NewTopic("sasl-orders", 1, 1)])["sasl-orders"].result(20)
        acl = AclBinding(ResourceType.TOPIC, "sasl-", ResourcePatternType.PREFIXED, "User:alice",
                         "*", AclOperation.WRITE, AclPermissionType.ALLOW)
        for f in admin.create_acls([acl], request_timeout=10).values():
            f.result(15)
        assert _produce(_conf(sasl, "alice"), "sasl-orders") is None
        err = _produce(_conf(sasl, "bob"), "sasl-orders")
        assert err is not None and err.code() == 29  # TOPIC_AUTHORIZATION_FAILED
