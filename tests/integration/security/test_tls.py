"""TLS listeners on a real broker: confluent-kafka, kcat, kafka-python and aiokafka over SSL with
and without client certificates, ssl.client.auth=required, ssl.principal.mapping.rules, and
Kafka's answers to plaintext bytes on a TLS port, untrusted and expired certificates.

One broker serves four listeners at once: SSL (no client certificates), MTLS (SSL, client
certificates required, only alice and carol map to a principal), EXPIRED (SSL with an expired
server certificate) and PLAINTEXT (last, so SamsaBroker's wait on it means all are bound).
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import ssl
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme

from samsa.testing import SamsaBroker, free_port
from samsa.testing.tls import TlsFiles
from tests.wire import Wire

pytestmark = [pytest.mark.timeout(180)]

API_VERSIONS = 18


class Ports:
    def __init__(self) -> None:
        self.plain, self.ssl, self.mtls, self.expired = (free_port() for _ in range(4))


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return TlsFiles.create(tmp_path_factory.mktemp("tls"), clients=("alice", "bob", "carol"))


@pytest.fixture(scope="module")
def broker(tls: TlsFiles) -> Iterator[tuple[SamsaBroker, Ports]]:
    p = Ports()
    expired = tls.renew_server(tls.root / "expired.pem", expired=True)
    overrides = {
        "listeners": f"SSL://127.0.0.1:{p.ssl},MTLS://127.0.0.1:{p.mtls},"
                     f"EXPIRED://127.0.0.1:{p.expired},PLAINTEXT://127.0.0.1:{p.plain}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL,EXPIRED:SSL",
        # plain ssl.* for every TLS listener, listener.name.<l>.ssl.* overriding them per listener
        **tls.broker_ssl("none"),
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.mtls.ssl.principal.mapping.rules":
            "RULE:^CN=(alice|carol),OU=eng,O=acme$/$1/L",
        "listener.name.expired.ssl.keystore.location": str(expired),
        "num.partitions": "1",
    }
    with SamsaBroker(port=p.plain, overrides=overrides) as b:
        yield b, p


def _bs(port: int) -> str:
    return f"127.0.0.1:{port}"


def _topic() -> str:
    return f"tls-{uuid.uuid4().hex[:8]}"


# ---- the four clients ----------------------------------------------------------------------
def _confluent_roundtrip(bs: str, conf: dict[str, str], n: int = 20) -> list[bytes]:
    from confluent_kafka import Consumer, Producer

    topic = _topic()
    p = Producer({"bootstrap.servers": bs, **conf})
    for i in range(n):
        p.produce(topic, f"v{i}".encode() * 50)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": bs, "group.id": topic, "auto.offset.reset": "earliest",
                  **conf})
    c.subscribe([topic])
    got: list[bytes] = []
    for _ in range(60):
        m = c.poll(1.0)
        if m is not None and m.error() is None:
            got.append(m.value())
        if len(got) >= n:
            break
    c.close()
    return got


def _kafka_python_roundtrip(bs: str, conf: dict[str, object], n: int = 20) -> list[bytes]:
    from kafka import KafkaConsumer, KafkaProducer

    topic = _topic()
    p = KafkaProducer(bootstrap_servers=bs, **conf)
    for i in range(n):
        p.send(topic, f"v{i}".encode())
    p.flush(30)
    p.close()
    c = KafkaConsumer(topic, bootstrap_servers=bs, auto_offset_reset="earliest",
                      consumer_timeout_ms=30000, **conf)  # idle bound (loaded CI host)
    got = [m.value for _, m in zip(range(n), c, strict=False)]
    c.close()
    return got


def _aiokafka_roundtrip(bs: str, ctx: ssl.SSLContext, n: int = 20) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    topic = _topic()

    async def run() -> list[bytes]:
        p = AIOKafkaProducer(bootstrap_servers=bs, security_protocol="SSL", ssl_context=ctx)
        await p.start()
        try:
            for i in range(n):
                await p.send_and_wait(topic, f"v{i}".encode())
        finally:
            await p.stop()
        c = AIOKafkaConsumer(topic, bootstrap_servers=bs, security_protocol="SSL",
                             ssl_context=ctx, auto_offset_reset="earliest")
        await c.start()
        got: list[bytes] = []
        try:
            for _ in range(30):
                batch = await c.getmany(timeout_ms=1000)
                got += [m.value for ms in batch.values() for m in ms if m.value is not None]
                if len(got) >= n:
                    break
        finally:
            await c.stop()
        return got

    return asyncio.run(asyncio.wait_for(run(), 90))


def _kcat(bs: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("kcat") or shutil.which("kafkacat")
    assert exe, "kcat is not installed (Debian package kcat)"
    return subprocess.run([exe, "-b", bs, *args], input=stdin, capture_output=True, text=True,
                          timeout=60)


def _kcat_roundtrip(bs: str, args: list[str]) -> list[str]:
    topic = _topic()
    r = _kcat(bs, *args, "-P", "-t", topic, stdin="".join(f"line {i}\n" for i in range(20)))
    assert r.returncode == 0, r.stderr
    out = _kcat(bs, *args, "-C", "-t", topic, "-e", "-o", "beginning")
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


# ---- positive ------------------------------------------------------------------------------
def test_confluent_over_ssl_without_and_with_client_certificate(
        broker: tuple[SamsaBroker, Ports], tls: TlsFiles) -> None:
    _, p = broker
    assert len(_confluent_roundtrip(_bs(p.ssl), tls.confluent())) == 20
    assert len(_confluent_roundtrip(_bs(p.mtls), tls.confluent("alice"))) == 20


def test_kcat_over_ssl_without_and_with_client_certificate(
        broker: tuple[SamsaBroker, Ports], tls: TlsFiles) -> None:
    _, p = broker
    assert _kcat_roundtrip(_bs(p.ssl), tls.kcat()) == [f"line {i}" for i in range(20)]
    assert _kcat_roundtrip(_bs(p.mtls), tls.kcat("carol")) == [f"line {i}" for i in range(20)]


def test_kafka_python_over_ssl_without_and_with_client_certificate(
        broker: tuple[SamsaBroker, Ports], tls: TlsFiles) -> None:
    _, p = broker
    want = [f"v{i}".encode() for i in range(20)]
    assert _kafka_python_roundtrip(_bs(p.ssl), tls.kafka_python()) == want
    assert _kafka_python_roundtrip(_bs(p.mtls), tls.kafka_python("alice")) == want


def test_aiokafka_over_ssl_without_and_with_client_certificate(
        broker: tuple[SamsaBroker, Ports], tls: TlsFiles) -> None:
    _, p = broker
    want = [f"v{i}".encode() for i in range(20)]
    assert _aiokafka_roundtrip(_bs(p.ssl), tls.ssl_context()) == want
    assert _aiokafka_roundtrip(_bs(p.mtls), tls.ssl_context("alice")) == want


def test_plaintext_and_ssl_listeners_at_once(broker: tuple[SamsaBroker, Ports],
                                             tls: TlsFiles) -> None:
    """Written over PLAINTEXT, read over SSL; each listener's Metadata advertises itself."""
    from confluent_kafka import Consumer, Producer

    _, p = broker
    topic = _topic()
    prod = Producer({"bootstrap.servers": _bs(p.plain)})
    for i in range(10):
        prod.produce(topic, f"m{i}".encode())
    assert prod.flush(30) == 0
    c = Consumer({"bootstrap.servers": _bs(p.ssl), "group.id": topic,
                  "auto.offset.reset": "earliest", **tls.confluent()})
    md = c.list_topics(timeout=10)
    assert [(b.host, b.port) for b in md.brokers.values()] == [("127.0.0.1", p.ssl)]
    c.subscribe([topic])
    got: list[bytes] = []
    for _ in range(40):
        m = c.poll(1.0)
        if m is not None and m.error() is None:
            got.append(m.value())
        if len(got) >= 10:
            break
    c.close()
    assert got == [f"m{i}".encode() for i in range(10)]


