"""What receiving over TLS costs a server, by transport: is there CPU to win below Samsa's code?

A sender process streams `--mb` MiB over one connection (a blocking `ssl` socket, or plain TCP)
to an asyncio server in this process on uvloop; reported is the server's CPU ms per MB received
(`getrusage`, this process only: the sender's encryption is not counted) for:

- `plain`: plain TCP into one 1 MiB buffer (`asyncio.BufferedProtocol`), the floor;
- `uvloop-ssl`: uvloop's TLS transport (what Samsa's TLS listeners use), decrypting into the
  same 1 MiB buffer;
- `own-<size>`: our own loop over a plain transport: socket reads of `<size>` into a buffer,
  `MemoryBIO.write`, then `SSLObject.read` into the 1 MiB buffer until it wants more (no
  uvloop TLS machinery; reads larger than uvloop's 64 KiB).

If `own-*` were much cheaper than `uvloop-ssl`, a TLS transport of our own would pay; the
difference between `uvloop-ssl` and `plain` is the TLS cost no transport removes (OpenSSL's
decryption and its copies).

    PYTHONPATH=. python bench/tls_transport.py --mb 1000 --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import uvloop

from samsa.testing.tls import TlsFiles

MiB = 1 << 20


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class Sink(asyncio.BufferedProtocol):
    """Counts bytes received into one reused buffer."""

    def __init__(self, total: int, done: asyncio.Future[None]) -> None:
        self.buf = memoryview(bytearray(MiB))
        self.total, self.got, self.done = total, 0, done

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.buf

    def buffer_updated(self, nbytes: int) -> None:
        self.got += nbytes
        if self.got >= self.total and not self.done.done():
            self.done.set_result(None)


class OwnTls(Sink):
    """TLS by hand over a plain transport: ciphertext reads of `read_size`, one BIO."""

    def __init__(self, total: int, done: asyncio.Future[None], ctx: ssl.SSLContext,
                 read_size: int) -> None:
        super().__init__(total, done)
        self.incoming, self.outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.tls = ctx.wrap_bio(self.incoming, self.outgoing, server_side=True)
        self.cipher = memoryview(bytearray(read_size))
        self.handshaking = True
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.cipher

    def buffer_updated(self, nbytes: int) -> None:
        assert self.transport is not None
        self.incoming.write(self.cipher[:nbytes])
        if self.handshaking:
            try:
                self.tls.do_handshake()
                self.handshaking = False
            except ssl.SSLWantReadError:
                pass
        if not self.handshaking:
            try:
                while k := self.tls.read(MiB, self.buf):
                    Sink.buffer_updated(self, k)
            except ssl.SSLWantReadError:
                pass
        if self.outgoing.pending:
            self.transport.write(self.outgoing.read())


def send(port: int, ca: str, use_tls: bool, total: int) -> None:
    sock = socket.create_connection(("127.0.0.1", port))
    if use_tls:
        sock = ssl.create_default_context(cafile=ca).wrap_socket(sock, server_hostname="localhost")
    chunk = os.urandom(MiB)
    for _ in range(total // MiB + 1):
        sock.sendall(chunk)
    time.sleep(1)


async def turn(mode: str, files: TlsFiles, total: int) -> tuple[float, float]:
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(files.server_file))
    if mode == "plain":
        server = await loop.create_server(lambda: Sink(total, done), "127.0.0.1", 0)
    elif mode == "uvloop-ssl":
        server = await loop.create_server(lambda: Sink(total, done), "127.0.0.1", 0, ssl=ctx)
    else:
        size = int(mode.split("-")[1][:-1]) * 1024
        server = await loop.create_server(lambda: OwnTls(total, done, ctx, size), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    sender = subprocess.Popen([sys.executable, __file__, "--send", str(port), str(files.ca_file),
                               "0" if mode == "plain" else "1", str(total)])
    c0, t0 = cpu(), time.perf_counter()
    await done
    elapsed, spent = time.perf_counter() - t0, cpu() - c0
    sender.kill()
    sender.wait()
    server.close()
    return spent / (total / 1e6) * 1000, total / elapsed / 1e6


MODES = ("plain", "uvloop-ssl", "own-64k", "own-256k", "own-1024k")


def main() -> None:
    if sys.argv[1:2] == ["--send"]:
        port, ca, use_tls, total = sys.argv[2:6]
        send(int(port), ca, use_tls == "1", int(total))
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--mb", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    cost: dict[str, list[float]] = {m: [] for m in MODES}
    with tempfile.TemporaryDirectory() as tmp:
        files = TlsFiles.create(Path(tmp))
        for _ in range(args.rounds):
            for mode in MODES:
                ms, rate = uvloop.run(turn(mode, files, args.mb * MiB))
                cost[mode].append(ms)
                print(f"{mode:<10} {ms:.3f} ms/MB  {rate:7.0f} MB/s", file=sys.stderr, flush=True)
    print(f"server CPU ms per MB received, median of {args.rounds} rounds of {args.mb} MiB\n")
    print("| transport | ms/MB | runs |\n|---|---:|---|")
    for mode in MODES:
        print(f"| {mode} | {statistics.median(cost[mode]):.3f} | "
              f"{', '.join(f'{x:.3f}' for x in cost[mode])} |")


if __name__ == "__main__":
    main()
