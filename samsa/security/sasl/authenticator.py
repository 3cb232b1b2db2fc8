"""The SASL state of one connection on a SASL_PLAINTEXT / SASL_SSL listener, as Kafka's
SaslServerAuthenticator:

- before authentication only ApiVersions and SaslHandshake are served; any other request closes
  the connection without an answer;
- SaslHandshake v0 switches to raw tokens (each frame one size-prefixed SASL token, answered the
  same way), v1 to SaslAuthenticate requests (v0-v2); a wrong request in that state gets
  ILLEGAL_SASL_STATE and the connection closes;
- a mechanism not enabled gets UNSUPPORTED_SASL_MECHANISM with the enabled list, a failed exchange
  SASL_AUTHENTICATION_FAILED with Kafka's message; both close the connection;
- frames before authentication are limited to sasl.server.max.receive.size;
- KIP-368: with connections.max.reauth.ms (or an OAUTHBEARER token's expiry) the SaslAuthenticate
  answer carries session_lifetime_ms; a request after the session expired closes the connection,
  a SaslHandshake starts re-authentication, which must keep the mechanism and the principal.
"""

from __future__ import annotations

import logging
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from samsa.protocol import apis
from samsa.protocol.codec import decode_request, encode_response
from samsa.security.principal import USER_TYPE, KafkaPrincipal

from . import AuthenticationFailed, InvalidCredentials, MechanismServer

if TYPE_CHECKING:
    from samsa.broker.server import KafkaConnection

log = logging.getLogger("samsa.sasl")

SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
UNSUPPORTED_SASL_MECHANISM = 33
ILLEGAL_SASL_STATE = 34
SASL_AUTHENTICATION_FAILED = 58
HANDSHAKE_VERSIONS = (0, 1)
AUTHENTICATE_VERSIONS = (0, 2)

_HANDSHAKE, _AUTHENTICATE, _COMPLETE, _FAILED = range(4)


def api_name(key: int) -> str:
    """Kafka's ApiKeys enum name for an api key (as its error messages print it)."""
    for name, value in vars(apis).items():
        if value == key and name.isupper() and isinstance(value, int) and name not in (
                "SUPPORTED", "ADVERTISED"):
            return name
    return {SASL_HANDSHAKE: "SASL_HANDSHAKE", SASL_AUTHENTICATE: "SASL_AUTHENTICATE"}.get(
        key, f"api key {key}")


@dataclass
class SaslListener:
    """What one SASL listener accepts: the enabled mechanisms and a server factory for each."""

    name: str
    protocol: str
    mechanisms: list[str]
    factories: dict[str, Callable[[], MechanismServer]] = field(default_factory=dict)
    max_receive: int = 524288
    reauth_ms: int = 0


