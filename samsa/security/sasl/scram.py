"""SASL/SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) with the credentials Kafka keeps in
the metadata log (KIP-554): per user and mechanism a salt, StoredKey, ServerKey and iteration
count; never the password."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from collections.abc import Callable
from dataclasses import dataclass

from . import AuthenticationFailed, InvalidCredentials

# KIP-554's ScramMechanism numbers (AlterUserScramCredentials, UserScramCredentialRecord)
MECHANISMS = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
MECHANISM_NAMES = {v: k for k, v in MECHANISMS.items()}
_HASH = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MIN_ITERATIONS = 4096  # Kafka's ScramMechanism.minIterations
MAX_ITERATIONS = 16384  # KIP-554: AlterUserScramCredentials refuses more


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """RFC 5802's Hi(password, salt, i): what AlterUserScramCredentials upserts carry."""
    return hashlib.pbkdf2_hmac(_HASH[mechanism], password.encode(), salt, iterations)


def credential_from_salted(mechanism: str, salted: bytes, salt: bytes,
                           iterations: int) -> ScramCredential:
    h = _HASH[mechanism]
    client_key = hmac.digest(salted, b"Client Key", h)
    return ScramCredential(salt, hashlib.new(h, client_key).digest(),
                           hmac.digest(salted, b"Server Key", h), iterations)


def make_credential(mechanism: str, password: str, iterations: int = MIN_ITERATIONS,
                    salt: bytes | None = None) -> ScramCredential:
    salt = salt if salt is not None else os.urandom(32)
    return credential_from_salted(mechanism, salted_password(mechanism, password, salt,
                                                             iterations), salt, iterations)


def _unescape_name(name: str) -> str:
    if "=" in name.replace("=2C", "").replace("=3D", ""):
        raise InvalidCredentials("Invalid SCRAM user name encoding")
    return name.replace("=2C", ",").replace("=3D", "=")


def _attrs(text: str) -> list[tuple[str, str]]:
    out = []
    for part in text.split(","):
        if len(part) < 2 or part[1] != "=":
            raise InvalidCredentials(f"Invalid SCRAM message attribute {part[:20]!r}")
        out.append((part[0], part[2:]))
    return out


class ScramServer:
    """One SCRAM exchange: client-first -> server-first, client-final -> server-final."""

    def __init__(self, mechanism: str, lookup: Callable[[str, str], ScramCredential | None]) -> None:
        self.mechanism = mechanism
        self.hash = _HASH[mechanism]
        self.lookup = lookup
        self.complete = False
        self.authorization_id = ""
        self.credential_expiry_ms: int | None = None
        self._step = 0
        self._user = ""
        self._cred: ScramCredential | None = None
        self._gs2 = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        # the server's part of the nonce (fixed in tests against RFC 7677's example)
        self.server_nonce: Callable[[], str] = \
            lambda: base64.b64encode(os.urandom(24)).decode().rstrip("=")

    def evaluate(self, token: bytes) -> bytes:
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidCredentials("SCRAM message is not UTF-8") from None
        if self._step == 0:
            return self._client_first(text)
        if self._step == 1:
            return self._client_final(text)
        raise InvalidCredentials("SCRAM exchange already complete")

    def _client_first(self, text: str) -> bytes:
        # gs2-header: cbind flag (n or y: no channel binding), optional a=authzid, then the bare msg
        parts = text.split(",", 2)
        if len(parts) != 3 or parts[0] not in ("n", "y") or \
                (parts[1] and not parts[1].startswith("a=")):
            raise InvalidCredentials("Invalid SCRAM client first message")
        self._gs2 = f"{parts[0]},{parts[1]},"
        bare = parts[2]
        attrs = _attrs(bare)
        if len(attrs) < 2 or attrs[0][0] != "n" or attrs[1][0] != "r" or not attrs[1][1]:
            raise InvalidCredentials("Invalid SCRAM client first message")
        user = _unescape_name(attrs[0][1])
        authzid = _unescape_name(parts[1][2:]) if parts[1] else ""
        if authzid and authzid != user:
            raise AuthenticationFailed("Authentication failed: Client requested an authorization "
                                       "id that is different from username")
        # extensions (Kafka's tokenauth=true for delegation tokens) have multi-letter keys, which
        # _attrs refuses already; a user name or nonce that merely contains "tokenauth" is fine
        if any(k == "t" for k, _ in attrs[2:]):
            raise InvalidCredentials("Delegation token authentication is not supported")
        cred = self.lookup(user, self.mechanism)
        if cred is None:
            raise InvalidCredentials("Authentication failed: Invalid user credentials")
        self._user, self._cred, self._client_first_bare = user, cred, bare
        self._nonce = attrs[1][1] + self.server_nonce()
        salt = base64.b64encode(cred.salt).decode()
        self._server_first = f"r={self._nonce},s={salt},i={cred.iterations}"
        self._step = 1
        return self._server_first.encode()

    def _client_final(self, text: str) -> bytes:
        cred = self._cred
        assert cred is not None
        attrs = _attrs(text)
        if len(attrs) < 3 or attrs[0][0] != "c" or attrs[1][0] != "r" or attrs[-1][0] != "p":
            raise InvalidCredentials("Invalid SCRAM client final message")
        try:
            binding = base64.b64decode(attrs[0][1], validate=True)
            proof = base64.b64decode(attrs[-1][1], validate=True)
        except ValueError:
            raise InvalidCredentials("Invalid base64 in SCRAM client final message") from None
        # Kafka checks that the nonce ends with the server's (librdkafka 2.0 repeats the
        # client's part in front): the same here
        if binding != self._gs2.encode() or not attrs[1][1].endswith(self._nonce):
            raise InvalidCredentials(f"Invalid SCRAM client final message: binding {binding!r} "
                                     f"(expected {self._gs2!r}) or nonce {attrs[1][1]!r} "
                                     f"(expected {self._nonce!r})")
        without_proof = text[: text.rindex(",p=")]
        auth_message = ",".join((self._client_first_bare, self._server_first,
                                 without_proof)).encode()
        signature = hmac.digest(cred.stored_key, auth_message, self.hash)
        if len(proof) != len(signature):
            raise InvalidCredentials("Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.new(self.hash, client_key).digest(), cred.stored_key):
            raise InvalidCredentials("Invalid client credentials")
        server_sig = hmac.digest(cred.server_key, auth_message, self.hash)
        self.authorization_id = self._user
        self.complete = True
        self._step = 2
        return b"v=" + base64.b64encode(server_sig)
