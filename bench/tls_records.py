"""The sizes of the TLS records a Kafka client sends a broker's SSL listener while producing.

A broker decrypts TLS record by record (OpenSSL's SSL_read returns one record's data per call),
so its TLS cost per MB depends on how the client cuts its stream into records as much as on the
cipher. This puts a small TCP relay between confluent-kafka (librdkafka) and one Samsa broker's
SSL listener (advertised at the relay's port, so every connection crosses it), reads the TLS
record headers of the client-to-broker stream, and prints the application-data records by size.

    PYTHONPATH=. python bench/tls_records.py --records 100000
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import sys
import tempfile
import threading
import time
from pathlib import Path

from samsa.testing import SamsaBroker, free_port
from samsa.testing.tls import TlsFiles

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tls import listeners, produce  # noqa: E402

APPLICATION_DATA = 23
sizes: collections.Counter[int] = collections.Counter()  # KiB bucket -> records


async def relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, parse: bool) -> None:
    pending = bytearray()
    try:
        while data := await reader.read(1 << 20):
            if parse:
                pending += data
                while len(pending) >= 5:
                    n = int.from_bytes(pending[3:5], "big")
                    if len(pending) < 5 + n:
                        break
                    if pending[0] == APPLICATION_DATA:
                        sizes[n // 1024] += 1
                    del pending[:5 + n]
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        writer.close()


def serve_relay(port: int, target: int) -> None:
    async def handle(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        tr, tw = await asyncio.open_connection("127.0.0.1", target)
        await asyncio.gather(relay(r, tw, True), relay(tr, w, False))

    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", port)
        await server.serve_forever()

    asyncio.run(main())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--size", type=int, default=1024)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="samsa-bench-tls-records-") as tmp:
        tls = TlsFiles.create(Path(tmp) / "certs")
        overrides, protocols, plain = listeners(tls)
        bootstrap, conf = protocols["SSL"]
        ssl_port, relay_port = int(bootstrap.rsplit(":", 1)[1]), free_port()
        overrides["advertised.listeners"] = overrides["listeners"].replace(
            f"SSL://127.0.0.1:{ssl_port}", f"SSL://127.0.0.1:{relay_port}")
        with SamsaBroker(Path(tmp) / "data", port=plain, overrides=overrides):
            threading.Thread(target=serve_relay, args=(relay_port, ssl_port), daemon=True).start()
            time.sleep(0.5)
            produce(f"127.0.0.1:{relay_port}", conf, "tls-records", args.records, args.size)
    total = sum(sizes.values())
    mb = args.records * args.size / 1e6
    print(f"{args.records} records of {args.size} B produced over SSL by confluent-kafka: "
          f"{total} TLS application-data records, {total / mb:.0f} per MB\n")
    print("| record size | records | per MB |\n|---|---:|---:|")
    for kib in sorted(sizes):
        print(f"| {kib}-{kib + 1} KiB | {sizes[kib]} | {sizes[kib] / mb:.1f} |")


if __name__ == "__main__":
    main()
