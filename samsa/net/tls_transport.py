"""The TLS listeners' transport: Python's ssl for the handshake and the server's records, and the
client's TLS 1.3 records opened in C.

Why: OpenSSL's SSL_read opens one record per call at ~2 us each, and librdkafka cuts a produce
stream into ~450 records per MB, mostly under 2 KiB (bench/tls_records.py), so reading through
OpenSSL's record layer cost the broker more than the whole plaintext produce path. Here the
handshake runs on an `ssl.SSLObject` over memory BIOs; once it is done, and it is TLS 1.3 with an
AEAD suite the C reader knows, the client application traffic secret (samsa/net/tls_secrets.py)
keys a `samsa.net._tlsrecord.Reader` that opens whole batches of records straight into the Kafka
connection's receive buffer. The server's records (responses) still go out through the
SSLObject: OpenSSL owns the write direction, the reader the read direction.

What the reader does not open itself it handles here: a KeyUpdate from the client rekeys the
reader; a KeyUpdate that asks the server to update its own keys cannot be honoured (Python's ssl
cannot rekey OpenSSL's write direction) and closes the connection; close_notify ends the
connection, any other alert or handshake message closes it. TLS 1.2, other suites, or a
handshake whose secret is not found keep OpenSSL's record layer for the whole connection.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
from typing import Any, Protocol, cast

from . import tls_secrets
from .tls_secrets import SUITES, Suite

try:
    from ._tlsrecord import Reader
except ImportError:  # not compiled (see setup.py): OpenSSL reads every record
    Reader = None

log = logging.getLogger("samsa.tls")

HANDSHAKE_TIMEOUT = 60.0  # seconds, asyncio's default for TLS handshakes
CIPHER_BUFFER = 256 * 1024  # received, not yet opened ciphertext
MAX_RECORD = 5 + 16384 + 256
MAX_LOWAT = 512 * 1024
WRITE_COALESCE = 16 * 1024  # small writes joined into one TLS record up to this size
ALERT, HANDSHAKE = 21, 22
KEY_UPDATE = 24


class Receiver(Protocol):
    """What the transport feeds: asyncio's BufferedProtocol, plus how many more bytes the
    message being received needs (samsa.broker.server.KafkaConnection)."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None: ...
    def connection_lost(self, exc: Exception | None) -> None: ...
    def eof_received(self) -> bool | None: ...
    def pause_writing(self) -> None: ...
    def resume_writing(self) -> None: ...
    def get_buffer(self, sizehint: int) -> memoryview: ...
    def buffer_updated(self, nbytes: int) -> None: ...
    def data_received(self, data: memoryview) -> None: ...
    def bytes_expected(self) -> int: ...


