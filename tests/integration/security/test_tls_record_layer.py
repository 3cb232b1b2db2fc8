"""The TLS listeners' own record reader (samsa/net/tls_transport.py) against real clients.

- every TLS 1.3 cipher suite, and TLS 1.2 (which stays on OpenSSL's record layer), with
  `openssl s_client` as the client;
- a client KeyUpdate (s_client's `k`) rekeys the reader and the connection goes on; a KeyUpdate
  that asks the broker to update its own keys (`K`) closes the connection, as documented;
- a record changed in flight (a bit flipped between a real client and the broker), garbage after
  the handshake, and a connection cut inside a record close that connection only;
- payloads of every size through confluent-kafka (many small TLS records per request) come back
  byte for byte, and a TLS producer held back by a quota (the broker mutes the channel) delivers
  everything.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import select
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.protocol.records import encode_batch
from samsa.testing import SamsaBroker, free_port
from samsa.testing.tls import TlsFiles, ssl_listener_overrides
from tests.fuzz._support import api_versions_request, correlation_of, produce_request

pytestmark = [pytest.mark.timeout(180)]

pytest.importorskip("samsa.net._tlsrecord", reason="C extension not compiled")

SUITES = ["TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"]


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return TlsFiles.create(tmp_path_factory.mktemp("tls-records"))


@pytest.fixture(scope="module")
def broker(tls: TlsFiles, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[tuple[SamsaBroker, int]]:
    plain = free_port()
    overrides, ssl_port = ssl_listener_overrides(tls, plain)
    with SamsaBroker(Path(tmp_path_factory.mktemp("tls-records-data")), port=plain,
                     overrides=overrides) as b:
        yield b, ssl_port


class SClient:
    """`openssl s_client` driven through its stdin (requests, and its k / K commands)."""

    def __init__(self, port: int, tls: TlsFiles, *args: str) -> None:
        self.proc = subprocess.Popen(
            ["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-CAfile",
             str(tls.ca_file), *args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.out = b""
        self.err = b""

    def send(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)  # one write, read by s_client as one chunk
        self.proc.stdin.flush()

    def wait_for(self, needle: bytes, stream: str = "out", timeout: float = 20.0) -> bool:
        """True once `needle` appears on stdout / stderr; False on EOF or timeout."""
        assert self.proc.stdout is not None and self.proc.stderr is not None
        fds = {self.proc.stdout.fileno(): "out", self.proc.stderr.fileno(): "err"}
        deadline = time.monotonic() + timeout
        while needle not in getattr(self, stream):
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            ready, _, _ = select.select(list(fds), [], [], left)
            for fd in ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    return needle in getattr(self, stream)
                setattr(self, fds[fd], getattr(self, fds[fd]) + chunk)
        return True

    def request(self, corr: int) -> bool:
        """Send ApiVersions with this correlation id; True once its answer is on stdout."""
        self.send(api_versions_request(correlation_id=corr))
        return self.wait_for(corr.to_bytes(4, "big") + b"\x00\x00")  # id, then error 0

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait(10)


def _api_versions_over(port: int, tls: TlsFiles) -> int:
    """A fresh Python-ssl connection still gets ApiVersions answered: the broker is fine."""
    with socket.create_connection(("127.0.0.1", port), timeout=20) as raw, \
            tls.ssl_context().wrap_socket(raw, server_hostname="127.0.0.1") as s:
        s.sendall(api_versions_request(correlation_id=77))
        head = s.recv(8)
        return correlation_of(head[4:] + b"\x00" * 8) if len(head) == 8 else -1


@pytest.mark.parametrize("suite", SUITES)
def test_every_tls13_suite_with_key_updates(broker: tuple[SamsaBroker, int], tls: TlsFiles,
                                            suite: str) -> None:
    _, port = broker
    c = SClient(port, tls, "-tls1_3", "-ciphersuites", suite)
    try:
        assert c.request(0x5A000001), c.err.decode(errors="replace")[-2000:]
        assert f"Cipher is {suite}".encode() in c.out
        for n in range(2, 5):  # KeyUpdate (update_not_requested), then data under the new key
            c.send(b"k\n")
            assert c.wait_for(b"KEYUPDATE", "err")
            c.err = b""
            assert c.request(0x5A000000 + n), f"no answer after KeyUpdate {n - 1}"
    finally:
        c.close()


def test_key_update_requested_closes_the_connection(broker: tuple[SamsaBroker, int],
                                                    tls: TlsFiles) -> None:
    """The broker cannot update its own sending keys (docs/compatibility.md): it closes."""
    _, port = broker
    c = SClient(port, tls, "-tls1_3")
    try:
        assert c.request(0x5B000001)
        c.send(b"K\n")
        assert c.wait_for(b"KEYUPDATE", "err")
        c.send(api_versions_request(correlation_id=0x5B000002))
        assert c.proc.wait(20) is not None  # the broker closed: s_client ends
        assert (0x5B000002).to_bytes(4, "big") + b"\x00\x00" not in c.out
    finally:
        c.close()
    assert _api_versions_over(port, tls) == 77


def test_tls12_keeps_openssl_records(broker: tuple[SamsaBroker, int], tls: TlsFiles) -> None:
    _, port = broker
    c = SClient(port, tls, "-tls1_2")
    try:
        assert c.request(0x5C000001)
        assert b"TLSv1.2" in c.out
        assert c.request(0x5C000002)
    finally:
        c.close()


class MitmClient:
    """A real OpenSSL client (Python's ssl over memory BIOs) whose bytes this test sends itself,
    so it can change them on the way."""

    def __init__(self, port: int, tls: TlsFiles) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=20)
        self.inc, self.out = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.obj = tls.ssl_context().wrap_bio(self.inc, self.out, server_hostname="127.0.0.1")
        while True:
            try:
                self.obj.do_handshake()
                break
            except ssl.SSLWantReadError:
                self.sock.sendall(self.out.read())
                data = self.sock.recv(65536)
                assert data, "closed during the handshake"
                self.inc.write(data)
        self.sock.sendall(self.out.read())

    def seal(self, data: bytes) -> bytes:
        self.obj.write(data)
        return self.out.read()

    def answer(self, timeout: float = 20.0) -> bytes | None:
        """The next decrypted bytes, or None when the broker closed the connection."""
        self.sock.settimeout(timeout)
        while True:
            try:
                return self.obj.read(65536)
            except ssl.SSLWantReadError:
                pass
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                return None
            try:
                data = self.sock.recv(65536)
            except ConnectionResetError:
                return None
            if not data:
                return None
            self.inc.write(data)

    def close(self) -> None:
        self.sock.close()


def test_clean_records_through_the_mitm_client(broker: tuple[SamsaBroker, int],
                                               tls: TlsFiles) -> None:
    """The control for the tests below: unchanged bytes get their answer."""
    _, port = broker
    c = MitmClient(port, tls)
    try:
        c.sock.sendall(c.seal(api_versions_request(correlation_id=9)))
        got = c.answer()
        assert got is not None and correlation_of(got[4:]) == 9
    finally:
        c.close()


@pytest.mark.parametrize("change", ["flip-body", "flip-tag", "flip-header", "garbage",
                                    "plaintext-record", "cut-inside"])
def test_bad_records_close_only_that_connection(broker: tuple[SamsaBroker, int], tls: TlsFiles,
                                                change: str) -> None:
    b, port = broker
    c = MitmClient(port, tls)
    try:
        wire = bytearray(c.seal(api_versions_request(correlation_id=10)))
        if change == "flip-body":
            wire[8] ^= 0x01
        elif change == "flip-tag":
            wire[-1] ^= 0x80
        elif change == "flip-header":
            wire[0] = 0x16  # a handshake record after the handshake
        elif change == "garbage":
            wire = bytearray(os.urandom(3000))
        elif change == "plaintext-record":
            wire = bytearray(b"\x17\x03\x03\x00\x05hello")  # too short to hold a tag
        if change == "cut-inside":
            c.sock.sendall(bytes(wire[: len(wire) // 2]))
            c.sock.shutdown(socket.SHUT_WR)
        else:
            c.sock.sendall(bytes(wire))
        assert c.answer() is None, "the broker answered a changed record"
    finally:
        c.close()
    assert b.proc is not None and b.proc.poll() is None
    assert _api_versions_over(port, tls) == 77


def test_request_after_a_big_one_wakes_the_broker(broker: tuple[SamsaBroker, int],
                                                  tls: TlsFiles) -> None:
    """While a big request arrives the broker asks the kernel to wake it only once the rest can
    be in (SO_RCVLOWAT); once that request is complete a small one must wake it again, also when
    the bytes before the pause end inside a TLS record of the small request."""
    b, port = broker
    topic = "tls-records-wake"
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    big = produce_request(topic, encode_batch([(b"k", os.urandom(900_000), [], 0)]), 21, acks=1)
    c = MitmClient(port, tls)
    try:
        head = c.seal(big)
        wire = head + c.seal(api_versions_request(correlation_id=22))
        ends, pos = [], 0  # record boundaries of the big request
        while pos < len(head):
            pos += 5 + int.from_bytes(head[pos + 3 : pos + 5], "big")
            ends.append(pos)
        half = ends[len(ends) // 2]
        c.sock.sendall(wire[:half])  # up to a record boundary: the broker waits for the rest
        time.sleep(0.5)
        cut = len(wire) - 20  # then the rest, up to inside the small request's record
        c.sock.sendall(wire[half:cut])
        first = c.answer()
        assert first is not None and correlation_of(first[4:]) == 21
        time.sleep(0.5)  # the broker goes back to waiting with the partial record buffered
        c.sock.sendall(wire[cut:])
        second = c.answer(timeout=15)
        assert second is not None, "the small request's last bytes did not wake the broker"
        assert correlation_of(second[4:]) == 22
    finally:
        c.close()


def test_payloads_of_every_size_round_trip(broker: tuple[SamsaBroker, int], tls: TlsFiles) -> None:
    """confluent-kafka cuts requests into many small TLS records; what it sends comes back."""
    b, port = broker
    topic = "tls-records-sizes"
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    conf = {"bootstrap.servers": f"127.0.0.1:{port}", **tls.confluent()}
    rnd = random.Random(17)
    sizes = [rnd.choice([0, 1, 5, 100, 1023, 1024, 1025, 4000, 16384, 16385, 70000, 300000])
             for _ in range(1500)]
    payloads = [rnd.randbytes(n) for n in sizes]
    p = Producer({**conf, "linger.ms": 20, "batch.size": 1 << 20, "acks": "all",
                  "message.max.bytes": 2_000_000})
    for i, v in enumerate(payloads):
        p.produce(topic, v, key=str(i).encode())
        p.poll(0)
    assert p.flush(60) == 0
    c = Consumer({**conf, "group.id": "tls-records", "enable.auto.commit": False,
                  "fetch.max.bytes": 8 << 20})
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got: list[bytes] = []
    deadline = time.monotonic() + 90
    while len(got) < len(payloads) and time.monotonic() < deadline:
        for m in c.consume(500, 1.0):
            assert m.error() is None, m.error()
            got.append(m.value() or b"")
    c.close()
    assert len(got) == len(payloads)
    assert [hashlib.sha256(v).digest() for v in got] == \
           [hashlib.sha256(v).digest() for v in payloads]


def test_muted_tls_producer_delivers_everything(tls: TlsFiles, tmp_path: Path) -> None:
    """A quota mutes the channel (the transport stops delivering opened records, then resumes):
    nothing is lost or reordered across the pauses, and the client saw throttle times."""
    plain = free_port()
    overrides, ssl_port = ssl_listener_overrides(tls, plain)
    overrides["quota.window.num"] = "2"
    with SamsaBroker(tmp_path / "data", port=plain, overrides=overrides) as b:
        subprocess.run([sys.executable, "-m", "samsa.cli.main", "quotas", "set", "--bootstrap-server",
                        b.bootstrap, "--entity-type", "clients", "--entity-name", "slow",
                        "--add-config", "producer_byte_rate=524288"],
                       check=True, capture_output=True, timeout=60)
        topic = "tls-muted"
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
        conf = {"bootstrap.servers": f"127.0.0.1:{ssl_port}", **tls.confluent(),
                "client.id": "slow"}
        throttle_max = [0]

        def stats(text: str) -> None:
            for br in json.loads(text).get("brokers", {}).values():
                throttle_max[0] = max(throttle_max[0], int(br.get("throttle", {}).get("max", 0)))

        p = Producer({**conf, "linger.ms": 5, "acks": 1, "statistics.interval.ms": 200,
                      "stats_cb": stats})
        n = 3000
        for i in range(n):
            p.produce(topic, i.to_bytes(4, "big") * 256)  # 1 KiB
            p.poll(0)
        assert p.flush(90) == 0
        p.poll(0.5)  # one more statistics report
        assert throttle_max[0] > 0, "the broker never throttled the producer"
        c = Consumer({**conf, "group.id": "tls-muted", "enable.auto.commit": False})
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        seen: list[int] = []
        deadline = time.monotonic() + 60
        while len(seen) < n and time.monotonic() < deadline:
            for m in c.consume(500, 1.0):
                assert m.error() is None
                seen.append(int.from_bytes((m.value() or b"")[:4], "big"))
        c.close()
        assert seen == list(range(n))
