"""Certificate reload without a restart, as Kafka's dynamic listener config: an
IncrementalAlterConfigs of listener.name.<l>.ssl.keystore.location on the broker resource (a new
file, or the same path after the file was renewed in place) switches new TLS connections to the
new certificate; connections already open carry on; a key store that does not load is refused
with INVALID_REQUEST and the old certificate stays."""

from __future__ import annotations

import socket
import ssl
import time
from collections.abc import Iterator

import pytest

from samsa.testing import SamsaBroker, free_port
from samsa.testing.tls import TlsFiles, ssl_listener_overrides
from tests.wire import Wire

pytestmark = [pytest.mark.timeout(120)]

KEY = "listener.name.ssl.ssl.keystore.location"


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return TlsFiles.create(tmp_path_factory.mktemp("tls-reload"))


@pytest.fixture(scope="module")
def broker(tls: TlsFiles) -> Iterator[tuple[SamsaBroker, int]]:
    plain = free_port()
    overrides, ssl_port = ssl_listener_overrides(tls, plain)
    # PLAINTEXT last: SamsaBroker waits on it, so the SSL listener is bound when it answers
    overrides["listeners"] = f"SSL://127.0.0.1:{ssl_port},PLAINTEXT://127.0.0.1:{plain}"
    with SamsaBroker(port=plain, overrides=overrides) as b:
        yield b, ssl_port


def _served_cert(tls: TlsFiles, port: int) -> bytes:
    ctx = tls.ssl_context()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
            ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
        der = s.getpeercert(binary_form=True)
        assert der is not None
        return der


def _file_cert(path: object) -> bytes:
    text = open(str(path)).read()
    start = text.index("-----BEGIN CERTIFICATE-----")
    end = text.index("-----END CERTIFICATE-----") + len("-----END CERTIFICATE-----")
    return ssl.PEM_cert_to_DER_cert(text[start:end] + "\n")


def _set(b: SamsaBroker, name: str, value: str, resource: str = "1") -> None:
    if resource == "":  # the cluster default: neither client library names resource ""
        w = Wire(b.bootstrap)
        try:
            resp = w.request(44, 1, {"resources": [{
                "resource_type": 4, "resource_name": "", "configs": [
                    {"name": name, "config_operation": 0, "value": value}]}],
                "validate_only": False})
        finally:
            w.close()
        r = resp.responses[0]
        if int(r.error_code):
            raise RuntimeError(f"error {int(r.error_code)}: {r.error_message}")
        return
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    res = ConfigResource(ResourceType.BROKER, resource, incremental_configs=[ConfigEntry(
        name, value, incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(30)


def _wait_served(tls: TlsFiles, port: int, want: bytes) -> bytes:
    got = b""
    for _ in range(100):  # bounded: the change reaches the listener through the metadata log
        got = _served_cert(tls, port)
        if got == want:
            break
        time.sleep(0.1)
    return got


def test_renewed_certificate_is_served_without_restart(broker: tuple[SamsaBroker, int],
                                                       tls: TlsFiles) -> None:
    from confluent_kafka import Producer

    b, port = broker
    pid = b.proc.pid if b.proc else None
    first = _served_cert(tls, port)
    assert first == _file_cert(tls.server_file)
    # a producer connected over TLS before the reload
    prod = Producer({"bootstrap.servers": f"127.0.0.1:{port}", **tls.confluent()})
    prod.produce("reload-topic", b"before")
    assert prod.flush(30) == 0

    # 1. a new key store file
    new = tls.renew_server(tls.root / "server-2.pem")
    _set(b, KEY, str(new))
    assert _wait_served(tls, port, _file_cert(new)) == _file_cert(new) != first

    # 2. the same path, renewed in place, set again (Kafka reloads on an update to the same path)
    second = _file_cert(new)
    tls.renew_server(new)
    assert _file_cert(new) != second
    _set(b, KEY, str(new))
    assert _wait_served(tls, port, _file_cert(new)) == _file_cert(new)

    # the connection made before the reloads still works, and the broker never restarted
    prod.produce("reload-topic", b"after")
    assert prod.flush(30) == 0
    assert b.proc is not None and b.proc.pid == pid and b.proc.poll() is None


def test_a_key_store_that_does_not_load_is_refused(broker: tuple[SamsaBroker, int],
                                                   tls: TlsFiles) -> None:
    b, port = broker
    before = _served_cert(tls, port)
    bad = tls.root / "not-a-keystore.pem"
    bad.write_text("not a PEM file\n")
    with pytest.raises(Exception, match="Validation of dynamic config update of SSLFactory "
                                        "failed") as e:
        _set(b, KEY, str(bad))
    assert "INVALID_REQUEST" in str(e.value) or "Failed to load" in str(e.value)
    assert _served_cert(tls, port) == before


@pytest.mark.parametrize(("name", "resource", "why"), [
    ("ssl.keystore.location", "1", "These security configs can be dynamically updated only "
                                   "per-listener using the listener prefix"),
    (KEY, "", "Cannot update these configs at default cluster level, broker id must be "
              "specified"),
    ("listener.name.ssl.ssl.client.auth", "1", "Cannot update these configs dynamically"),
])
def test_kafka_refusals_of_dynamic_tls_changes(broker: tuple[SamsaBroker, int], tls: TlsFiles,
                                               name: str, resource: str, why: str) -> None:
    b, port = broker
    before = _served_cert(tls, port)
    value = "required" if name.endswith("client.auth") else str(tls.server_file)
    with pytest.raises(Exception, match=why):
        _set(b, name, value, resource)
    assert _served_cert(tls, port) == before


def test_a_key_store_that_does_not_load_stops_the_start(tls: TlsFiles) -> None:
    plain = free_port()
    overrides, _ = ssl_listener_overrides(tls, plain, extra={
        "listener.name.ssl.ssl.keystore.location": str(tls.root / "missing.pem")})
    b = SamsaBroker(port=plain, overrides=overrides)
    try:
        with pytest.raises(RuntimeError, match="Failed to load SSL key store or trust store for "
                                               "listener SSL"):
            b.start()
    finally:
        b.close()