class TlsServerProtocol(asyncio.BufferedProtocol):
    """The socket's protocol: TLS on one side, the Kafka connection (`app`) on the other, which
    sees a `TlsTransport` once the handshake is done, as with asyncio's own TLS transports."""

    def __init__(self, context: ssl.SSLContext, app: Receiver,
                 handshake_timeout: float = HANDSHAKE_TIMEOUT) -> None:
        self.context = context
        self.app = app
        self.timeout = handshake_timeout
        self.raw: asyncio.Transport | None = None
        self.incoming = ssl.MemoryBIO()
        self.outgoing = ssl.MemoryBIO()
        self.sslobj: ssl.SSLObject | None = None
        self.transport = TlsTransport(self)
        self.cbuf = bytearray(CIPHER_BUFFER)
        self.cstart = self.cend = 0
        self.handshaking = True
        self.hello = bytearray()  # the connection's first bytes, for the ClientHello random
        self.random: bytes | None = None
        self.reader: Any = None  # samsa.net._tlsrecord.Reader once the fast path runs
        self.suite: Suite | None = None
        self.secret = b""
        self.app_paused = False  # the app asked not to be given data
        self.app_connected = False
        self.closed = False
        self._timer: asyncio.TimerHandle | None = None
        self.sock: Any = None  # for SO_RCVLOWAT (see _wake_for)
        self.lowat = 1

    # ---- the socket side -----------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.raw = transport  # type: ignore[assignment]
        self.sock = transport.get_extra_info("socket")
        self.sslobj = self.context.wrap_bio(self.incoming, self.outgoing, server_side=True)
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(self.timeout, self._handshake_timeout)

    def _handshake_timeout(self) -> None:
        if self.handshaking and not self.closed:
            log.info("closing TLS connection from %s: no handshake within %.0f s",
                     self._peer(), self.timeout)
            self._abort()

    def get_buffer(self, sizehint: int) -> memoryview:
        if len(self.cbuf) - self.cend < MAX_RECORD:
            self._compact()
            if len(self.cbuf) - self.cend < MAX_RECORD:
                self.cbuf.extend(bytes(MAX_RECORD))
        return memoryview(self.cbuf)[self.cend :]

    def _compact(self) -> None:
        if self.cstart:
            left = self.cend - self.cstart
            self.cbuf[:left] = self.cbuf[self.cstart : self.cend]
            self.cstart, self.cend = 0, left

    def buffer_updated(self, nbytes: int) -> None:
        self.cend += nbytes
        try:
            if self.handshaking:
                self._handshake()
            else:
                self._deliver()
        except (ValueError, ssl.SSLError) as e:
            log.info("closing TLS connection from %s: %s", self._peer(), e)
            self._abort()

    def eof_received(self) -> bool | None:
        if self.app_connected and not self.closed:
            try:
                self._deliver()
            except (ValueError, ssl.SSLError) as e:
                log.info("closing TLS connection from %s: %s", self._peer(), e)
                self._abort()
                return None
            return self.app.eof_received()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.reader = None
        if self.app_connected:
            self.app_connected = False
            self.app.connection_lost(exc)

    def pause_writing(self) -> None:
        if self.app_connected:
            self.app.pause_writing()

    def resume_writing(self) -> None:
        if self.app_connected:
            self.app.resume_writing()

    # ---- handshake ---------------------------------------------------------------------
    def _handshake(self) -> None:
        assert self.sslobj is not None
        data = memoryview(self.cbuf)[self.cstart : self.cend]
        if self.random is None:
            self.hello += data[: 43 - len(self.hello)]
            if len(self.hello) >= 43:
                self.random = tls_secrets.client_random(self.hello) or b""
        self.incoming.write(data)
        data.release()
        self.cstart = self.cend = 0
        tap = tls_secrets.tap()
        try:
            self.sslobj.do_handshake()
        except ssl.SSLWantReadError:
            self._flush()
            return
        except ssl.SSLError as e:
            log.info("closing TLS connection from %s: handshake failed: %s", self._peer(), e)
            self._flush()  # the alert
            if self.raw is not None:
                self.raw.close()
            self.closed = True
            return
        finally:
            if tap is not None:
                tap.drain()  # every step: failed handshakes must not fill the pipe
        self._flush()
        self.handshaking = False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._choose_reader()
        if self.reader is not None:
            left = self.incoming.read()  # records after the client's Finished: ours to open
            self.cbuf[: len(left)] = left
            self.cstart, self.cend = 0, len(left)
        self.app_connected = True
        self.app.connection_made(self.transport)
        if not self.closed:
            self._deliver()

    def _choose_reader(self) -> None:
        """The C reader when this connection can use it, else None (OpenSSL reads)."""
        assert self.sslobj is not None
        tap = tls_secrets.tap()
        cipher = self.sslobj.cipher()
        if Reader is None or tap is None or not self.random or cipher is None:
            return
        suite = SUITES.get(cipher[0])
        if suite is None or cipher[1] != "TLSv1.3" or self.sslobj.pending():
            return
        secret = tap.client_secret(self.random)
        if secret is None:
            return
        key, iv = tls_secrets.traffic_keys(suite, secret)
        self.reader, self.suite, self.secret = Reader(suite.cipher, key, iv), suite, secret

    def _flush(self) -> None:
        if self.outgoing.pending and self.raw is not None and not self.raw.is_closing():
            self.raw.write(self.outgoing.read())

    # ---- received data to the app --------------------------------------------------------
    def _deliver(self) -> None:
        if self.reader is not None:
            self._open_records()
        else:
            self._read_openssl()

    def _open_records(self) -> None:
        """Open the buffered records into the app's buffers while it reads."""
        reader = self.reader
        while not self.app_paused and not self._done() and self.cend - self.cstart >= 5:
            src = memoryview(self.cbuf)[self.cstart : self.cend]
            dst = self.app.get_buffer(-1)
            aside: bytearray | None = None
            try:
                used, made, kind, length = reader.open(src, dst)
                if not used:
                    size = reader.record_size(src)
                    if size > len(src):
                        break  # the rest of the record has not arrived
                    # the app's buffer is smaller than the record: open it aside, then copy
                    aside = bytearray(size)
                    used, made, kind, length = reader.open(src, aside)
                    control = bytes(aside[made : made + length]) if kind else b""
                else:
                    control = bytes(dst[made : made + length]) if kind else b""
            finally:
                src.release()
                dst.release()
            self.cstart += used
            if aside is not None:
                self.app.data_received(memoryview(aside)[:made])
            elif made:
                self.app.buffer_updated(made)
            if kind:
                self._control(kind, control)
        if self.cstart == self.cend:
            self.cstart = self.cend = 0
        self._wake_for(self.app.bytes_expected() - (self.cend - self.cstart))

    def _wake_for(self, nbytes: int) -> None:
        """Have the kernel wake the loop only once `nbytes` more bytes are in (SO_RCVLOWAT): a
        client writing a big request as many small TLS records (librdkafka) would otherwise
        wake the broker for every few KiB. The request cannot be handled before all of it is
        in, so waiting costs no latency; the kernel still wakes on EOF and a full window."""
        low = max(1, min(nbytes, MAX_LOWAT))
        if low == self.lowat or self.sock is None:
            return
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, low)
        except OSError:
            self.sock = None
            return
        self.lowat = low

    def _done(self) -> bool:
        return self.closed or self.raw is None or self.raw.is_closing()

    def _control(self, kind: int, content: bytes) -> None:
        """A non-data record from the client: KeyUpdate, close_notify; anything else closes."""
        if kind == ALERT and content[:2] in (b"\x01\x00", b"\x02\x00"):
            self._close_notify_received()
            return
        if kind == HANDSHAKE and len(content) == 5 and content[0] == KEY_UPDATE \
                and content[1:4] == b"\x00\x00\x01" and content[4] in (0, 1):
            if content[4] == 1:
                raise ValueError("the client asked for a KeyUpdate of the server's keys, "
                                 "which this transport cannot make (docs/compatibility.md)")
            assert self.suite is not None
            self.secret = tls_secrets.next_secret(self.suite, self.secret)
            self.reader.rekey(*tls_secrets.traffic_keys(self.suite, self.secret))
            return
        what = "alert" if kind == ALERT else "handshake message" if kind == HANDSHAKE else "record"
        raise ValueError(f"unexpected {what} from the client after the handshake "
                         f"(type {kind}, {content[:8].hex()})")

    def _close_notify_received(self) -> None:
        self.cstart = self.cend = 0
        if self.raw is not None and not self.closed:
            if not self.app.eof_received():
                self.transport.close()

    def _read_openssl(self) -> None:
        """OpenSSL's record layer: TLS 1.2, suites the reader does not know."""
        assert self.sslobj is not None
        if self.cend > self.cstart:
            data = memoryview(self.cbuf)[self.cstart : self.cend]
            self.incoming.write(data)
            data.release()
            self.cstart = self.cend = 0
        while not self.app_paused and not self._done():
            dst = self.app.get_buffer(-1)
            try:
                n = cast(int, self.sslobj.read(len(dst), dst))
            except ssl.SSLWantReadError:
                break
            except ssl.SSLZeroReturnError:
                dst.release()
                self._flush()
                self._close_notify_received()
                return
            finally:
                dst.release()
            self.app.buffer_updated(n)
        self._flush()  # e.g. post-handshake messages OpenSSL answered

    # ---- for TlsTransport ----------------------------------------------------------------
    def write(self, data: Any) -> None:
        if self.closed or self.raw is None or self.raw.is_closing():
            return
        assert self.sslobj is not None
        self.sslobj.write(data)
        self._flush()

    def writelines(self, chunks: Any) -> None:
        if self.closed or self.raw is None or self.raw.is_closing():
            return
        assert self.sslobj is not None
        small: list[Any] = []
        size = 0
        for c in chunks:
            n = len(c)
            if n >= WRITE_COALESCE:
                if small:
                    self.sslobj.write(b"".join(small))
                    small, size = [], 0
                self.sslobj.write(c)
                continue
            small.append(c)
            size += n
            if size >= WRITE_COALESCE:
                self.sslobj.write(b"".join(small))
                small, size = [], 0
        if small:
            self.sslobj.write(b"".join(small))
        self._flush()

    def pause_app_reading(self) -> None:
        self.app_paused = True
        if self.raw is not None and not self.closed:
            self.raw.pause_reading()

    def resume_app_reading(self) -> None:
        if not self.app_paused:
            return
        self.app_paused = False
        if self.raw is not None and not self.closed:
            self.raw.resume_reading()
            asyncio.get_running_loop().call_soon(self._resume_deliver)

    def _resume_deliver(self) -> None:
        if self.closed or self.app_paused or not self.app_connected:
            return
        try:
            self._deliver()
        except (ValueError, ssl.SSLError) as e:
            log.info("closing TLS connection from %s: %s", self._peer(), e)
            self._abort()

    def close(self) -> None:
        """Send close_notify, then close the socket once its buffer is written."""
        if self.raw is None or self.raw.is_closing():
            return
        if not self.handshaking and self.sslobj is not None:
            try:
                self.sslobj.unwrap()
            except ssl.SSLError:
                pass  # close_notify is written; the client's is not awaited
            self._flush()
        self.raw.close()

    def _abort(self) -> None:
        if self.raw is not None:
            self.raw.abort()
        self.closed = True

    def _peer(self) -> str:
        peer = self.raw.get_extra_info("peername") if self.raw is not None else None
        return str(peer[0]) if isinstance(peer, tuple) and peer else "?"


