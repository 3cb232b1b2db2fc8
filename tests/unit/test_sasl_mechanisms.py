"""SASL mechanism servers on their own: PLAIN, SCRAM (RFC 7677's example exchange), OAUTHBEARER
(unsecured JWS and JWKS-verified JWTs), the JAAS config parser, and the SCRAM metadata records."""

from __future__ import annotations

import base64
import json
import time

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from samsa.cluster.metadata import records as rec
from samsa.cluster.metadata.image import MetadataImage
from samsa.config import BrokerConfig, ConfigError
from samsa.security.sasl import AuthenticationFailed, InvalidCredentials
from samsa.security.sasl.jaas import parse_jaas
from samsa.security.sasl.listeners import build_listener
from samsa.security.sasl.oauthbearer import OAuthBearerServer, TokenInvalid, unsecured_validator
from samsa.security.sasl.plain import PlainServer
from samsa.security.sasl.scram import ScramServer, make_credential
from tests.sasl_util import b64url, jwks_for, scram_client_final, signed_jwt, unsecured_jwt


def test_jaas_parse_plain_users() -> None:
    mod, opts = parse_jaas('org.apache.kafka.common.security.plain.PlainLoginModule required '
                           'username="admin" password="a s\\"ecret" user_admin="a s\\"ecret" '
                           'user_alice=alice-pw;')
    assert mod == "org.apache.kafka.common.security.plain.PlainLoginModule"
    assert opts == {"username": "admin", "password": 'a s"ecret', "user_admin": 'a s"ecret',
                    "user_alice": "alice-pw"}
    with pytest.raises(ConfigError):
        parse_jaas("org.x.Y required a=b")  # no ';'
    with pytest.raises(ConfigError):
        parse_jaas("nonsense")


def test_plain() -> None:
    s = PlainServer({"alice": "pw"})
    assert s.evaluate(b"\0alice\0pw") == b"" and s.complete and s.authorization_id == "alice"
    for token, msg in [(b"\0alice\0bad", "Authentication failed: Invalid username or password"),
                       (b"\0bob\0pw", "Authentication failed: Invalid username or password"),
                       (b"bob\0alice\0pw", "authorization id that is different")]:
        with pytest.raises(AuthenticationFailed, match=msg):
            PlainServer({"alice": "pw"}).evaluate(token)
    # Kafka's SaslExceptions: the client gets only the generic message
    for token, msg in [(b"\0\0pw", "username not specified"),
                       (b"\0alice\0", "password not specified")]:
        with pytest.raises(InvalidCredentials, match=msg):
            PlainServer({"alice": "pw"}).evaluate(token)
    with pytest.raises(InvalidCredentials):
        PlainServer({"alice": "pw"}).evaluate(b"alice-pw")
    with pytest.raises(InvalidCredentials):
        PlainServer({"alice": "pw"}).evaluate(b"\xff\0a\0b")


