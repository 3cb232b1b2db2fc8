"""Decodes request frames handed over stdin the way the server does, in a process of its own, so a
frame that aborts the native decoder kills this worker and not the fuzzer.

In: key i16, version i16, length u32, frame. Out: status u8 (0 decoded, 1 rejected by the request
guard, 2 other exception), message length u16, message.
"""

from __future__ import annotations

import struct
import sys

from samsa.protocol.codec import decode_request

try:
    from samsa.protocol.request_guard import MalformedRequest
except ImportError:  # before the guard existed
    class MalformedRequest(Exception):  # type: ignore[no-redef]
        pass


def main() -> None:
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    while True:
        head = inp.read(8)
        if len(head) < 8:
            return
        key, version, n = struct.unpack(">hhI", head)
        frame = inp.read(n)
        try:
            decode_request(key, version, frame)
            status, msg = 0, b""
        except MalformedRequest as e:
            status, msg = 1, str(e).encode()[:2000]
        except Exception as e:  # noqa: BLE001 - reported to the fuzzer
            status, msg = 2, f"{type(e).__name__}: {e}".encode()[:2000]
        out.write(struct.pack(">BH", status, len(msg)) + msg)
        out.flush()


if __name__ == "__main__":
    main()
