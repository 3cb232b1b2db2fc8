"""SASL/OAUTHBEARER (RFC 7628, KIP-255, KIP-768).

Two validators, as Kafka's:
- unsecured JWS (OAuthBearerUnsecuredValidatorCallbackHandler, the default; for development):
  `alg: none` tokens, options unsecuredValidatorPrincipalClaimName / ScopeClaimName /
  RequiredScope / AllowableClockSkewMs from the listener's OAuthBearerLoginModule JAAS config;
- signed JWTs checked against a JWKS (OAuthBearerValidatorCallbackHandler) when
  `sasl.oauthbearer.jwks.endpoint.url` is set (file: or http(s): URL, re-read every
  sasl.oauthbearer.jwks.endpoint.refresh.ms), with sasl.oauthbearer.expected.audience,
  expected.issuer, sub.claim.name, scope.claim.name, clock.skew.seconds.

A rejected token is answered as RFC 7628 says: an error JSON challenge; the client's %x01 reply
then fails the exchange with that JSON as the message."""

from __future__ import annotations

import base64
import json
import logging
import math
import threading
import time
import urllib.request
from collections.abc import Callable
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from samsa.config import BrokerConfig, ConfigError

from . import AuthenticationFailed, InvalidCredentials

log = logging.getLogger("samsa.sasl")
VALIDATOR_CLASS = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"


class TokenInvalid(Exception):
    pass


def b64url(data: str) -> bytes:
    return base64.urlsafe_b64decode(data + "=" * (-len(data) % 4))


def _b64int(data: str) -> int:
    return int.from_bytes(b64url(data), "big")


def split_jwt(token: str) -> tuple[dict[str, Any], dict[str, Any], bytes, bytes]:
    """(header, payload, signing input, signature) of a compact JWS; TokenInvalid if malformed."""
    parts = token.split(".")
    if len(parts) != 3:
        raise TokenInvalid("not a compact JWS (header.payload.signature)")
    try:
        header = json.loads(b64url(parts[0]))
        payload = json.loads(b64url(parts[1]))
        sig = b64url(parts[2])
    except ValueError as e:
        raise TokenInvalid(f"malformed JWS: {e}") from None
    if not isinstance(header, dict) or not isinstance(payload, dict):
        raise TokenInvalid("JWS header and payload must be JSON objects")
    return header, payload, f"{parts[0]}.{parts[1]}".encode(), sig


def check_claims(payload: dict[str, Any], *, principal_claim: str, scope_claim: str,
                 required_scope: list[str], skew_ms: int, audience: list[str] | None = None,
                 issuer: str | None = None) -> tuple[str, int]:
    """(principal, expiry epoch ms) of a token's claims, else TokenInvalid."""
    now = time.time() * 1000
    exp = payload.get("exp")
    if not isinstance(exp, int | float) or isinstance(exp, bool):
        raise TokenInvalid("the token has no exp claim")
    if not math.isfinite(exp) or not 0 <= exp * 1000 < 2**63:
        raise TokenInvalid("the token's exp claim is not a time")
    if exp * 1000 + skew_ms <= now:
        raise TokenInvalid("the token has expired")
    iat = payload.get("iat")
    if iat is not None and (not isinstance(iat, int | float) or not math.isfinite(iat)
                            or iat * 1000 - skew_ms > now):
        raise TokenInvalid("the token's iat is in the future")
    nbf = payload.get("nbf")
    if isinstance(nbf, int | float) and nbf * 1000 - skew_ms > now:
        raise TokenInvalid("the token is not valid yet (nbf)")
    sub = payload.get(principal_claim)
    if not isinstance(sub, str) or not sub.strip():
        raise TokenInvalid(f"the token has no {principal_claim} claim")
    scopes = _strings(payload.get(scope_claim), scope_claim, split=True)
    missing = [s for s in required_scope if s not in scopes]
    if missing:
        raise TokenInvalid(f"the token lacks the required scope {missing}")
    if audience:
        auds = _strings(payload.get("aud"), "aud")
        if not any(a in audience for a in auds):
            raise TokenInvalid("the token's audience is not an expected audience")
    if issuer and payload.get("iss") != issuer:
        raise TokenInvalid("the token's issuer is not the expected issuer")
    return sub, int(exp * 1000)