class TlsTransport(asyncio.Transport):
    """What the Kafka connection writes to and reads through (asyncio's Transport interface)."""

    def __init__(self, tls: TlsServerProtocol) -> None:
        super().__init__()
        self._tls = tls

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        tls = self._tls
        obj = tls.sslobj
        if name == "ssl_object":
            return obj
        if name == "sslcontext":
            return obj.context if obj is not None else tls.context
        if name == "peercert":
            return obj.getpeercert() if obj is not None else default
        if name == "cipher":
            return obj.cipher() if obj is not None else default
        if name == "fast_records":  # whether the C reader opens this connection's records
            return tls.reader is not None
        return tls.raw.get_extra_info(name, default) if tls.raw is not None else default

    def is_closing(self) -> bool:
        raw = self._tls.raw
        return self._tls.closed or raw is None or raw.is_closing()

    def close(self) -> None:
        self._tls.close()

    def abort(self) -> None:
        self._tls._abort()

    def write(self, data: Any) -> None:
        self._tls.write(data)

    def writelines(self, list_of_data: Any) -> None:
        self._tls.writelines(list_of_data)

    def can_write_eof(self) -> bool:
        return False

    def get_write_buffer_size(self) -> int:
        raw = self._tls.raw
        return raw.get_write_buffer_size() if raw is not None else 0

    def get_write_buffer_limits(self) -> tuple[int, int]:
        raw = self._tls.raw
        return raw.get_write_buffer_limits() if raw is not None else (0, 0)

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        if self._tls.raw is not None:
            self._tls.raw.set_write_buffer_limits(high, low)

    def pause_reading(self) -> None:
        self._tls.pause_app_reading()

    def resume_reading(self) -> None:
        self._tls.resume_app_reading()

    def is_reading(self) -> bool:
        return not self._tls.app_paused

    def get_protocol(self) -> asyncio.BaseProtocol:
        return cast(asyncio.BaseProtocol, self._tls.app)

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self._tls.app = cast(Receiver, protocol)
