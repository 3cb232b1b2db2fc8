"""A minimal raw Kafka protocol client for tests that must send exactly chosen bytes."""

from __future__ import annotations

import socket
import struct
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from samsa.protocol.codec import Chunks, build


class Wire:
    def __init__(self, bootstrap: str, timeout: float = 10.0) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.corr = 0

    def close(self) -> None:
        self.sock.close()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv_frame(self) -> bytes:
        head = self._recv_exact(4)
        (n,) = struct.unpack(">i", head)
        return self._recv_exact(n)

    def _recv_exact(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("connection closed by broker")
            buf += chunk
        return buf

    def is_closed(self, timeout: float = 5.0) -> bool:
        """True when the broker closed the connection (EOF) within timeout."""
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False

    def encode(self, key: int, version: int, body: dict[str, Any]) -> bytes:
        req_cls = load_request_schema(key, version)
        hdr_cls = req_cls.__header_schema__
        self.corr += 1
        out = Chunks()
        hdr_fields = {"request_api_key": key, "request_api_version": version,
                      "correlation_id": self.corr, "client_id": "wire-test"}
        entity_writer(hdr_cls)(out, build(hdr_cls, hdr_fields))
        entity_writer(req_cls)(out, build(req_cls, body))
        payload = b"".join(out)
        return struct.pack(">i", len(payload)) + payload

    def request(self, key: int, version: int, body: dict[str, Any]) -> Any:
        self.send_raw(self.encode(key, version, body))
        frame = self.recv_frame()
        resp_cls = load_response_schema(key, version)
        hdr, n = entity_reader(resp_cls.__header_schema__)(frame, 0)
        assert hdr.correlation_id == self.corr
        resp, _ = entity_reader(resp_cls)(frame, n)
        return resp
