"""KIP-368 session expiry for clients that cannot re-authenticate: Kafka's broker sets a session's
expiry whatever the client's SaslAuthenticate version and closes the connection at its first
request after that, so a client speaking SaslAuthenticate v0 (or raw SaslHandshake v0 tokens)
cannot keep a session past connections.max.reauth.ms or its OAUTHBEARER token's expiry."""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator

import pytest

from samsa.testing import SamsaBroker, free_port
from tests.sasl_util import plain_jaas, unsecured_jwt
from tests.wire import Wire

pytestmark = pytest.mark.timeout(120)
HANDSHAKE, AUTHENTICATE, METADATA = 17, 36, 3
REAUTH_MS = 1500
USERS = {"alice": "alice-secret"}


@pytest.fixture(scope="module")
def ports() -> Iterator[tuple[int, int]]:
    plain, reauth, sasl = free_port(), free_port(), free_port()
    overrides = {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},REAUTH://127.0.0.1:{reauth},"
                     f"SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "listener.security.protocol.map":
            "PLAINTEXT:PLAINTEXT,REAUTH:SASL_PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN,OAUTHBEARER",
        "listener.name.reauth.plain.sasl.jaas.config": plain_jaas(USERS),
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas(USERS),
        "listener.name.reauth.connections.max.reauth.ms": str(REAUTH_MS),
    }
    with SamsaBroker(port=plain, overrides=overrides):
        yield reauth, sasl


def _served(w: Wire) -> bool:
    """A Metadata request is answered (False: the broker closed the connection)."""
    try:
        w.send_raw(w.encode(METADATA, 12, {"topics": None}))
        w.recv_frame()
        return True
    except (ConnectionError, OSError):
        return False


def _wait_past(ms: int) -> None:
    time.sleep(ms / 1000 + 0.5)


def test_saslauthenticate_v0_session_expires(ports: tuple[int, int]) -> None:
    w = Wire(f"127.0.0.1:{ports[0]}")
    try:
        assert w.request(HANDSHAKE, 1, {"mechanism": "PLAIN"}).error_code == 0
        r = w.request(AUTHENTICATE, 0, {"auth_bytes": b"\0alice\0alice-secret"})
        assert r.error_code == 0
        assert _served(w)
        _wait_past(REAUTH_MS)
        assert not _served(w)
    finally:
        w.close()


def test_raw_token_session_expires(ports: tuple[int, int]) -> None:
    w = Wire(f"127.0.0.1:{ports[0]}")
    try:
        assert w.request(HANDSHAKE, 0, {"mechanism": "PLAIN"}).error_code == 0
        token = b"\0alice\0alice-secret"
        w.send_raw(struct.pack(">i", len(token)) + token)
        assert w.recv_frame() == b""  # PLAIN's empty server token: authenticated
        assert _served(w)
        _wait_past(REAUTH_MS)
        assert not _served(w)
    finally:
        w.close()


def test_v0_oauthbearer_session_ends_with_its_token(ports: tuple[int, int]) -> None:
    """No connections.max.reauth.ms on this listener: the token's exp alone bounds the session."""
    w = Wire(f"127.0.0.1:{ports[1]}")
    try:
        assert w.request(HANDSHAKE, 1, {"mechanism": "OAUTHBEARER"}).error_code == 0
        token = unsecured_jwt({"sub": "alice", "exp": int(time.time()) + 3})
        r = w.request(AUTHENTICATE, 0, {"auth_bytes": f"n,,\x01auth=Bearer {token}\x01\x01".encode()})
        assert r.error_code == 0
        assert _served(w)
        _wait_past(3500)
        assert not _served(w)
    finally:
        w.close()
