"""SASL on SASL_PLAINTEXT listeners against a real broker: PLAIN, SCRAM-SHA-256/512 and OAUTHBEARER
with confluent-kafka, kafka-python, aiokafka and kcat; Kafka's answers (and closed connections)
for wrong passwords, unknown users, disabled mechanisms, requests before authentication, garbage
and oversized tokens, expired tokens; re-authentication (KIP-368); SCRAM credentials in the
metadata log (KIP-554) surviving kill -9."""

from __future__ import annotations

import asyncio
import json
import struct
import subprocess
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from samsa.testing import SamsaBroker, free_port
from tests.sasl_util import (
    create_scram,
    first_values,
    kcat,
    plain_jaas,
    roundtrip_confluent,
    scram_client_final,
    unsecured_jwt,
)
from tests.wire import Wire

HANDSHAKE, AUTHENTICATE, METADATA, API_VERSIONS = 17, 36, 3, 18
USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
REAUTH_MS = 1500


class Ports:
    def __init__(self) -> None:
        self.plain = free_port()
        self.sasl = free_port()
        self.reauth = free_port()


@pytest.fixture(scope="module")
def broker() -> Iterator[tuple[SamsaBroker, Ports]]:
    ports = Ports()
    overrides = {
        "listeners": f"PLAINTEXT://127.0.0.1:{ports.plain},SASL_PLAINTEXT://127.0.0.1:{ports.sasl},"
                     f"REAUTH://127.0.0.1:{ports.reauth}",
        "listener.security.protocol.map":
            "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,REAUTH:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas(USERS),
        "listener.name.reauth.plain.sasl.jaas.config": plain_jaas(USERS),
        "listener.name.reauth.sasl.enabled.mechanisms": "PLAIN,OAUTHBEARER",
        "listener.name.reauth.connections.max.reauth.ms": str(REAUTH_MS),
        "num.partitions": "1",
    }
    with SamsaBroker(port=ports.plain, overrides=overrides) as b:
        yield b, ports


def sasl_bs(ports: Ports) -> str:
    return f"127.0.0.1:{ports.sasl}"


# ---- helpers ------------------------------------------------------------------------------------
def handshake(w: Wire, mechanism: str, version: int = 1) -> Any:
    return w.request(HANDSHAKE, version, {"mechanism": mechanism})


def authenticate(w: Wire, token: bytes, version: int = 2) -> Any:
    return w.request(AUTHENTICATE, version, {"auth_bytes": token})


def plain_login(w: Wire, user: str, password: str, version: int = 2) -> Any:
    assert handshake(w, "PLAIN").error_code == 0
    return authenticate(w, f"\0{user}\0{password}".encode(), version)


def scram_login(w: Wire, mech: str, user: str, password: str) -> Any:
    assert handshake(w, mech).error_code == 0
    first_bare = f"n={user},r=wire-nonce-{uuid.uuid4().hex}"
    r1 = authenticate(w, f"n,,{first_bare}".encode())
    if r1.error_code:
        return r1
    final = scram_client_final(mech, password, "n,,", first_bare, r1.auth_bytes.decode())
    return authenticate(w, final.encode())


def lifetime_ms(r: Any) -> int:
    """SaslAuthenticate's session_lifetime_ms (kio reads it as a timedelta)."""
    return round(r.session_lifetime.total_seconds() * 1000)


def metadata_ok(w: Wire) -> bool:
    return bool(w.request(METADATA, 12, {"topics": None}).brokers)


def topic() -> str:
    return f"sasl-{uuid.uuid4().hex[:10]}"


# ---- PLAIN --------------------------------------------------------------------------------------
def test_plain_confluent_kafka(broker: tuple[SamsaBroker, Ports]) -> None:
    _, ports = broker
    conf = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.username": "alice", "sasl.password": USERS["alice"]}
    assert roundtrip_confluent(sasl_bs(ports), conf, topic()) == [b"m0", b"m1", b"m2", b"m3", b"m4"]


