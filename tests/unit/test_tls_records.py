"""The C TLS 1.3 record reader (samsa/net/_tlsrecord.c) against records made by OpenSSL.

A real OpenSSL client (Python's ssl) and a server SSLObject handshake over memory BIOs, the
server's context logging its secrets to the process's SecretTap; then the client's records are
opened by the reader and must give back exactly what the client wrote, and any change to them
must fail.
"""

from __future__ import annotations

import os
import random
import ssl
from pathlib import Path

import pytest

from samsa.net import tls_secrets
from samsa.testing.tls import TlsFiles

_tlsrecord = pytest.importorskip("samsa.net._tlsrecord", reason="C extension not compiled")
Reader = _tlsrecord.Reader


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return TlsFiles.create(tmp_path_factory.mktemp("tls"))


class Pair:
    """A client and a server SSLObject, handshaken in memory; `reader` opens the client's
    records with the secret the tap collected."""

    def __init__(self, files: TlsFiles) -> None:
        tap = tls_secrets.tap()
        assert tap is not None, "the tap runs on Linux without SSLKEYLOGFILE"
        sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        sctx.load_cert_chain(str(files.server_file))
        assert tap.attach(sctx)
        cctx = ssl.create_default_context(cafile=str(files.ca_file))
        self.c_in, self.c_out = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.s_in, self.s_out = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.client = cctx.wrap_bio(self.c_in, self.c_out, server_hostname="localhost")
        self.server = sctx.wrap_bio(self.s_in, self.s_out, server_side=True)
        hello = b""
        for _ in range(10):
            done = self._step(self.client)
            data = self.c_out.read()
            hello = hello or data
            self.s_in.write(data)
            self._step(self.server)
            self.c_in.write(self.s_out.read())
            if done and not self.s_in.pending:
                break
        random_ = tls_secrets.client_random(hello)
        assert random_ is not None
        secret = tap.client_secret(random_)
        assert secret is not None, "the handshake's client traffic secret was not logged"
        cipher = self.server.cipher()
        assert cipher is not None and cipher[1] == "TLSv1.3"
        self.suite = tls_secrets.SUITES[cipher[0]]
        self.secret = secret
        self.reader = Reader(self.suite.cipher, *tls_secrets.traffic_keys(self.suite, secret))

    @staticmethod
    def _step(obj: ssl.SSLObject) -> bool:
        try:
            obj.do_handshake()
            return True
        except ssl.SSLWantReadError:
            return False

    def records(self, *writes: bytes) -> bytes:
        for w in writes:
            self.client.write(w)
        return self.c_out.read()


def open_all(reader: object, wire: bytes, room: int = 1 << 22) -> bytes:
    dst = bytearray(room)
    used, made, kind, _ = reader.open(wire, dst)  # type: ignore[attr-defined]
    assert kind == 0 and used == len(wire)
    return bytes(dst[:made])


def test_opens_what_openssl_sealed(files: TlsFiles) -> None:
    p = Pair(files)
    rnd = random.Random(7)
    writes = [os.urandom(rnd.choice([1, 17, 1024, 1500, 2100, 16384, 40000])) for _ in range(300)]
    assert open_all(p.reader, p.records(*writes)) == b"".join(writes)


def test_stops_at_incomplete_records_and_resumes(files: TlsFiles) -> None:
    p = Pair(files)
    writes = [os.urandom(3000) for _ in range(20)]
    wire = p.records(*writes)
    got = bytearray()
    buf = b""
    dst = bytearray(1 << 20)
    rnd = random.Random(3)
    pos = 0
    while pos < len(wire):  # the bytes arrive in arbitrary pieces
        step = rnd.randint(1, 4000)
        buf += wire[pos : pos + step]
        pos += step
        used, made, kind, _ = p.reader.open(buf, dst)
        assert kind == 0
        got += dst[:made]
        buf = buf[used:]
    assert buf == b""
    assert bytes(got) == b"".join(writes)


def test_small_destination_stops_before_the_record(files: TlsFiles) -> None:
    p = Pair(files)
    wire = p.records(b"x" * 5000)
    used, made, kind, _ = p.reader.open(wire, bytearray(100))
    assert (used, made, kind) == (0, 0, 0)
    size = p.reader.record_size(wire)
    assert size == len(wire)
    assert p.reader.record_size(wire[:4]) == 0
    assert open_all(p.reader, wire, room=size) == b"x" * 5000


