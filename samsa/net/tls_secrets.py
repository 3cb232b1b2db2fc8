"""TLS 1.3 client traffic secrets of the broker's own server handshakes, and their keys.

The TLS listeners open the client's application-data records themselves (samsa/net/_tlsrecord.c,
one C call per batch instead of one OpenSSL SSL_read per record), so after each handshake they
need the client application traffic secret. Python's ssl module gives it out one way only: the
key log (`SSLContext.keylog_filename`, the NSS format Wireshark reads). `SecretTap` points the
listeners' contexts at an anonymous pipe of this process (through /proc/self/fd, so no file
and no name exists for anyone else to open) and reads it after every handshake step; the event
loop runs handshakes one step at a time, so the pipe never holds more than a few lines.

Keys follow RFC 8446 section 7: HKDF-Expand-Label(secret, "key" | "iv", "", length), and a
KeyUpdate moves to HKDF-Expand-Label(secret, "traffic upd", "", hash length).
"""

from __future__ import annotations

import fcntl
import logging
import os
import ssl
import sys
from collections import OrderedDict
from dataclasses import dataclass

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDFExpand

log = logging.getLogger("samsa.tls")

CLIENT_SECRET = "CLIENT_TRAFFIC_SECRET_0"
_KEEP = 4096  # secrets of handshakes nobody collected (failed ones) are dropped past this many
_F_SETPIPE_SZ = 1031


@dataclass(frozen=True)
class Suite:
    """A TLS 1.3 cipher suite the C reader opens: its EVP name, key length and HKDF hash."""

    cipher: str
    key_length: int
    hash: hashes.HashAlgorithm


SUITES = {
    "TLS_AES_128_GCM_SHA256": Suite("aes-128-gcm", 16, hashes.SHA256()),
    "TLS_AES_256_GCM_SHA384": Suite("aes-256-gcm", 32, hashes.SHA384()),
    "TLS_CHACHA20_POLY1305_SHA256": Suite("chacha20-poly1305", 32, hashes.SHA256()),
}


def expand_label(suite: Suite, secret: bytes, label: bytes, length: int) -> bytes:
    """RFC 8446 7.1 HKDF-Expand-Label with an empty context."""
    full = b"tls13 " + label
    info = length.to_bytes(2, "big") + bytes([len(full)]) + full + b"\x00"
    return HKDFExpand(suite.hash, length, info).derive(secret)


def traffic_keys(suite: Suite, secret: bytes) -> tuple[bytes, bytes]:
    """The write key and IV of a traffic secret."""
    return (expand_label(suite, secret, b"key", suite.key_length),
            expand_label(suite, secret, b"iv", 12))


def next_secret(suite: Suite, secret: bytes) -> bytes:
    """The traffic secret after a KeyUpdate."""
    return expand_label(suite, secret, b"traffic upd", suite.hash.digest_size)


def client_random(first_bytes: bytes | bytearray | memoryview) -> bytes | None:
    """The 32-byte random of a ClientHello at the start of a connection's bytes, or None when the
    first record does not hold it (not a handshake record, or a ClientHello split into tiny
    records)."""
    b = bytes(first_bytes[:43])
    if len(b) < 43 or b[0] != 22 or b[5] != 1:
        return None
    return b[11:43]


class SecretTap:
    """The pipe the listeners' SSL contexts log their secrets to, and the secrets read from it
    by client random (hex)."""

    def __init__(self) -> None:
        self.read_fd, self.write_fd = os.pipe()
        os.set_blocking(self.read_fd, False)
        try:  # room for thousands of handshakes' lines, should a caller be slow to drain
            fcntl.fcntl(self.write_fd, _F_SETPIPE_SZ, 1 << 20)
        except OSError:
            pass
        self.path = f"/proc/self/fd/{self.write_fd}"
        self.secrets: OrderedDict[str, bytes] = OrderedDict()
        self._partial = b""

    def attach(self, ctx: ssl.SSLContext) -> bool:
        """Log ctx's secrets to this tap; False if this platform cannot (no /proc)."""
        try:
            ctx.keylog_filename = self.path
        except (OSError, ValueError):
            return False
        return True

    def drain(self) -> None:
        """Read what the contexts wrote since the last call (non-blocking)."""
        while True:
            try:
                chunk = os.read(self.read_fd, 1 << 16)
            except BlockingIOError:
                break
            if not chunk:
                break
            data = self._partial + chunk
            *lines, self._partial = data.split(b"\n")
            for line in lines:
                parts = line.split()
                if len(parts) == 3 and parts[0] == CLIENT_SECRET.encode():
                    self.secrets[parts[1].decode().lower()] = bytes.fromhex(parts[2].decode())
                    if len(self.secrets) > _KEEP:
                        self.secrets.popitem(last=False)

    def client_secret(self, random: bytes) -> bytes | None:
        """The client application traffic secret of the handshake with this client random (taken:
        it is not kept once collected)."""
        self.drain()
        return self.secrets.pop(random.hex(), None)


_tap: SecretTap | None = None


def tap() -> SecretTap | None:
    """The process's tap, made on first use; None where the listeners keep OpenSSL's record
    layer: not Linux (no /proc), SSLKEYLOGFILE set (an operator's Wireshark session keeps the
    key log), or SAMSA_TLS_RECORDS=openssl (docs/operations.md)."""
    global _tap
    if _tap is None:
        if (os.environ.get("SSLKEYLOGFILE") or not sys.platform.startswith("linux")
                or os.environ.get("SAMSA_TLS_RECORDS", "").lower() == "openssl"):
            return None
        _tap = SecretTap()
    return _tap
