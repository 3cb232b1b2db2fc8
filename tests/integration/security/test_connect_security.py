"""The Connect worker on a secured cluster, with Kafka Connect's settings: the worker's own
clients (internal topics, group membership) use the top-level security.protocol / sasl.* / ssl.*,
connectors' producers and consumers the producer.* / consumer.* ones, a connector's
producer.override.* (under connector.client.config.override.policy=Principal) its own principal;
the REST API on https:// with listeners.https.ssl.* requiring client certificates. ACLs are on,
so each principal can only do what it was granted: the records landing proves who wrote them."""

from __future__ import annotations

import ssl
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from samsa.testing.connect import ConnectWorker
from samsa.testing.secure import SecureBroker, jaas, write_properties
from tests.spark_util import create_topic, read_all

pytestmark = pytest.mark.timeout(300)
USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}


@pytest.fixture(scope="module")
def sb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    with SecureBroker(tmp_path_factory.mktemp("secure-connect"), users=USERS, acls=True) as b:
        allow = [("User:alice", ResourceType.TOPIC, "cs-a", ResourcePatternType.PREFIXED),
                 ("User:alice", ResourceType.GROUP, "connect-", ResourcePatternType.PREFIXED),
                 ("User:bob", ResourceType.TOPIC, "cs-bob", ResourcePatternType.LITERAL)]
        admin = AdminClient({"bootstrap.servers": b.plaintext})
        acls = [AclBinding(rt, name, pt, who, "*", AclOperation.ALL, AclPermissionType.ALLOW)
                for who, rt, name, pt in allow]
        for f in admin.create_acls(acls).values():
            f.result(timeout=30)
        yield b


def lines_of(sb: SecureBroker, topic: str) -> list[str]:
    return sorted(m.value().decode() for m in read_all(sb.plaintext, topic, committed=False))


def wait_for(check: object, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.slow  # ~30 s: a distributed worker's start and four connectors
def test_distributed_worker_over_sasl_ssl_with_https_rest(sb: SecureBroker, tmp_path: Path) -> None:
    alice = sb.java("alice", "SCRAM-SHA-512")
    props = {**sb.connect_worker_props("admin", "SCRAM-SHA-256",
                                       clients={"producer": alice, "consumer": alice}),
             **sb.rest_https_props("required"),
             "connector.client.config.override.policy": "Principal"}
    group = f"cg-{uuid.uuid4().hex[:6]}"
    for t in ("cs-a-src", "cs-bob"):
        create_topic(sb.plaintext, t, 1)
    with ConnectWorker(sb.sasl_ssl, tmp_path / "w", distributed=True, group_id=group, props=props,
                       https=True, verify=str(sb.tls.ca_file),
                       cert=sb.client_cert("alice")) as w:
        # the REST listener is TLS and wants a client certificate
        assert w.url.startswith("https://")
        with pytest.raises((httpx.ConnectError, httpx.ReadError, httpx.RemoteProtocolError,
                            ssl.SSLError)):
            httpx.get(w.url + "/connectors", timeout=10,
                      verify=ssl.create_default_context(cafile=str(sb.tls.ca_file)))
        assert w.http.get("/connectors").json() == []
        # a source (producer as alice) and a sink (consumer as alice)
        src, out = tmp_path / "in.txt", tmp_path / "out.txt"
        src.write_text("".join(f"a{i}\n" for i in range(20)))
        r = w.create("src", {"connector.class": "FileStreamSource", "topic": "cs-a-src",
                             "file": str(src)})
        assert r.status_code == 201, r.text
        r = w.create("sink", {"connector.class": "FileStreamSink", "topics": "cs-a-src",
                              "file": str(out)})
        assert r.status_code == 201, r.text
        w.wait_state("src", tasks=1)
        w.wait_state("sink", tasks=1)
        wait_for(lambda: lines_of(sb, "cs-a-src") == sorted(f"a{i}" for i in range(20)),
                 "the source's records")
        wait_for(lambda: out.exists() and sorted(out.read_text().split()) ==
                 sorted(f"a{i}" for i in range(20)), "the sink's file")
        # `samsa connect connectors` reaches the https worker with --command-config
        rest_props = write_properties(tmp_path / "rest.properties", {
            "ssl.truststore.location": str(sb.tls.ca_file), **sb.java_keystore("alice")})
        r2 = subprocess.run([sys.executable, "-m", "samsa.cli.main", "connect", "connectors",
                             "list", "--url", w.url, "--command-config", str(rest_props)],
                            capture_output=True, text=True, timeout=60)
        assert r2.returncode == 0 and {"src", "sink"} <= set(r2.stdout.split()), r2.stderr
        # a connector writing as bob through its own producer.override.* (alice may not
        # write cs-bob: only bob's principal gets the records in)
        bob_src = tmp_path / "bob.txt"
        bob_src.write_text("b0\nb1\n")
        bob = sb.java("bob", "PLAIN")
        r = w.create("bob-src", {"connector.class": "FileStreamSource", "topic": "cs-bob",
                                 "file": str(bob_src),
                                 "producer.override.sasl.mechanism": bob["sasl.mechanism"],
                                 "producer.override.sasl.jaas.config": bob["sasl.jaas.config"]})
        assert r.status_code == 201, r.text
        w.wait_state("bob-src", tasks=1)
        wait_for(lambda: lines_of(sb, "cs-bob") == ["b0", "b1"], "bob's records")
        # the Principal policy refuses other overrides
        r = w.create("bad", {"connector.class": "FileStreamSource", "topic": "cs-bob",
                             "file": str(bob_src), "producer.override.linger.ms": "7"})
        assert r.status_code == 400 and "does not allow 'linger.ms'" in r.text, r.text


def test_connector_without_security_overrides_cannot_write(sb: SecureBroker,
                                                           tmp_path: Path) -> None:
    """Connectors' producers do not inherit the worker's own (admin) principal, as in Kafka:
    with producer.* as alice, a source writing to a topic only admin may write fails."""
    alice = sb.java("alice", "PLAIN")
    props = {**sb.connect_worker_props("admin", "PLAIN",
                                       clients={"producer": alice, "consumer": alice})}
    create_topic(sb.plaintext, "cs-locked", 1)
    src = tmp_path / "in.txt"
    src.write_text("x\n")
    with ConnectWorker(sb.sasl_ssl, tmp_path / "w", props=props) as w:
        r = w.create("nope", {"connector.class": "FileStreamSource", "topic": "cs-locked",
                              "file": str(src), "errors.tolerance": "none"})
        assert r.status_code == 201, r.text
        st: dict[str, object] = {}

        def task_failed() -> bool:
            nonlocal st
            st = w.status("nope")
            return [t["state"] for t in st["tasks"]] == ["FAILED"]  # type: ignore[index]
        wait_for(task_failed, "the task to fail", 90)
        assert "TOPIC_AUTHORIZATION_FAILED" in str(st), st
    assert lines_of(sb, "cs-locked") == []


def test_worker_with_a_wrong_password_stops_with_the_reason(sb: SecureBroker,
                                                            tmp_path: Path) -> None:
    props = sb.connect_worker_props("admin", "PLAIN", clients={"admin": {}})
    props["sasl.jaas.config"] = jaas("org.apache.kafka.common.security.plain.PlainLoginModule",
                                     username="admin", password="wrong")
    w = ConnectWorker(sb.sasl_ssl, tmp_path / "w", props=props, startup_timeout=60)
    try:
        with pytest.raises(RuntimeError, match="Authentication failed"):
            w.start()
    finally:
        w.stop()
