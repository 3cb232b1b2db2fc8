"""The console on a SASL cluster with ACLs: every user signs in with their own SASL/PLAIN
credentials (checked by the broker), and the console then acts as that principal, so the broker's
ACLs decide what each one sees."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from samsa.console.context import ConsoleContext
from samsa.testing import SamsaBroker, free_port
from tests.sasl_util import plain_jaas

from .consoleserver import ConsoleServer

USERS = {"admin": "admin-secret", "alice": "alice-secret"}
STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


@pytest.fixture(scope="module")
def secured() -> Iterator[str]:
    plain, sasl = free_port(), free_port()
    overrides = {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas(USERS),
        "authorizer.class.name": STANDARD, "super.users": "User:admin;User:ANONYMOUS",
        "admin.http.listeners": ""}
    with SamsaBroker(port=plain, overrides=overrides) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        for t in ("secret-orders", "public-news"):
            admin.create_topics([NewTopic(t, 1, 1)])[t].result(20)
        acl = AclBinding(ResourceType.TOPIC, "public-", ResourcePatternType.PREFIXED, "User:alice", "*",
                         AclOperation.DESCRIBE, AclPermissionType.ALLOW)
        for f in admin.create_acls([acl], request_timeout=10).values():
            f.result(15)
        ctx = ConsoleContext(f"127.0.0.1:{sasl}", {"security.protocol": "SASL_PLAINTEXT",
                                                   "sasl.mechanism": "PLAIN"})
        with ConsoleServer(ctx) as console:
            yield console.url


def _login(url: str, user: str, password: str) -> tuple[httpx.Client, httpx.Response]:
    client = httpx.Client(base_url=url, timeout=30)
    r = client.post("/login", data={"username": user, "password": password, "next": "/topics"})
    return client, r


def test_pages_need_a_sign_in(secured: str) -> None:
    r = httpx.get(secured + "/topics", timeout=30)
    assert r.status_code == 303 and r.headers["location"].startswith("/login")
    r = httpx.get(secured + "/topics/public-news/tail", timeout=30)
    assert r.status_code == 401
    client, r = _login(secured, "alice", "wrong")
    assert r.status_code == 401 and "sign-in failed" in r.text and "Traceback" not in r.text
    assert "samsa_console" not in client.cookies


def test_each_user_sees_what_their_acls_allow(secured: str) -> None:
    admin, r = _login(secured, "admin", USERS["admin"])
    assert r.status_code == 303 and r.headers["location"] == "/topics"
    page = admin.get("/topics").text
    assert "secret-orders" in page and "public-news" in page and "admin · " in page
    acls = admin.get("/security").text
    assert "User:alice" in acls and "DESCRIBE" in acls

    alice, r = _login(secured, "alice", USERS["alice"])
    assert r.status_code == 303
    page = alice.get("/topics").text
    assert "public-news" in page and "secret-orders" not in page
    r = alice.get("/topics/secret-orders")
    assert r.status_code == 404 and "Traceback" not in r.text
    r = alice.get("/security")  # alice may not describe the cluster's ACLs
    assert r.status_code == 403 and "cannot list ACLs" in r.text

    # admin grants alice DESCRIBE on secret-orders from the console; alice then sees it
    acl = {"principal": "User:alice", "host": "*", "operation": "DESCRIBE", "permission": "ALLOW",
           "resourceType": "TOPIC", "name": "secret-orders", "pattern": "LITERAL"}
    r = admin.post("/security/acls", data=acl)
    assert r.status_code == 303, r.text[-500:]
    assert "secret-orders" in alice.get("/topics").text
    r = alice.post("/security/acls", data={**acl, "name": "public-news", "operation": "ALL"})
    assert r.status_code == 403 and "cannot create the ACL" in r.text  # alice may not alter ACLs
    r = admin.post("/security/acls/delete", data=acl)
    assert r.status_code == 303
    assert "secret-orders" not in alice.get("/topics").text
    r = admin.post("/security/acls", data={**acl, "operation": "FLY"})
    assert r.status_code == 400 and "unknown ACL value" in r.text

    alice.get("/logout")
    assert alice.get("/topics").status_code == 303  # the session is gone
