"""The OAUTHBEARER JWKS refresh survives a bad document: while the JWKS endpoint serves something
that is not a key set (a JSON list, keys that are not objects or have fields of the wrong type),
the broker keeps the keys it had and keeps refreshing, so a key published afterwards is used."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from samsa.testing import SamsaBroker, free_port
from tests.sasl_util import jwks_for, signed_jwt
from tests.wire import Wire

pytestmark = pytest.mark.timeout(120)
HANDSHAKE, AUTHENTICATE = 17, 36


def _login(bs: str, key: Any, kid: str) -> int:
    w = Wire(bs, timeout=15)
    try:
        assert w.request(HANDSHAKE, 1, {"mechanism": "OAUTHBEARER"}).error_code == 0
        token = signed_jwt(key, kid, {"sub": "svc", "aud": "kafka", "exp": int(time.time()) + 300})
        r = w.request(AUTHENTICATE, 2, {"auth_bytes": f"n,,\x01auth=Bearer {token}\x01\x01".encode()})
        return 0 if r.error_code == 0 and r.auth_bytes == b"" else 1
    finally:
        w.close()


def test_jwks_refresh_survives_a_bad_document(tmp_path: Path) -> None:
    k1 = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    k2 = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps(jwks_for(k1, "k1")))
    plain, sasl = free_port(), free_port()
    overrides = {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class":
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config":
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required ;",
        "sasl.oauthbearer.jwks.endpoint.url": jwks.as_uri(),
        "sasl.oauthbearer.jwks.endpoint.refresh.ms": "200",
        "sasl.oauthbearer.expected.audience": "kafka"}
    bs = f"127.0.0.1:{sasl}"
    with SamsaBroker(port=plain, overrides=overrides):
        assert _login(bs, k1, "k1") == 0
        jwks.write_text("[]")  # not a key set: the keys stay as they were
        time.sleep(1.0)  # a few refresh rounds
        assert _login(bs, k1, "k1") == 0
        good = jwks_for(k2, "k2")["keys"][0]
        jwks.write_text(json.dumps({"keys": ["junk", {"kty": "RSA", "kid": "bad", "n": 5, "e": 3},
                                            good]}))
        deadline = time.monotonic() + 20
        while _login(bs, k2, "k2") != 0:
            assert time.monotonic() < deadline, "the key published after a bad document never came"
            time.sleep(0.2)
