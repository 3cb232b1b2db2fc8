"""OAUTHBEARER tokens whose claims have the wrong shape (a numeric scope, an infinite or
far-future exp, a NaN iat): each is refused as RFC 7628 says (an invalid_token challenge, then
SASL_AUTHENTICATION_FAILED), never an internal error that drops the connection unanswered, and
the broker keeps authenticating good tokens."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from samsa.testing import SamsaBroker, free_port
from tests.sasl_util import b64url
from tests.wire import Wire

pytestmark = pytest.mark.timeout(120)
HANDSHAKE, AUTHENTICATE = 17, 36


@pytest.fixture(scope="module")
def sasl_bs() -> Iterator[str]:
    plain, sasl = free_port(), free_port()
    overrides = {"listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
                 "sasl.enabled.mechanisms": "OAUTHBEARER"}
    with SamsaBroker(port=plain, overrides=overrides) as _:
        yield f"127.0.0.1:{sasl}"


def _token(claims_json: str) -> str:
    """An unsecured JWS of exactly this claims text (json.dumps cannot write every shape)."""
    return b64url(b'{"alg":"none"}') + "." + b64url(claims_json.encode()) + "."


def _login(bs: str, token: str) -> tuple[Wire, Any]:
    w = Wire(bs, timeout=15)
    assert w.request(HANDSHAKE, 1, {"mechanism": "OAUTHBEARER"}).error_code == 0
    return w, w.request(AUTHENTICATE, 2, {"auth_bytes": f"n,,\x01auth=Bearer {token}\x01\x01".encode()})


# the expiry is filled in when a test runs: a time in a parameter would give each xdist worker
# different test ids
EXP = "@EXP@"
SHAPES = [
    f'{{"sub":"alice","exp":{EXP},"scope":5}}',
    f'{{"sub":"alice","exp":{EXP},"scope":{{"a":1}}}}',
    f'{{"sub":"alice","exp":{EXP},"scope":["a",7]}}',
    '{"sub":"alice","exp":Infinity}',
    '{"sub":"alice","exp":NaN}',
    '{"sub":"alice","exp":1e300}',
    f'{{"sub":"alice","exp":{10**30}}}',
    f'{{"sub":"alice","exp":{EXP},"iat":NaN}}',
]


def _good_exp() -> str:
    return str(int(time.time()) + 3600)


@pytest.mark.parametrize("claims", SHAPES)
def test_malformed_claims_get_invalid_token(sasl_bs: str, claims: str) -> None:
    w, r = _login(sasl_bs, _token(claims.replace(EXP, _good_exp())))
    try:
        assert r.error_code == 0 and json.loads(r.auth_bytes) == {"status": "invalid_token"}
        r = w.request(AUTHENTICATE, 2, {"auth_bytes": b"\x01"})
        assert r.error_code == 58 and json.loads(r.error_message) == {"status": "invalid_token"}
        assert w.is_closed()
    finally:
        w.close()


def test_good_token_still_authenticates(sasl_bs: str) -> None:
    w, r = _login(sasl_bs, _token(f'{{"sub":"alice","exp":{_good_exp()},"scope":"a b"}}'))
    try:
        assert r.error_code == 0 and r.auth_bytes == b""
    finally:
        w.close()
