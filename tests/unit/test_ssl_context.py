"""Server TLS contexts from Kafka's ssl.* settings, per-listener overrides, and reload (in-process
TLS handshakes on loopback; the broker-level behaviour is in tests/integration/security)."""

from __future__ import annotations

import re
import socket
import ssl
import threading
from pathlib import Path

import pytest

from samsa.config import BrokerConfig, ConfigError, is_read_only, validate_broker_configs
from samsa.security.ssl_context import ListenerTls, openssl_cipher
from samsa.testing.tls import TlsFiles, client_dn


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return TlsFiles.create(tmp_path_factory.mktemp("tls"), clients=("alice",))


def _serve_once(tls_side: ListenerTls) -> tuple[int, threading.Thread, dict[str, object]]:
    """A one-connection TLS server thread using the listener's current context."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    out: dict[str, object] = {}

    def run() -> None:
        conn, _ = srv.accept()
        try:
            with tls_side.current.wrap_socket(conn, server_side=True) as s:
                out["principal"] = str(tls_side.principal(s))  # type: ignore[arg-type]
                s.recv(1)
        except (OSError, ssl.SSLError) as e:
            out["error"] = e
        finally:
            srv.close()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return srv.getsockname()[1], t, out


def _handshake(tls: TlsFiles, port: int, client: str | None = None, sni: bool = False) -> bytes:
    """Connect (by IP, without SNI unless asked, as librdkafka does), return the server's DER."""
    ctx = ssl.create_default_context(cafile=str(tls.ca_file))
    ctx.check_hostname = sni
    if client:
        ctx.load_cert_chain(*map(str, tls.clients[client]))
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
            ctx.wrap_socket(raw, server_hostname="localhost" if sni else None) as s:
        der = s.getpeercert(binary_form=True)
        s.sendall(b"x")
        assert der is not None
        return der


def _pem_blocks(text: str) -> list[str]:
    return re.findall(r"-----BEGIN [A-Z ]+-----\n.*?-----END [A-Z ]+-----\n", text, re.S)


def _lookup(values: dict[str, str]):  # type: ignore[no-untyped-def]
    cfg = BrokerConfig(values)
    return cfg.get


def test_listener_prefix_wins_and_principal(tls: TlsFiles) -> None:
    lt = ListenerTls("SSL", "SSL", _lookup({
        "ssl.keystore.location": "/nonexistent.pem",
        **tls.broker_ssl("requested", prefix="listener.name.ssl.")}))
    port, t, out = _serve_once(lt)
    _handshake(tls, port, "alice")
    t.join(10)
    assert out["principal"] == f"User:{client_dn('alice')}"
    port, t, out = _serve_once(lt)
    _handshake(tls, port)  # requested: no certificate is fine, and anonymous
    t.join(10)
    assert out["principal"] == "User:ANONYMOUS"


def test_required_refuses_a_client_without_certificate(tls: TlsFiles) -> None:
    lt = ListenerTls("SSL", "SSL", _lookup(tls.broker_ssl("required")))
    port, t, out = _serve_once(lt)
    ctx = ssl.create_default_context(cafile=str(tls.ca_file))
    ctx.check_hostname = False
    refused = False
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
                ctx.wrap_socket(raw) as s:
            # TLS 1.3: the server checks the client after the client's handshake ends, so the
            # refusal (an alert, then the close) shows on the first read
            refused = s.recv(1) == b""
    except (ssl.SSLError, ConnectionResetError):
        refused = True
    t.join(10)
    assert refused
    assert isinstance(out.get("error"), ssl.SSLError)


@pytest.mark.parametrize("sni", [False, True])
def test_reload_switches_new_handshakes_to_the_renewed_certificate(tmp_path: Path,
                                                                   sni: bool) -> None:
    tls = TlsFiles.create(tmp_path)
    lt = ListenerTls("SSL", "SSL", _lookup(tls.broker_ssl()))
    port, t, _ = _serve_once(lt)
    before = _handshake(tls, port, sni=sni)
    t.join(10)
    tls.renew_server()
    assert lt.reload() is False  # same settings: nothing to do unless forced
    assert lt.reload(force=True) is True
    port, t, _ = _serve_once(lt)
    after = _handshake(tls, port, sni=sni)
    t.join(10)
    assert before != after
    assert after == ssl.PEM_cert_to_DER_cert(_pem_blocks(tls.server_file.read_text())[1])