def test_scram_sha256_rfc7677_example() -> None:
    """RFC 7677 section 3: user 'user', password 'pencil'; the server's proof must match."""
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    cred = make_credential("SCRAM-SHA-256", "pencil", 4096, salt)
    s = ScramServer("SCRAM-SHA-256", lambda u, m: cred if u == "user" else None)
    s.server_nonce = lambda: "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
    first = s.evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert first == (b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                     b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    final = s.evaluate(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                       b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert s.complete and s.authorization_id == "user"


@pytest.mark.parametrize("mech", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_wrong_password_and_unknown_user(mech: str) -> None:
    cred = make_credential(mech, "right")
    s = ScramServer(mech, lambda u, m: cred if u == "alice" else None)
    first = s.evaluate(b"n,,n=alice,r=abc").decode()
    with pytest.raises(InvalidCredentials):
        s.evaluate(scram_client_final(mech, "wrong", "n,,", "n=alice,r=abc", first).encode())
    assert not s.complete
    ok = ScramServer(mech, lambda u, m: cred)
    first = ok.evaluate(b"n,,n=alice,r=xyz").decode()
    ok.evaluate(scram_client_final(mech, "right", "n,,", "n=alice,r=xyz", first).encode())
    assert ok.complete
    with pytest.raises(InvalidCredentials):
        ScramServer(mech, lambda u, m: None).evaluate(b"n,,n=bob,r=abc")
    for garbage in [b"", b"x", b"n,,", b"n,,r=a,n=b", b"p=tls-unique,,n=a,r=b", b"\xff\xfe"]:
        with pytest.raises(InvalidCredentials):
            ScramServer(mech, lambda u, m: cred).evaluate(garbage)


def test_oauthbearer_unsecured() -> None:
    v = unsecured_validator({})
    now = int(time.time())
    good = unsecured_jwt({"sub": "alice", "exp": now + 60, "iat": now})
    s = OAuthBearerServer(v)
    assert s.evaluate(f"n,,\x01auth=Bearer {good}\x01\x01".encode()) == b""
    assert s.complete and s.authorization_id == "alice"
    assert s.credential_expiry_ms == (now + 60) * 1000
    expired = unsecured_jwt({"sub": "alice", "exp": now - 10, "iat": now - 100})
    s = OAuthBearerServer(v)
    challenge = s.evaluate(f"n,,\x01auth=Bearer {expired}\x01\x01".encode())
    assert json.loads(challenge) == {"status": "invalid_token"} and not s.complete
    with pytest.raises(AuthenticationFailed, match="invalid_token"):
        s.evaluate(b"\x01")
    with pytest.raises(InvalidCredentials):
        OAuthBearerServer(v).evaluate(b"n,,auth=Bearer x")
    with pytest.raises(TokenInvalid, match="alg none"):
        v(b64url(b'{"alg":"RS256"}') + "." + b64url(b'{"sub":"a","exp":9999999999}') + ".")
    scoped = unsecured_validator({"unsecuredValidatorRequiredScope": "kafka"})
    with pytest.raises(TokenInvalid, match="scope"):
        scoped(unsecured_jwt({"sub": "a", "exp": now + 60}))
    assert scoped(unsecured_jwt({"sub": "a", "exp": now + 60, "scope": "x kafka"}))[0] == "a"


def test_oauthbearer_jwks_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps(jwks_for(key, "k1")))
    cfg = BrokerConfig({
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        "sasl.oauthbearer.jwks.endpoint.url": jwks.as_uri(),
        "sasl.oauthbearer.expected.audience": "kafka",
        "sasl.oauthbearer.expected.issuer": "https://issuer"})
    lst = build_listener(cfg, "SASL_PLAINTEXT", "SASL_PLAINTEXT", lambda u, m: None)
    now = int(time.time())
    claims = {"sub": "svc", "exp": now + 300, "iat": now, "aud": "kafka", "iss": "https://issuer"}

    def run(token: str) -> bytes:
        s = lst.factories["OAUTHBEARER"]()
        out = s.evaluate(f"n,,\x01auth=Bearer {token}\x01\x01".encode())
        assert s.complete == (out == b"")
        return out

    assert run(signed_jwt(key, "k1", claims)) == b""
    for bad in [signed_jwt(other, "k1", claims),  # wrong key
                signed_jwt(key, "k1", {**claims, "aud": "other"}),
                signed_jwt(key, "k1", {**claims, "iss": "evil"}),
                signed_jwt(key, "k1", {**claims, "exp": now - 120}),
                signed_jwt(key, "nope", claims),
                unsecured_jwt(claims)]:
        assert json.loads(run(bad)) == {"status": "invalid_token"}
    # a tampered payload fails the signature check
    h, p, sig = signed_jwt(key, "k1", claims).split(".")
    forged = b64url(json.dumps({**claims, "sub": "admin"}).encode())
    assert json.loads(run(f"{h}.{forged}.{sig}")) == {"status": "invalid_token"}


def test_listener_config_checks() -> None:
    with pytest.raises(ConfigError, match="GSSAPI"):
        build_listener(BrokerConfig({}), "SASL_PLAINTEXT", "SASL_PLAINTEXT", lambda u, m: None)
    with pytest.raises(ConfigError, match="JAAS"):
        build_listener(BrokerConfig({"sasl.enabled.mechanisms": "PLAIN"}), "SASL_PLAINTEXT",
                       "SASL_PLAINTEXT", lambda u, m: None)
    cfg = BrokerConfig({
        "sasl.enabled.mechanisms": "SCRAM-SHA-256",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="b";',
        "listener.name.sasl_plaintext.connections.max.reauth.ms": "5000"})
    lst = build_listener(cfg, "SASL_PLAINTEXT", "SASL_PLAINTEXT", lambda u, m: None)
    assert lst.mechanisms == ["PLAIN", "SCRAM-SHA-512"] and lst.reauth_ms == 5000
    assert lst.factories["PLAIN"]().evaluate(b"\0a\0b") == b""


def test_scram_records_round_trip_and_image() -> None:
    c = make_credential("SCRAM-SHA-512", "pw", 8192)
    r = rec.UserScramCredentialRecord("alice", 2, c.salt, c.stored_key, c.server_key, 8192)
    assert rec.decode(rec.encode(r)) == r
    d = rec.RemoveUserScramCredentialRecord("alice", 2)
    assert rec.decode(rec.encode(d)) == d
    img = MetadataImage()
    img.apply(r)
    assert img.scram_credentials[("alice", 2)] == r
    assert r in img.to_records()
    img.apply(d)
    assert img.scram_credentials == {}
    with pytest.raises(rec.MetadataRecordError):
        rec.decode(rec.encode(r)[:-3])


def test_jwks_from_http_url_and_refreshed_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import http.server
    import threading

    from samsa.security.sasl.oauthbearer import Jwks

    k1 = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    k2 = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    body = json.dumps(jwks_for(k1, "a")).encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    srv = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        jw = Jwks(f"http://127.0.0.1:{srv.server_address[1]}/jwks.json", 0)
        assert set(jw.keys) == {"a"}
    finally:
        srv.shutdown()
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps(jwks_for(k1, "a")))
    jw = Jwks(path.as_uri(), 50)
    path.write_text(json.dumps(jwks_for(k2, "b")))  # a rotated key set
    deadline = time.monotonic() + 10
    while "b" not in jw.keys and time.monotonic() < deadline:
        time.sleep(0.05)
    jw.close()
    assert set(jw.keys) == {"b"}
    with pytest.raises(ConfigError, match="Cannot read the JWKS"):
        Jwks((tmp_path / "missing.json").as_uri(), 0)


def test_scram_final_nonce_may_repeat_the_client_part_but_must_end_with_the_servers() -> None:
    """librdkafka 2.0 (kcat's Debian package) sends client nonce + server nonce in its final
    message; Kafka accepts a nonce that ends with the server's, and so does Samsa."""
    cred = make_credential("SCRAM-SHA-256", "pw")
    for prefix in ["cn", "", "zz"]:
        s = ScramServer("SCRAM-SHA-256", lambda u, m: cred)
        first = s.evaluate(b"n,,n=u,r=cn").decode()
        nonce = dict(a.split("=", 1) for a in first.split(","))["r"]
        final = scram_client_final("SCRAM-SHA-256", "pw", "n,,", "n=u,r=cn", first,
                                   nonce=prefix + nonce)
        assert s.evaluate(final.encode()).startswith(b"v=") and s.complete
    s = ScramServer("SCRAM-SHA-256", lambda u, m: cred)
    first = s.evaluate(b"n,,n=u,r=cn").decode()
    nonce = dict(a.split("=", 1) for a in first.split(","))["r"]
    final = scram_client_final("SCRAM-SHA-256", "pw", "n,,", "n=u,r=cn", first,
                               nonce=nonce + "x")
    with pytest.raises(InvalidCredentials, match="nonce"):
        s.evaluate(final.encode())