def _strings(value: Any, claim: str, split: bool = False) -> list[str]:
    """A claim that is a string or a list of strings (absent: none); TokenInvalid otherwise, so a
    token of the wrong shape is refused as invalid, not failed as an internal error."""
    if value is None:
        return []
    if isinstance(value, str):
        return value.split() if split else [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    raise TokenInvalid(f"the token's {claim} claim is not a string or a list of strings")


class Jwks:
    """Public keys by kid, from a JWKS file or URL, refreshed in the background."""

    def __init__(self, url: str, refresh_ms: int) -> None:
        self.url = url
        self.keys: dict[str | None, Any] = {}
        self._stop = threading.Event()
        self._load()
        if refresh_ms > 0:
            t = threading.Thread(target=self._refresh_loop, args=(refresh_ms / 1000,),
                                 daemon=True, name="jwks-refresh")
            t.start()

    def _fetch(self) -> bytes:
        if self.url.startswith("file:"):
            path = self.url[5:]
            path = path[2:] if path.startswith("//") else path
            with open(path, "rb") as f:
                return f.read()
        with urllib.request.urlopen(self.url, timeout=10) as r:  # noqa: S310 (operator URL)
            return bytes(r.read())

    def _load(self) -> None:
        try:
            doc = json.loads(self._fetch())
        except (OSError, ValueError) as e:
            raise ConfigError(f"Cannot read the JWKS at {self.url}: {e}") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("keys", []), list):
            raise ConfigError(f"The JWKS at {self.url} is not a JSON object with a keys list")
        keys: dict[str | None, Any] = {}
        for k in doc.get("keys", []):
            if not isinstance(k, dict):
                log.warning("skipping a JWKS key that is not a JSON object")
                continue
            try:
                if k.get("kty") == "RSA":
                    keys[k.get("kid")] = rsa.RSAPublicNumbers(
                        _b64int(k["e"]), _b64int(k["n"])).public_key()
                elif k.get("kty") == "EC":
                    curve = {"P-256": ec.SECP256R1(), "P-384": ec.SECP384R1(),
                             "P-521": ec.SECP521R1()}[k["crv"]]
                    keys[k.get("kid")] = ec.EllipticCurvePublicNumbers(
                        _b64int(k["x"]), _b64int(k["y"]), curve).public_key()
            except (KeyError, ValueError, TypeError, AttributeError) as e:
                log.warning("skipping a JWKS key: %r", e)
        self.keys = keys

    def close(self) -> None:
        self._stop.set()

    def _refresh_loop(self, every_s: float) -> None:
        while not self._stop.wait(every_s):
            try:
                self._load()
            except ConfigError as e:
                log.warning("%s", e)
            except Exception:  # a bad document must not end the refreshing: keep the last keys
                log.exception("JWKS refresh from %s failed", self.url)

    def verify(self, header: dict[str, Any], signing_input: bytes, sig: bytes) -> None:
        alg = header.get("alg")
        kid = header.get("kid")
        if kid is not None and not isinstance(kid, str):
            raise TokenInvalid("the token's kid is not a string")
        key = self.keys.get(kid) if kid is not None else next(iter(self.keys.values()), None)
        if key is None:
            raise TokenInvalid("no JWKS key matches the token's kid")
        digests = {"256": hashes.SHA256(), "384": hashes.SHA384(), "512": hashes.SHA512()}
        if not isinstance(alg, str) or alg[2:] not in digests:
            raise TokenInvalid(f"unsupported JWS algorithm {alg!r}")
        h = digests[alg[2:]]
        try:
            if alg.startswith("RS") and isinstance(key, rsa.RSAPublicKey):
                key.verify(sig, signing_input, padding.PKCS1v15(), h)
            elif alg.startswith("PS") and isinstance(key, rsa.RSAPublicKey):
                key.verify(sig, signing_input,
                           padding.PSS(padding.MGF1(h), h.digest_size), h)
            elif alg.startswith("ES") and isinstance(key, ec.EllipticCurvePublicKey):
                n = len(sig) // 2
                der = encode_dss_signature(int.from_bytes(sig[:n], "big"),
                                           int.from_bytes(sig[n:], "big"))
                key.verify(der, signing_input, ec.ECDSA(h))
            else:
                raise TokenInvalid(f"JWS algorithm {alg} does not fit the key")
        except InvalidSignature:
            raise TokenInvalid("the token's signature is not valid") from None


Validator = Callable[[str], tuple[str, int]]