# ---- negative ------------------------------------------------------------------------------
def _tls_wire(port: int, ctx: ssl.SSLContext) -> Wire:
    w = Wire(_bs(port))
    w.sock = ctx.wrap_socket(w.sock, server_hostname="127.0.0.1")
    return w


def _refused(port: int, ctx: ssl.SSLContext) -> bool:
    """True when the broker refuses the TLS client: a failed handshake, or (TLS 1.3, where the
    client's certificate is checked after the client's side of the handshake ends) a closed
    connection instead of an answer to ApiVersions."""
    try:
        w = _tls_wire(port, ctx)
    except (ssl.SSLError, OSError):
        return True
    try:
        w.request(API_VERSIONS, 3, {"client_software_name": "t",
                                    "client_software_version": "1"})
    except (ssl.SSLError, OSError, ConnectionError):
        return True
    finally:
        w.close()
    return False


def _broker_fine(b: SamsaBroker, p: Ports, tls: TlsFiles) -> None:
    assert b.proc is not None and b.proc.poll() is None
    r = Wire(_bs(p.plain)).request(API_VERSIONS, 3, {"client_software_name": "t",
                                                     "client_software_version": "1"})
    assert r.error_code == 0
    assert not _refused(p.ssl, tls.ssl_context())


def test_required_client_auth_refuses_a_client_without_certificate(
        broker: tuple[SamsaBroker, Ports], tls: TlsFiles) -> None:
    b, p = broker
    assert _refused(p.mtls, tls.ssl_context())
    assert not _refused(p.mtls, tls.ssl_context("alice"))
    r = _kcat(_bs(p.mtls), *tls.kcat(), "-L", "-m", "5")
    assert r.returncode != 0
    _broker_fine(b, p, tls)