def test_plain_kafka_python_and_aiokafka(broker: tuple[SamsaBroker, Ports]) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from kafka import KafkaConsumer, KafkaProducer

    _, ports = broker
    t = topic()
    kp = KafkaProducer(bootstrap_servers=sasl_bs(ports), security_protocol="SASL_PLAINTEXT",
                       sasl_mechanism="PLAIN", sasl_plain_username="bob",
                       sasl_plain_password=USERS["bob"])
    kp.send(t, b"from-kafka-python").get(timeout=30)
    kp.close()

    async def aio() -> list[bytes]:
        kw = dict(bootstrap_servers=sasl_bs(ports), security_protocol="SASL_PLAINTEXT",
                  sasl_mechanism="PLAIN", sasl_plain_username="alice",
                  sasl_plain_password=USERS["alice"])
        p = AIOKafkaProducer(**kw)
        await p.start()
        await p.send_and_wait(t, b"from-aiokafka")
        await p.stop()
        c = AIOKafkaConsumer(t, auto_offset_reset="earliest", **kw)
        await c.start()
        out: list[bytes] = []
        try:
            async with asyncio.timeout(30):
                async for m in c:
                    out.append(m.value)
                    if len(out) == 2:
                        break
        finally:
            await c.stop()
        return out
    assert asyncio.run(aio()) == [b"from-kafka-python", b"from-aiokafka"]
    kc = KafkaConsumer(t, bootstrap_servers=sasl_bs(ports), security_protocol="SASL_PLAINTEXT",
                       sasl_mechanism="PLAIN", sasl_plain_username="bob",
                       sasl_plain_password=USERS["bob"], auto_offset_reset="earliest",
                       consumer_timeout_ms=10000)
    assert first_values(kc, 2) == [b"from-kafka-python", b"from-aiokafka"]
    kc.close()


def test_plain_kcat(broker: tuple[SamsaBroker, Ports]) -> None:
    _, ports = broker
    t = topic()
    props = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN",
             "sasl.username": "alice", "sasl.password": USERS["alice"]}
    r = kcat(sasl_bs(ports), props, "-P", "-t", t, stdin="k1\nk2\n")
    assert r.returncode == 0, r.stderr
    r = kcat(sasl_bs(ports), props, "-C", "-t", t, "-o", "beginning", "-e", "-q")
    assert r.returncode == 0 and r.stdout.split() == ["k1", "k2"], r.stderr
    bad = dict(props, **{"sasl.password": "nope"})
    r = kcat(sasl_bs(ports), bad, "-L", "-m", "5")
    assert r.returncode != 0 and "Invalid username or password" in r.stderr


def test_plain_wrong_password_and_unknown_user(broker: tuple[SamsaBroker, Ports]) -> None:
    _, ports = broker
    for user, pw in [("alice", "wrong"), ("mallory", "x")]:
        w = Wire(sasl_bs(ports))
        r = plain_login(w, user, pw)
        assert r.error_code == 58
        assert r.error_message == "Authentication failed: Invalid username or password"
        assert w.is_closed()
        w.close()


def test_plain_confluent_wrong_password_reports_auth_error(broker: tuple[SamsaBroker, Ports]) -> None:
    from confluent_kafka import KafkaError

    _, ports = broker
    errors: list[Any] = []
    p = Producer({"bootstrap.servers": sasl_bs(ports), "security.protocol": "SASL_PLAINTEXT",
                  "sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": "bad",
                  "error_cb": errors.append})
    deadline = time.monotonic() + 20
    while not errors and time.monotonic() < deadline:
        p.poll(0.2)
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION
    assert "Invalid username or password" in errors[0].str()