class OAuthBearerServer:
    def __init__(self, validate: Validator) -> None:
        self.validate = validate
        self.complete = False
        self.authorization_id = ""
        self.credential_expiry_ms: int | None = None
        self._error: str | None = None

    def evaluate(self, token: bytes) -> bytes:
        if token == b"\x01" and self._error is not None:
            raise AuthenticationFailed(self._error)
        self._error = None
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidCredentials("OAUTHBEARER message is not UTF-8") from None
        gs2, sep, rest = text.partition("\x01")
        g = gs2.split(",")
        if not sep or len(g) != 3 or g[0] not in ("n", "y") or g[2] or \
                (g[1] and not g[1].startswith("a=")) or not rest.endswith("\x01\x01"):
            raise InvalidCredentials("Invalid OAUTHBEARER client first message")
        kv = {}
        for item in rest[:-2].split("\x01"):
            k, eq, v = item.partition("=")
            if not eq:
                raise InvalidCredentials("Invalid OAUTHBEARER key/value")
            kv[k] = v
        auth = kv.get("auth", "")
        if not auth.startswith("Bearer "):
            raise InvalidCredentials("Invalid OAUTHBEARER auth value")
        try:
            principal, expiry = self.validate(auth[7:].strip())
        except TokenInvalid as e:
            log.info("OAUTHBEARER token rejected: %s", e)
            self._error = json.dumps({"status": "invalid_token"}, separators=(",", ":"))
            return self._error.encode()
        authzid = g[1][2:]
        if authzid and authzid != principal:
            raise AuthenticationFailed(f"Authentication failed: Client requested an "
                                       f"authorization id ({authzid}) that is different from "
                                       f"the token's principal name ({principal})")
        self.authorization_id = principal
        self.credential_expiry_ms = expiry
        self.complete = True
        return b""


def unsecured_validator(options: dict[str, str]) -> Validator:
    principal_claim = options.get("unsecuredValidatorPrincipalClaimName", "sub")
    scope_claim = options.get("unsecuredValidatorScopeClaimName", "scope")
    required = (options.get("unsecuredValidatorRequiredScope") or "").replace(",", " ").split()
    skew = int(options.get("unsecuredValidatorAllowableClockSkewMs", "0"))

    def validate(token: str) -> tuple[str, int]:
        header, payload, _, _ = split_jwt(token)
        if header.get("alg") != "none":
            raise TokenInvalid("an unsecured token must have alg none")
        return check_claims(payload, principal_claim=principal_claim, scope_claim=scope_claim,
                            required_scope=required, skew_ms=skew)
    return validate


def jwks_validator(config: BrokerConfig, listener: str) -> Validator:
    from .listeners import listener_value

    def get(name: str) -> str | None:
        return listener_value(config, listener, name)

    jwks = Jwks(get("sasl.oauthbearer.jwks.endpoint.url") or "",
                int(get("sasl.oauthbearer.jwks.endpoint.refresh.ms") or 3600000))
    audience = [a.strip() for a in (get("sasl.oauthbearer.expected.audience") or "").split(",")
                if a.strip()]
    issuer = get("sasl.oauthbearer.expected.issuer") or None
    sub_claim = get("sasl.oauthbearer.sub.claim.name") or "sub"
    scope_claim = get("sasl.oauthbearer.scope.claim.name") or "scope"
    skew_ms = int(get("sasl.oauthbearer.clock.skew.seconds") or 30) * 1000

    def validate(token: str) -> tuple[str, int]:
        header, payload, signing_input, sig = split_jwt(token)
        jwks.verify(header, signing_input, sig)
        return check_claims(payload, principal_claim=sub_claim, scope_claim=scope_claim,
                            required_scope=[], skew_ms=skew_ms, audience=audience, issuer=issuer)
    return validate


def oauth_factory(config: BrokerConfig, listener: str,
                  jaas: tuple[str, dict[str, str]] | None) -> Callable[[], OAuthBearerServer]:
    from .listeners import OAUTH_LOGIN_MODULE, listener_value

    if jaas is not None and jaas[0] != OAUTH_LOGIN_MODULE:
        raise ConfigError(f"Listener {listener}: the OAUTHBEARER JAAS config must use "
                          f"{OAUTH_LOGIN_MODULE}")
    handler = config.values.get(f"listener.name.{listener.lower()}.oauthbearer.sasl.server."
                                f"callback.handler.class")
    if listener_value(config, listener, "sasl.oauthbearer.jwks.endpoint.url"):
        validate = jwks_validator(config, listener)
    elif handler == VALIDATOR_CLASS:
        raise ConfigError(f"Listener {listener}: {VALIDATOR_CLASS} needs "
                          f"sasl.oauthbearer.jwks.endpoint.url")
    else:
        validate = unsecured_validator(jaas[1] if jaas else {})
    return lambda: OAuthBearerServer(validate)