def test_principal_mapping_rules_refuse_an_unmapped_certificate(
        broker: tuple[SamsaBroker, Ports], tls: TlsFiles) -> None:
    """MTLS maps only alice and carol: bob's valid certificate matches no rule, and Kafka fails
    the authentication of a DN no rule maps."""
    b, p = broker
    assert not _refused(p.mtls, tls.ssl_context("carol"))
    assert _refused(p.mtls, tls.ssl_context("bob"))
    assert "No rules apply to CN=bob,OU=eng,O=acme" in b.log_text()
    _broker_fine(b, p, tls)


def test_plaintext_bytes_on_a_tls_port_close_the_connection(
        broker: tuple[SamsaBroker, Ports], tls: TlsFiles) -> None:
    b, p = broker
    w = Wire(_bs(p.ssl))
    w.send_raw(w.encode(API_VERSIONS, 3, {"client_software_name": "t",
                                          "client_software_version": "1"}))
    w.sock.settimeout(10)
    data = b""
    try:
        for _ in range(10):
            chunk = w.sock.recv(4096)
            if not chunk:
                break
            data += chunk
        else:
            pytest.fail("the TLS listener kept the connection open")
    except ConnectionResetError:
        pass
    w.close()
    # at most a TLS alert record (content type 21), never a Kafka response
    assert data == b"" or data[0] == 21
    _broker_fine(b, p, tls)


def test_untrusted_certificates(broker: tuple[SamsaBroker, Ports], tls: TlsFiles,
                                tmp_path: Path) -> None:
    b, p = broker
    other = trustme.CA(organization_name="evil")
    # the client does not trust the broker's CA
    ctx = ssl.create_default_context()
    other.configure_trust(ctx)
    with pytest.raises(ssl.SSLCertVerificationError):
        _tls_wire(p.ssl, ctx)
    other_pem = tmp_path / "other.pem"
    other.cert_pem.write_to_path(str(other_pem))
    r = _kcat(_bs(p.ssl), "-X", "security.protocol=SSL", "-X", f"ssl.ca.location={other_pem}",
              "-L", "-m", "5")
    assert r.returncode != 0
    # the broker does not trust the client's CA
    tls.add_client("mallory", ca=other)
    assert _refused(p.mtls, tls.ssl_context("mallory"))
    _broker_fine(b, p, tls)


def test_expired_certificates(broker: tuple[SamsaBroker, Ports], tls: TlsFiles) -> None:
    b, p = broker
    # the broker's certificate expired: clients refuse it
    with pytest.raises(ssl.SSLCertVerificationError, match="expired"):
        _tls_wire(p.expired, tls.ssl_context())
    r = _kcat(_bs(p.expired), *tls.kcat(), "-L", "-m", "5")
    assert r.returncode != 0 and "certificate verify failed" in r.stderr, r.stderr
    # the client's certificate expired: the broker refuses it
    tls.add_client("old", expired=True)
    assert _refused(p.mtls, tls.ssl_context("old"))
    _broker_fine(b, p, tls)


def test_slow_handshake_does_not_block_others(broker: tuple[SamsaBroker, Ports],
                                              tls: TlsFiles) -> None:
    """A client that opens the TLS port and sends nothing holds no one else up."""
    b, p = broker
    idle = [socket.create_connection(("127.0.0.1", p.ssl), timeout=5) for _ in range(5)]
    try:
        assert not _refused(p.ssl, tls.ssl_context())
    finally:
        for s in idle:
            s.close()
    _broker_fine(b, p, tls)