@pytest.mark.parametrize("where", ["header-length", "body", "tag"])
def test_changed_records_fail(files: TlsFiles, where: str) -> None:
    p = Pair(files)
    wire = bytearray(p.records(b"a" * 2000))
    if where == "header-length":  # the header is authenticated data
        wire[4] ^= 1
        wire += b"\x00"
    else:
        wire[10 if where == "body" else len(wire) - 1] ^= 0x40
    with pytest.raises(ValueError, match="bad_record_mac|decode_error"):
        p.reader.open(bytes(wire), bytearray(1 << 16))


def test_replayed_record_fails(files: TlsFiles) -> None:
    """The nonce counts records: the same record a second time does not authenticate."""
    p = Pair(files)
    wire = p.records(b"once")
    assert open_all(p.reader, wire) == b"once"
    with pytest.raises(ValueError, match="bad_record_mac"):
        p.reader.open(wire, bytearray(100))


@pytest.mark.parametrize("header, message", [
    (b"\x16\x03\x03\x00\x20", "unexpected record header"),
    (b"\x17\x03\x01\x00\x20", "unexpected record header"),
    (b"\x17\x03\x03\x48\x01", "record_overflow"),
    (b"\x17\x03\x03\x00\x10", "decode_error"),
])
def test_bad_headers_fail(files: TlsFiles, header: bytes, message: str) -> None:
    p = Pair(files)
    with pytest.raises(ValueError, match=message):
        p.reader.open(header + bytes(0x4801), bytearray(1 << 16))


def test_close_notify_is_reported_not_counted(files: TlsFiles) -> None:
    p = Pair(files)
    p.client.write(b"last bytes")
    try:
        p.client.unwrap()
    except ssl.SSLWantReadError:
        pass
    wire = p.c_out.read()
    dst = bytearray(1 << 16)
    used, made, kind, length = p.reader.open(wire, dst)
    assert (used, made, kind, length) == (len(wire), 10, 21, 2)
    assert bytes(dst[:10]) == b"last bytes"
    assert bytes(dst[10:12]) == b"\x01\x00"  # warning, close_notify


def test_rekey_moves_to_the_next_secret(files: TlsFiles) -> None:
    """After rekey the reader no longer opens records of the old key (the positive side, a real
    client's KeyUpdate, is tests/integration/security/test_tls_record_layer.py)."""
    p = Pair(files)
    nxt = tls_secrets.next_secret(p.suite, p.secret)
    assert len(nxt) == p.suite.hash.digest_size and nxt != p.secret
    p.reader.rekey(*tls_secrets.traffic_keys(p.suite, nxt))
    with pytest.raises(ValueError, match="bad_record_mac"):  # old-key records no longer open
        p.reader.open(p.records(b"old key"), bytearray(100))


def test_wrong_key_lengths_are_refused() -> None:
    with pytest.raises(ValueError, match="wrong length"):
        Reader("aes-256-gcm", bytes(16), bytes(12))
    with pytest.raises(ValueError, match="unsupported cipher"):
        Reader("aes-128-ccm", bytes(16), bytes(12))


def test_client_random_needs_a_client_hello() -> None:
    hello = bytes([22, 3, 1, 1, 0, 1, 0, 0, 252, 3, 3]) + bytes(range(32))
    assert tls_secrets.client_random(hello) == bytes(range(32))
    assert tls_secrets.client_random(hello[:40]) is None
    assert tls_secrets.client_random(b"\x17" + hello[1:]) is None


def test_tap_drops_uncollected_secrets(tmp_path: Path) -> None:
    """Secrets of handshakes nobody collects (failed ones) are bounded."""
    tap = tls_secrets.SecretTap()
    with open(tap.path, "a") as f:
        for i in range(tls_secrets._KEEP + 10):
            f.write(f"{tls_secrets.CLIENT_SECRET} {i:064x} {'ab' * 32}\n")
            if i % 500 == 0:
                f.flush()
                tap.drain()
    tap.drain()
    assert len(tap.secrets) == tls_secrets._KEEP
    assert tap.client_secret(bytes.fromhex(f"{tls_secrets._KEEP + 9:064x}")) == b"\xab" * 32
