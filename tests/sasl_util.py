"""Client-side SASL pieces for tests: SCRAM client proofs (RFC 5802), JWTs (unsecured and
RS256-signed) and their JWKS, broker overrides for SASL listeners."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import shutil
import subprocess
import time
import uuid
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
_H = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def unsecured_jwt(claims: dict[str, Any]) -> str:
    head = b64url(b'{"alg":"none"}')
    return f"{head}.{b64url(json.dumps(claims).encode())}."


def signed_jwt(key: rsa.RSAPrivateKey, kid: str, claims: dict[str, Any]) -> str:
    head = b64url(json.dumps({"alg": "RS256", "typ": "JWT", "kid": kid}).encode())
    body = b64url(json.dumps(claims).encode())
    sig = key.sign(f"{head}.{body}".encode(), padding.PKCS1v15(), hashes.SHA256())
    return f"{head}.{body}.{b64url(sig)}"


def jwks_for(key: rsa.RSAPrivateKey, kid: str) -> dict[str, Any]:
    pub = key.public_key().public_numbers()

    def enc(n: int) -> str:
        return b64url(n.to_bytes((n.bit_length() + 7) // 8, "big"))
    return {"keys": [{"kty": "RSA", "kid": kid, "alg": "RS256", "use": "sig",
                      "n": enc(pub.n), "e": enc(pub.e)}]}


def scram_client_final(mech: str, password: str, gs2: str, client_first_bare: str,
                       server_first: str, nonce: str | None = None) -> str:
    h = _H[mech]
    attrs = dict(a.split("=", 1) for a in server_first.split(","))
    salted = hashlib.pbkdf2_hmac(h, password.encode(), base64.b64decode(attrs["s"]),
                                 int(attrs["i"]))
    client_key = hmac.digest(salted, b"Client Key", h)
    stored = hashlib.new(h, client_key).digest()
    without_proof = f"c={base64.b64encode(gs2.encode()).decode()},r={nonce or attrs['r']}"
    auth = f"{client_first_bare},{server_first},{without_proof}".encode()
    sig = hmac.digest(stored, auth, h)
    proof = bytes(a ^ b for a, b in zip(client_key, sig, strict=True))
    return f"{without_proof},p={base64.b64encode(proof).decode()}"


def plain_jaas(users: dict[str, str]) -> str:
    opts = " ".join(f'user_{u}="{p}"' for u, p in users.items())
    return f"{PLAIN_MODULE} required {opts};"


def create_scram(admin_bs: str, user: str, password: str, mech: str = "SCRAM-SHA-256",
                 iterations: int = 4096) -> None:
    a = AdminClient({"bootstrap.servers": admin_bs})
    m = ScramMechanism.SCRAM_SHA_256 if mech == "SCRAM-SHA-256" else ScramMechanism.SCRAM_SHA_512
    futs = a.alter_user_scram_credentials([UserScramCredentialUpsertion(
        user, ScramCredentialInfo(m, iterations), password.encode())])
    for f in futs.values():
        f.result(timeout=20)


def roundtrip_confluent(bs: str, conf: dict[str, Any], topic: str, n: int = 5) -> list[bytes]:
    p = Producer({"bootstrap.servers": bs, **conf})
    for i in range(n):
        p.produce(topic, f"m{i}".encode())
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": bs, "group.id": f"g-{uuid.uuid4().hex[:8]}",
                  "auto.offset.reset": "earliest", **conf})
    c.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < n and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value())
    c.close()
    return got


def kcat(bs: str, props: dict[str, str], *args: str, stdin: str | None = None) \
        -> subprocess.CompletedProcess[str]:
    exe = shutil.which("kcat") or shutil.which("kafkacat")
    assert exe, "kcat is not installed"
    x = [a for k, v in props.items() for a in ("-X", f"{k}={v}")]
    return subprocess.run([exe, "-b", bs, *x, *args], input=stdin, capture_output=True,
                          text=True, timeout=60)


def first_values(consumer: Any, n: int) -> list[bytes]:
    """The first n values a kafka-python consumer yields (stops there, bounded by its
    consumer_timeout_ms)."""
    out: list[bytes] = []
    for m in consumer:
        out.append(m.value)
        if len(out) == n:
            break
    return out
