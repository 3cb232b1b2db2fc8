"""A real S3 endpoint for tests and benchmarks: moto's ThreadedMotoServer on a free 127.0.0.1 port.

The S3 remote storage backend is exercised over real HTTP (botocore's signing, retries, multipart,
error responses), not through moto's in-process mocks; broker subprocesses reach the same server.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

# Credentials moto accepts; tests pass them to brokers through the environment (the AWS chain).
TEST_ACCESS_KEY = "samsa-test-key"
TEST_SECRET_KEY = "samsa-test-secret"
TEST_REGION = "us-east-1"


class MotoS3:
    """moto's S3 server in a thread; `endpoint` is its URL, `env` the AWS variables for a broker."""

    def __init__(self) -> None:
        from moto.server import ThreadedMotoServer

        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.endpoint = ""

    def start(self) -> MotoS3:
        import logging

        logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no line per request on stderr
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.endpoint = f"http://{host}:{port}"
        return self

    def stop(self) -> None:
        self._server.stop()

    def __enter__(self) -> MotoS3:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def env(self) -> dict[str, str]:
        """The AWS credential chain's environment variables (what a broker subprocess inherits)."""
        return {
            "AWS_ACCESS_KEY_ID": TEST_ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": TEST_SECRET_KEY,
            "AWS_DEFAULT_REGION": TEST_REGION,
        }

    def client(self) -> Any:
        """A boto3 S3 client on this server (for creating buckets and inspecting objects)."""
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name=TEST_REGION,
            aws_access_key_id=TEST_ACCESS_KEY,
            aws_secret_access_key=TEST_SECRET_KEY,
        )

    def create_bucket(self, name: str) -> None:
        self.client().create_bucket(Bucket=name)

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        """Every object key under `prefix` (paginated)."""
        out: list[str] = []
        for page in self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            out.extend(o["Key"] for o in page.get("Contents", ()))
        return sorted(out)

    def reset(self) -> None:
        """Drop every bucket and object (moto's reset endpoint), between tests sharing one server."""
        import urllib.request

        urllib.request.urlopen(
            urllib.request.Request(f"{self.endpoint}/moto-api/reset", method="POST"), timeout=10
        ).read()


@contextmanager
def aws_env(env: dict[str, str]) -> Iterator[None]:
    """Set the AWS variables in this process for the block (the in-process backend's credential chain)."""
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class S3FaultProxy:
    """An HTTP proxy in front of an S3 endpoint that answers the next `fail_next` requests with
    `status` (S3's XML error body) instead of forwarding them; records each request's method,
    path and Authorization header. For testing retries with back-off and error handling over
    real HTTP."""

    def __init__(self, target: str) -> None:
        import http.server
        import threading
        import urllib.parse

        self.target = urllib.parse.urlsplit(target)
        self.fail_next = 0
        self.status = 503
        self.code = "SlowDown"
        self.requests: list[tuple[str, str, str]] = []
        self._lock = threading.Lock()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _any(self) -> None:
                proxy._handle(self)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _any

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> S3FaultProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def fail(self, count: int, status: int = 503, code: str = "SlowDown") -> None:
        with self._lock:
            self.fail_next, self.status, self.code = count, status, code

    def _handle(self, h: Any) -> None:
        import http.client

        length = int(h.headers.get("Content-Length") or 0)
        body = h.rfile.read(length) if length else b""
        with self._lock:
            self.requests.append((h.command, h.path, h.headers.get("Authorization", "")))
            failing = self.fail_next > 0
            if failing:
                self.fail_next -= 1
            status, code = self.status, self.code
        if failing:
            out = (f"<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>{code}</Code>"
                   f"<Message>injected by S3FaultProxy</Message></Error>").encode()
            h.send_response(status)
            h.send_header("Content-Type", "application/xml")
            h.send_header("Content-Length", str(len(out)))
            h.end_headers()
            if h.command != "HEAD":
                h.wfile.write(out)
            return
        conn = http.client.HTTPConnection(self.target.hostname or "127.0.0.1", self.target.port, timeout=30)
        try:
            headers = {k: v for k, v in h.headers.items() if k.lower() != "connection"}
            conn.request(h.command, h.path, body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            h.send_response(resp.status)
            for k, v in resp.getheaders():
                if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                    h.send_header(k, v)
            h.send_header("Content-Length", str(len(data)))
            h.end_headers()
            if h.command != "HEAD":
                h.wfile.write(data)
        finally:
            conn.close()