def test_failed_reload_keeps_the_old_certificate(tmp_path: Path) -> None:
    tls = TlsFiles.create(tmp_path)
    values = tls.broker_ssl()
    lt = ListenerTls("SSL", "SSL", lambda k: values.get(k))
    values["ssl.keystore.location"] = str(tmp_path / "missing.pem")
    with pytest.raises(ConfigError, match="Failed to load SSL key store"):
        lt.reload()
    port, t, _ = _serve_once(lt)
    assert _handshake(tls, port)
    t.join(10)


def test_inline_pem_key_store(tls: TlsFiles) -> None:
    key, *chain = _pem_blocks(tls.server_file.read_text())
    lt = ListenerTls("SSL", "SSL", _lookup({
        "ssl.keystore.certificate.chain": "".join(chain), "ssl.keystore.key": key}))
    port, t, _ = _serve_once(lt)
    assert _handshake(tls, port)
    t.join(10)


@pytest.mark.parametrize(("values", "why"), [
    ({"ssl.keystore.type": "JKS"}, "PEM key stores only"),
    ({"ssl.keystore.password": "secret"}, "password cannot be specified with PEM format"),
    ({"ssl.enabled.protocols": "TLSv1"}, "supports TLSv1.2 and TLSv1.3"),
    ({"ssl.keystore.location": "/nonexistent.pem"}, "Failed to load SSL key store"),
    ({"ssl.cipher.suites": "NOT_A_CIPHER"}, "Invalid ssl.cipher.suites"),
])
def test_bad_settings(tls: TlsFiles, values: dict[str, str], why: str) -> None:
    with pytest.raises(ConfigError, match=why):
        ListenerTls("SSL", "SSL", _lookup({**tls.broker_ssl(), **values}))


def test_no_key_store() -> None:
    with pytest.raises(ConfigError, match="needs a key store"):
        ListenerTls("SSL", "SSL", _lookup({}))


def test_tls12_only_with_a_cipher_suite(tls: TlsFiles) -> None:
    lt = ListenerTls("SSL", "SSL", _lookup({
        **tls.broker_ssl(), "ssl.enabled.protocols": "TLSv1.2",
        "ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"}))
    port, t, _ = _serve_once(lt)
    ctx = ssl.create_default_context(cafile=str(tls.ca_file))
    ctx.check_hostname = False
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
            ctx.wrap_socket(raw) as s:
        assert s.version() == "TLSv1.2"
        assert s.cipher()[0] == "ECDHE-ECDSA-AES256-GCM-SHA384"  # type: ignore[index]
        s.sendall(b"x")
    t.join(10)


def test_cipher_names() -> None:
    assert openssl_cipher("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256") == \
        "ECDHE-RSA-AES128-GCM-SHA256"
    assert openssl_cipher("TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256") == \
        "ECDHE-ECDSA-CHACHA20-POLY1305-SHA256"
    assert openssl_cipher("ECDHE-RSA-AES256-GCM-SHA384") == "ECDHE-RSA-AES256-GCM-SHA384"


def test_listener_ssl_settings_are_dynamic_per_broker() -> None:
    assert not is_read_only("listener.name.ssl.ssl.keystore.location")
    assert not is_read_only("listener.name.ssl.ssl.truststore.certificates")
    assert is_read_only("listener.name.ssl.ssl.client.auth")
    assert is_read_only("ssl.principal.mapping.rules")
    validate_broker_configs({"listener.name.external.ssl.client.auth": "required"})
    with pytest.raises(ConfigError):
        validate_broker_configs({"listener.name.external.ssl.client.auth": "sometimes"})


def test_sasl_ssl_takes_only_a_listener_prefixed_client_auth(tls: TlsFiles) -> None:
    """KIP-684: a plain ssl.client.auth=required does not apply to a SASL_SSL listener."""
    plain = {**tls.broker_ssl("required")}
    assert ListenerTls("SASL_SSL", "SASL_SSL", _lookup(plain)).current.verify_mode == \
        ssl.CERT_NONE
    assert ListenerTls("SSL", "SSL", _lookup(plain)).current.verify_mode == ssl.CERT_REQUIRED
    prefixed = {**plain, "listener.name.sasl_ssl.ssl.client.auth": "requested"}
    assert ListenerTls("SASL_SSL", "SASL_SSL", _lookup(prefixed)).current.verify_mode == \
        ssl.CERT_OPTIONAL