class SaslSession:
    def __init__(self, conn: KafkaConnection, listener: SaslListener) -> None:
        self.conn = conn
        self.listener = listener
        self.state = _HANDSHAKE
        self.raw = False  # SaslHandshake v0: tokens as raw frames
        self.server: MechanismServer | None = None
        self.mechanism = ""
        self.reauthenticating = False
        self.supports_reauth = False  # a SaslAuthenticate v1+ was seen
        self.expires_at: float | None = None  # monotonic deadline of the session
        self.full_max = conn.max_request
        conn.max_request = min(conn.max_request, listener.max_receive)

    # ---- entry point ---------------------------------------------------------------------
    def intercept(self, frame: bytes) -> bool:
        """True if the frame was handled here (answered, or the connection closed); False for a
        request the broker serves normally."""
        try:
            return self._intercept(frame)
        except Exception:  # a bug must cost this connection only
            log.exception("SASL: closing connection after an internal error")
            self._close()
            return True

    def _intercept(self, frame: bytes) -> bool:
        if self.state == _COMPLETE:
            if len(frame) >= 4:
                key = struct.unpack_from(">h", frame, 0)[0]
                if key == SASL_HANDSHAKE:
                    self.reauthenticating = True
                    self.state = _HANDSHAKE
                    self.conn.max_request = min(self.full_max, self.listener.max_receive)
                    return self._kafka_request(frame)
                # a SaslAuthenticate out of an exchange: the broker's handler answers
                # ILLEGAL_SASL_STATE and keeps the connection, as Kafka's KafkaApis
            if self.expires_at is not None and time.monotonic() >= self.expires_at:
                log.info("closing connection of %s: SASL session expired without "
                         "re-authentication", self.conn.principal)
                self._close()
                return True
            return False
        if self.state == _FAILED:
            return True
        if self.raw and self.state == _AUTHENTICATE:
            self._raw_token(frame)
            return True
        return self._kafka_request(frame)

    # ---- Kafka-framed requests during authentication -------------------------------------
    def _kafka_request(self, frame: bytes) -> bool:
        if len(frame) < 8:
            self._fail_silently("request too short during SASL authentication")
            return True
        key, version, corr = struct.unpack_from(">hhi", frame, 0)
        if self.state == _HANDSHAKE:
            if key == apis.API_VERSIONS:
                return False
            if key != SASL_HANDSHAKE:
                self._fail_silently(f"Unexpected Kafka request of type {api_name(key)} during "
                                    f"SASL handshake.")
                return True
            body = self._decode(key, version, frame, HANDSHAKE_VERSIONS)
            if body is not None:
                self._handshake(version, corr, body)
            return True
        # _AUTHENTICATE with SaslAuthenticate requests
        if key != SASL_AUTHENTICATE:
            msg = f"Unexpected Kafka request of type {api_name(key)} during SASL authentication."
            self._error_answer(key, version, corr, msg)
            return True
        body = self._decode(key, version, frame, AUTHENTICATE_VERSIONS)
        if body is not None:
            self._authenticate(version, corr, body)
        return True

    def _decode(self, key: int, version: int, frame: bytes, versions: tuple[int, int]) -> Any:
        if not versions[0] <= version <= versions[1]:
            self._fail_silently(f"Version {version} is not supported for apiKey {api_name(key)}")
            return None
        try:
            return decode_request(key, version, frame)[1]
        except Exception as e:
            self._fail_silently(f"cannot decode {api_name(key)} v{version}: {e}")
            return None

    def _handshake(self, version: int, corr: int, body: Any) -> None:
        mech = body.mechanism
        enabled = self.listener.mechanisms
        if mech not in enabled or mech not in self.listener.factories:
            self._answer(SASL_HANDSHAKE, version, corr,
                         {"error_code": UNSUPPORTED_SASL_MECHANISM, "mechanisms": tuple(enabled)})
            self._fail(f"Unsupported SASL mechanism {mech}")
            return
        self._answer(SASL_HANDSHAKE, version, corr, {"error_code": 0, "mechanisms": tuple(enabled)})
        if self.reauthenticating and mech != self.mechanism:
            # as Kafka: the handshake succeeds, the SaslAuthenticate that follows fails
            self._reauth_error = (f"SASL mechanism '{mech}' requested by client is not "
                                  f"supported for re-authentication of mechanism "
                                  f"'{self.mechanism}'")
            self.state = _AUTHENTICATE
            self.server = None
            return
        self.mechanism = mech
        self.server = self.listener.factories[mech]()
        self.raw = version == 0
        self.state = _AUTHENTICATE
        if self.raw:
            self.conn.min_request = 0

    def _authenticate(self, version: int, corr: int, body: Any) -> None:
        if version > 0:
            self.supports_reauth = True
        if self.server is None:  # re-authentication with another mechanism
            self._auth_failed(version, corr, self._reauth_error)
            return
        try:
            out = self._evaluate(bytes(body.auth_bytes or b""))
        except AuthenticationFailed as e:
            self._auth_failed(version, corr, str(e))
            return
        except InvalidCredentials as e:
            log.info("SASL %s failed: %s", self.mechanism, e)
            what = "re-authentication" if self.reauthenticating else "authentication"
            self._auth_failed(version, corr, f"Authentication failed during {what} due to "
                                             f"invalid credentials with SASL mechanism "
                                             f"{self.mechanism}")
            return
        lifetime = self._finish() if self.server is not None and self.server.complete else 0
        if self.state == _FAILED:  # re-authentication as somebody else
            self._auth_failed(version, corr, self._reauth_error)
            return
        self._answer(SASL_AUTHENTICATE, version, corr,
                     {"error_code": 0, "error_message": None, "auth_bytes": out,
                      "session_lifetime": lifetime})

    def _raw_token(self, frame: bytes) -> None:
        try:
            out = self._evaluate(frame)
        except (AuthenticationFailed, InvalidCredentials) as e:
            self._fail(f"SASL {self.mechanism} authentication failed: {e}")
            return
        if self.server is not None and self.server.complete:
            self._finish()
        if self.state == _FAILED:
            self._close()
            return
        self.conn._respond_in_order([struct.pack(">i", len(out)), out])

    def _evaluate(self, token: bytes) -> bytes:
        assert self.server is not None
        return self.server.evaluate(token)

    def _finish(self) -> int:
        """The exchange succeeded: the connection's principal, the session lifetime (ms, 0 if
        none)."""
        assert self.server is not None
        principal = KafkaPrincipal(USER_TYPE, self.server.authorization_id)
        if self.reauthenticating and principal != self.conn.principal:
            old = self.conn.principal
            self._reauth_error = (f"Cannot change principals during re-authentication from "
                                  f"{old.principal_type}.{old.name}: "
                                  f"{principal.principal_type}.{principal.name}")
            self.state = _FAILED
            return 0
        self.conn.principal = principal
        self.state = _COMPLETE
        self.raw = False
        self.conn.min_request = 8
        self.conn.max_request = self.full_max
        lifetime = self.listener.reauth_ms if self.listener.reauth_ms > 0 else 0
        expiry = self.server.credential_expiry_ms
        if expiry is not None:
            left = max(0, expiry - int(time.time() * 1000))
            lifetime = min(lifetime, left) if lifetime else left
        # as Kafka (SaslServerAuthenticator sets the session's expiry whatever the client's
        # version): a client that cannot re-authenticate (SaslAuthenticate v0, raw tokens) is
        # cut off when its session ends too, else an old-protocol client would keep a session
        # past its token's expiry or connections.max.reauth.ms
        self.expires_at = time.monotonic() + lifetime / 1000 if lifetime else None
        self.reauthenticating = False
        return lifetime

    # ---- answers and failures ---------------------------------------------------------------
    _reauth_error = ""

    def _answer(self, key: int, version: int, corr: int, data: dict[str, Any]) -> None:
        self.conn._respond_in_order(encode_response(key, version, corr, data))

    def _auth_failed(self, version: int, corr: int, message: str) -> None:
        self._answer(SASL_AUTHENTICATE, version, corr,
                     {"error_code": SASL_AUTHENTICATION_FAILED, "error_message": message,
                      "auth_bytes": b"", "session_lifetime": 0})
        self._fail(message)

    def _error_answer(self, key: int, version: int, corr: int, message: str) -> None:
        """ILLEGAL_SASL_STATE in the error response of the request's own type, then close."""
        try:
            data = {"error_code": ILLEGAL_SASL_STATE, "error_message": message}
            self._answer(key, version, corr, data)
        except Exception:  # an api / version without an error response Samsa can build
            pass
        self._fail(message)

    def _fail(self, why: str) -> None:
        log.info("closing connection from %s: %s", self.conn.peer_ip or "?", why)
        self.state = _FAILED
        self._close()

    def _fail_silently(self, why: str) -> None:
        self._fail(why)

    def _close(self) -> None:
        self.state = _FAILED
        self.conn.close()