def test_handshake_v0_raw_tokens(broker: tuple[SamsaBroker, Ports]) -> None:
    _, ports = broker
    w = Wire(sasl_bs(ports))
    r = handshake(w, "PLAIN", version=0)
    assert r.error_code == 0 and "PLAIN" in r.mechanisms
    token = b"\0alice\0" + USERS["alice"].encode()
    w.send_raw(struct.pack(">i", len(token)) + token)
    assert w.recv_frame() == b""  # PLAIN's (empty) server token, size-prefixed
    assert metadata_ok(w)
    w.close()
    w = Wire(sasl_bs(ports))
    handshake(w, "PLAIN", version=0)
    token = b"\0alice\0bad"
    w.send_raw(struct.pack(">i", len(token)) + token)
    assert w.is_closed()


# ---- protocol errors ----------------------------------------------------------------------------
def test_disabled_mechanism(broker: tuple[SamsaBroker, Ports]) -> None:
    _, ports = broker
    w = Wire(f"127.0.0.1:{ports.reauth}")  # PLAIN and OAUTHBEARER only on this listener
    r = handshake(w, "SCRAM-SHA-256")
    assert r.error_code == 33 and list(r.mechanisms) == ["PLAIN", "OAUTHBEARER"]
    assert w.is_closed()
    w = Wire(sasl_bs(ports))
    r = handshake(w, "GSSAPI")
    assert r.error_code == 33
    assert list(r.mechanisms) == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]
    assert w.is_closed()


def test_requests_before_authentication_close_the_connection(
        broker: tuple[SamsaBroker, Ports]) -> None:
    _, ports = broker
    w = Wire(sasl_bs(ports))
    assert w.request(API_VERSIONS, 3, {"client_software_name": "t",
                                        "client_software_version": "1"}).error_code == 0
    w.send_raw(w.encode(METADATA, 12, {"topics": None}))
    assert w.is_closed()  # no answer: Kafka closes ("Unexpected Kafka request ... handshake")
    # a SaslAuthenticate before any handshake: closed too
    w = Wire(sasl_bs(ports))
    w.send_raw(w.encode(AUTHENTICATE, 2, {"auth_bytes": b"\0alice\0x"}))
    assert w.is_closed()
    # after the handshake, anything but SaslAuthenticate: ILLEGAL_SASL_STATE, then closed
    w = Wire(sasl_bs(ports))
    handshake(w, "PLAIN")
    r = handshake(w, "PLAIN")
    assert r.error_code == 34
    assert w.is_closed()
    # the PLAINTEXT listener refuses SASL requests with ILLEGAL_SASL_STATE and stays open
    w = Wire(f"127.0.0.1:{ports.plain}")
    assert handshake(w, "PLAIN").error_code == 34
    assert metadata_ok(w)
    w.close()


def test_oversized_token_closes_the_connection(broker: tuple[SamsaBroker, Ports]) -> None:
    _, ports = broker
    w = Wire(sasl_bs(ports))
    handshake(w, "PLAIN")
    w.send_raw(w.encode(AUTHENTICATE, 2, {"auth_bytes": b"\0" * 600_000}))
    assert w.is_closed()


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(mech=st.sampled_from(["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]),
       token=st.binary(max_size=300), raw=st.booleans())
def test_garbage_tokens_fuzz(broker: tuple[SamsaBroker, Ports], mech: str, token: bytes,
                             raw: bool) -> None:
    """Any token: a Kafka answer or a closed connection, never an authenticated session, and the
    broker keeps serving."""
    _, ports = broker
    w = Wire(sasl_bs(ports), timeout=10)
    try:
        if raw:
            w.send_raw(struct.pack(">i", len(token)) + token)  # not even a Kafka request
            if len(token) >= 8:
                try:
                    w.recv_frame()
                except (ConnectionError, OSError):
                    pass
        else:
            handshake(w, mech)
            try:
                r = authenticate(w, token)
            except (ConnectionError, OSError):
                return
            if r.error_code:
                assert r.error_code == 58
                assert w.is_closed()
            else:  # a challenge (SCRAM server-first, OAUTHBEARER error JSON): not authenticated
                assert lifetime_ms(r) == 0
                w.send_raw(w.encode(METADATA, 12, {"topics": None}))
                w.recv_frame()  # ILLEGAL_SASL_STATE in a Metadata response
                assert w.is_closed()
    finally:
        w.close()
    ok = Wire(sasl_bs(ports))
    assert plain_login(ok, "admin", USERS["admin"]).error_code == 0
    ok.close()


# ---- SCRAM --------------------------------------------------------------------------------------
@pytest.mark.parametrize("mech", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_clients(broker: tuple[SamsaBroker, Ports], mech: str) -> None:
    from aiokafka import AIOKafkaProducer
    from kafka import KafkaProducer

    b, ports = broker
    user = f"scram-{mech[-3:]}"
    create_scram(b.bootstrap, user, "s3cret", mech, iterations=8192)
    conf = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mech,
            "sasl.username": user, "sasl.password": "s3cret"}
    t = topic()
    assert len(roundtrip_confluent(sasl_bs(ports), conf, t, 3)) == 3
    kp = KafkaProducer(bootstrap_servers=sasl_bs(ports), security_protocol="SASL_PLAINTEXT",
                       sasl_mechanism=mech, sasl_plain_username=user, sasl_plain_password="s3cret")
    kp.send(t, b"kp").get(timeout=30)
    kp.close()

    async def aio() -> None:
        p = AIOKafkaProducer(bootstrap_servers=sasl_bs(ports), security_protocol="SASL_PLAINTEXT",
                             sasl_mechanism=mech, sasl_plain_username=user,
                             sasl_plain_password="s3cret")
        await p.start()
        await p.send_and_wait(t, b"aio")
        await p.stop()
    asyncio.run(aio())
    props = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": mech,
             "sasl.username": user, "sasl.password": "s3cret"}
    r = kcat(sasl_bs(ports), props, "-C", "-t", t, "-o", "beginning", "-e", "-q")
    assert r.returncode == 0 and r.stdout.split() == ["m0", "m1", "m2", "kp", "aio"], r.stderr
    # wrong password and unknown user: Kafka's generic message, then closed
    for u, pw in [(user, "wrong"), ("nobody", "x")]:
        w = Wire(sasl_bs(ports))
        resp = scram_login(w, mech, u, pw)
        assert resp.error_code == 58
        assert resp.error_message == ("Authentication failed during authentication due to "
                                      f"invalid credentials with SASL mechanism {mech}")
        assert w.is_closed()


def test_scram_credential_admin_apis(broker: tuple[SamsaBroker, Ports]) -> None:
    from kafka.admin import KafkaAdminClient

    b, ports = broker
    create_scram(b.bootstrap, "carol", "pw1", "SCRAM-SHA-256")
    create_scram(b.bootstrap, "carol", "pw2", "SCRAM-SHA-512", iterations=10000)
    a = AdminClient({"bootstrap.servers": b.bootstrap})
    desc = a.describe_user_scram_credentials(["carol"])["carol"].result(timeout=20)
    infos = sorted((i.mechanism, i.iterations) for i in desc.scram_credential_infos)
    assert infos == [(ScramMechanism.SCRAM_SHA_256, 4096), (ScramMechanism.SCRAM_SHA_512, 10000)]
    with pytest.raises(Exception, match="does not exist"):
        a.describe_user_scram_credentials(["nobody"])["nobody"].result(timeout=20)
    with pytest.raises(Exception, match="Too few iterations"):
        a.alter_user_scram_credentials([UserScramCredentialUpsertion(
            "dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 100), b"x")])["dave"] \
            .result(timeout=20)
    # the new password works, the old one does not
    w = Wire(sasl_bs(ports))
    assert scram_login(w, "SCRAM-SHA-512", "carol", "pw2").error_code == 0
    w.close()
    a.alter_user_scram_credentials([UserScramCredentialDeletion(
        "carol", ScramMechanism.SCRAM_SHA_512)])["carol"].result(timeout=20)
    w = Wire(sasl_bs(ports))
    assert scram_login(w, "SCRAM-SHA-512", "carol", "pw2").error_code == 58
    with pytest.raises(Exception, match="does not exist"):
        a.alter_user_scram_credentials([UserScramCredentialDeletion(
            "carol", ScramMechanism.SCRAM_SHA_512)])["carol"].result(timeout=20)
    del KafkaAdminClient


def test_scram_credentials_survive_kill_9() -> None:
    sasl_port = free_port()
    plain_port = free_port()
    overrides = {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain_port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256"}
    with SamsaBroker(port=plain_port, overrides=overrides) as b:
        create_scram(b.bootstrap, "erin", "erin-pw")
        b.restart(hard=True)  # returns once the PLAINTEXT listener accepts
        deadline = time.monotonic() + 30
        while True:  # the SASL listener may bind a moment later
            try:
                w = Wire(f"127.0.0.1:{sasl_port}")
                break
            except ConnectionRefusedError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        assert scram_login(w, "SCRAM-SHA-256", "erin", "erin-pw").error_code == 0
        assert metadata_ok(w)
        w.close()


# ---- OAUTHBEARER --------------------------------------------------------------------------------
def test_oauthbearer_unsecured_clients(broker: tuple[SamsaBroker, Ports]) -> None:
    from aiokafka import AIOKafkaProducer
    from aiokafka.abc import AbstractTokenProvider
    from kafka import KafkaProducer
    from kafka.net.sasl.oauth import AbstractTokenProvider as KpTokenProvider

    _, ports = broker
    t = topic()
    conf = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
            "enable.sasl.oauthbearer.unsecure.jwt": True,
            "sasl.oauthbearer.config": "principal=alice lifeSeconds=600"}
    assert len(roundtrip_confluent(sasl_bs(ports), conf, t, 2)) == 2

    class KpTokens(KpTokenProvider):  # type: ignore[misc]
        def token(self) -> str:
            return unsecured_jwt({"sub": "alice", "exp": int(time.time()) + 600})

    kp = KafkaProducer(bootstrap_servers=sasl_bs(ports), security_protocol="SASL_PLAINTEXT",
                       sasl_mechanism="OAUTHBEARER", sasl_oauth_token_provider=KpTokens())
    kp.send(t, b"kp").get(timeout=30)
    kp.close()

    class AioTokens(AbstractTokenProvider):  # type: ignore[misc]
        async def token(self) -> str:
            return unsecured_jwt({"sub": "alice", "exp": int(time.time()) + 600})

    async def aio() -> None:
        p = AIOKafkaProducer(bootstrap_servers=sasl_bs(ports), security_protocol="SASL_PLAINTEXT",
                             sasl_mechanism="OAUTHBEARER", sasl_oauth_token_provider=AioTokens())
        await p.start()
        await p.send_and_wait(t, b"aio")
        await p.stop()
    asyncio.run(aio())
    props = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "OAUTHBEARER",
             "enable.sasl.oauthbearer.unsecure.jwt": "true",
             "sasl.oauthbearer.config": "principal=alice"}
    r = kcat(sasl_bs(ports), props, "-C", "-t", t, "-o", "beginning", "-e", "-q")
    assert r.returncode == 0 and r.stdout.split() == ["m0", "m1", "kp", "aio"], r.stderr


def test_oauthbearer_expired_token(broker: tuple[SamsaBroker, Ports]) -> None:
    _, ports = broker
    w = Wire(sasl_bs(ports))
    assert handshake(w, "OAUTHBEARER").error_code == 0
    now = int(time.time())
    token = unsecured_jwt({"sub": "alice", "exp": now - 60, "iat": now - 600})
    r = authenticate(w, f"n,,\x01auth=Bearer {token}\x01\x01".encode())
    assert r.error_code == 0 and json.loads(r.auth_bytes) == {"status": "invalid_token"}
    r = authenticate(w, b"\x01")
    assert r.error_code == 58 and json.loads(r.error_message) == {"status": "invalid_token"}
    assert w.is_closed()


# ---- re-authentication (KIP-368) -----------------------------------------------------------------
def reauth_bs(ports: Ports) -> str:
    return f"127.0.0.1:{ports.reauth}"


def test_session_lifetime_and_expiry(broker: tuple[SamsaBroker, Ports]) -> None:
    _, ports = broker
    w = Wire(reauth_bs(ports))
    r = plain_login(w, "alice", USERS["alice"])
    assert r.error_code == 0 and lifetime_ms(r) == REAUTH_MS
    assert metadata_ok(w)
    # re-authenticate as the same principal: served again with a new lifetime
    r = plain_login(w, "alice", USERS["alice"])
    assert r.error_code == 0 and lifetime_ms(r) == REAUTH_MS
    assert metadata_ok(w)
    time.sleep(REAUTH_MS / 1000 + 0.5)
    w.send_raw(w.encode(METADATA, 12, {"topics": None}))
    assert w.is_closed()  # expired without re-authentication
    # no lifetime on a listener without connections.max.reauth.ms, nor for SaslAuthenticate v0
    w = Wire(sasl_bs(ports))
    assert lifetime_ms(plain_login(w, "alice", USERS["alice"])) == 0
    w = Wire(reauth_bs(ports))
    assert plain_login(w, "alice", USERS["alice"], version=0).error_code == 0


def test_oauthbearer_lifetime_is_bounded_by_token_expiry(broker: tuple[SamsaBroker, Ports]) -> None:
    _, ports = broker
    w = Wire(sasl_bs(ports))  # no connections.max.reauth.ms: the token's exp alone
    handshake(w, "OAUTHBEARER")
    token = unsecured_jwt({"sub": "alice", "exp": int(time.time()) + 100})
    r = authenticate(w, f"n,,\x01auth=Bearer {token}\x01\x01".encode())
    assert r.error_code == 0 and 0 < lifetime_ms(r) <= 100_000


def test_reauthentication_with_another_principal_is_refused(
        broker: tuple[SamsaBroker, Ports]) -> None:
    _, ports = broker
    w = Wire(reauth_bs(ports))
    assert plain_login(w, "alice", USERS["alice"]).error_code == 0
    r = plain_login(w, "bob", USERS["bob"])
    assert r.error_code == 58
    assert r.error_message == ("Cannot change principals during re-authentication from "
                               "User.alice: User.bob")
    assert w.is_closed()
    # nor with another mechanism: the handshake passes, the exchange fails
    w = Wire(reauth_bs(ports))
    assert plain_login(w, "alice", USERS["alice"]).error_code == 0
    assert handshake(w, "OAUTHBEARER").error_code == 0
    token = unsecured_jwt({"sub": "alice", "exp": int(time.time()) + 60})
    r = authenticate(w, f"n,,\x01auth=Bearer {token}\x01\x01".encode())
    assert r.error_code == 58
    assert r.error_message == ("SASL mechanism 'OAUTHBEARER' requested by client is not "
                               "supported for re-authentication of mechanism 'PLAIN'")
    assert w.is_closed()


def test_confluent_kafka_reauthenticates(broker: tuple[SamsaBroker, Ports]) -> None:
    """librdkafka re-authenticates before session_lifetime_ms runs out (KIP-368): a producer
    working across several lifetimes keeps its connection alive and delivers everything."""
    b, ports = broker
    expired_before = b.log_text().count("SASL session expired")
    errors: list[Any] = []
    p = Producer({"bootstrap.servers": reauth_bs(ports), "security.protocol": "SASL_PLAINTEXT",
                  "sasl.mechanism": "PLAIN", "sasl.username": "alice",
                  "sasl.password": USERS["alice"], "error_cb": errors.append})
    t = topic()
    for i in range(4):
        p.produce(t, f"r{i}".encode())
        assert p.flush(30) == 0
        time.sleep(REAUTH_MS / 1000)
    assert not [e for e in errors if "Disconnected" in e.str()], errors
    assert b.log_text().count("SASL session expired") == expired_before


# ---- CLI ----------------------------------------------------------------------------------------
def samsa_cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    import sys

    return subprocess.run([sys.executable, "-m", "samsa.cli.main", *args], input=stdin,
                          capture_output=True, text=True, timeout=60)


def test_cli_users_scram(broker: tuple[SamsaBroker, Ports], tmp_path: Any) -> None:
    """`samsa users scram set|describe|delete`, here over the SASL listener itself with a Java
    client's properties file (sasl.jaas.config), as Kafka's tools take --command-config."""
    _, ports = broker
    props = tmp_path / "admin.properties"
    props.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                     "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule "
                     'required username="admin" password="admin-secret";\n')
    common = ["--bootstrap-server", sasl_bs(ports), "--command-config", str(props)]
    r = samsa_cli("users", "scram", "set", "--user", "frank", "--mechanism", "SCRAM-SHA-512",
                  "--iterations", "5000", "--password-stdin", *common, stdin="frank-pw\n")
    assert r.returncode == 0 and "Completed updating config for user frank." in r.stdout, r.stderr
    r = samsa_cli("users", "scram", "describe", "--user", "frank", *common)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[1].split() == ["frank", "SCRAM-SHA-512", "5000"]
    w = Wire(sasl_bs(ports))
    assert scram_login(w, "SCRAM-SHA-512", "frank", "frank-pw").error_code == 0
    w.close()
    r = samsa_cli("users", "scram", "delete", "--user", "frank", "--mechanism", "SCRAM-SHA-512",
                  *common)
    assert r.returncode == 0, r.stderr
    r = samsa_cli("users", "scram", "describe", "--user", "frank", *common)
    assert r.returncode == 1 and "does not exist" in r.stderr
    bad = tmp_path / "bad.properties"
    bad.write_text(props.read_text().replace("admin-secret", "wrong"))
    r = samsa_cli("users", "scram", "describe", "--bootstrap-server", sasl_bs(ports),
                  "--command-config", str(bad))
    assert r.returncode != 0 and "Invalid username or password" in r.stderr


def test_oauthbearer_jwks_validation(tmp_path: Any) -> None:
    """OAUTHBEARER with JWTs checked against a JWKS file (KIP-768 settings): confluent-kafka's
    oauth_cb hands a signed token; a token signed by another key is refused."""
    from confluent_kafka import KafkaError
    from cryptography.hazmat.primitives.asymmetric import rsa

    from tests.sasl_util import jwks_for, signed_jwt

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps(jwks_for(key, "k1")))
    plain, sasl = free_port(), free_port()
    overrides = {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class":
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config":
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required ;",
        "sasl.oauthbearer.jwks.endpoint.url": jwks.as_uri(),
        "sasl.oauthbearer.expected.audience": "kafka",
        "num.partitions": "1"}

    def conf(signer: Any, errors: list[Any]) -> dict[str, Any]:
        def token(_cfg: str) -> tuple[str, float]:
            exp = int(time.time()) + 300
            return signed_jwt(signer, "k1", {"sub": "svc-orders", "aud": "kafka", "exp": exp,
                                             "iat": int(time.time())}), float(exp)
        return {"bootstrap.servers": f"127.0.0.1:{sasl}", "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "OAUTHBEARER", "oauth_cb": token, "error_cb": errors.append}

    with SamsaBroker(port=plain, overrides=overrides):
        errors: list[Any] = []
        p = Producer(conf(key, errors))
        p.produce("jwt-topic", b"signed")
        assert p.flush(30) == 0 and not errors
        bad_errors: list[Any] = []
        bad = Producer(conf(other, bad_errors))
        deadline = time.monotonic() + 20
        while not bad_errors and time.monotonic() < deadline:
            bad.poll(0.2)
        assert bad_errors and bad_errors[0].code() == KafkaError._AUTHENTICATION
        assert "invalid_token" in bad_errors[0].str()
