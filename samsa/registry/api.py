"""Confluent Schema Registry's REST API on Starlette: routing, content types, body limits and
error bodies. Writes on an instance that is not the leader are forwarded to the leader."""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from . import errors
from .errors import RegistryError
from .formats import TYPES
from .service import Registry

log = logging.getLogger("samsa.registry.api")

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
ACCEPTED_TYPES = ("application/vnd.schemaregistry.v1+json", "application/vnd.schemaregistry+json",
                  "application/json", "application/octet-stream")
DEFAULT_MAX_BODY = 16 << 20
_INLINE_JSON = 64 << 10  # bodies up to this are parsed on the event loop

Handler = Callable[[Request], Awaitable[Response]]


def _json(obj: Any, status: int = 200) -> Response:
    return Response(json.dumps(obj), status_code=status, media_type=CONTENT_TYPE)


def _flag(request: Request, name: str) -> bool:
    return request.query_params.get(name, "false").lower() == "true"


def _int_param(request: Request, name: str, default: int) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError:
        raise errors.bad_request(f"query parameter {name} must be an integer, got {raw!r}") from None


def _schema_id(request: Request) -> int:
    raw = request.path_params["id"]
    try:
        return int(raw)
    except ValueError:
        raise errors.RegistryError(404, 404, "HTTP 404 Not Found") from None


class RegistryApp:
    def __init__(self, registry: Registry, leader_url: str | None = None,
                 sync: Callable[[], None] | None = None, max_body: int = DEFAULT_MAX_BODY,
                 forward_tls: ssl.SSLContext | None = None) -> None:
        self.registry = registry
        self.forward_tls = forward_tls  # how to reach an https:// leader
        self.leader_url = leader_url.rstrip("/") if leader_url else None
        self.sync = sync
        self.max_body = max_body
        r = self
        routes = [
            Route("/", r.root, methods=["GET"]),
            Route("/schemas/types", r.schema_types, methods=["GET"]),
            Route("/schemas", r.schemas, methods=["GET"]),
            Route("/schemas/ids/{id}", r.schema_by_id, methods=["GET"]),
            Route("/schemas/ids/{id}/schema", r.schema_by_id_raw, methods=["GET"]),
            Route("/schemas/ids/{id}/versions", r.schema_versions, methods=["GET"]),
            Route("/schemas/ids/{id}/subjects", r.schema_subjects, methods=["GET"]),
            Route("/subjects", r.subjects, methods=["GET"]),
            Route("/subjects/{subject:path}/versions/{version}/schema", r.version_schema, methods=["GET"]),
            Route("/subjects/{subject:path}/versions/{version}/referencedby", r.referenced_by,
                  methods=["GET"]),
            Route("/subjects/{subject:path}/versions/{version}", r.version, methods=["GET", "DELETE"]),
            Route("/subjects/{subject:path}/versions", r.versions, methods=["GET", "POST"]),
            Route("/subjects/{subject:path}", r.subject, methods=["POST", "DELETE"]),
            Route("/config", r.config, methods=["GET", "PUT", "DELETE"]),
            Route("/config/{subject:path}", r.config, methods=["GET", "PUT", "DELETE"]),
            Route("/mode", r.mode, methods=["GET", "PUT"]),
            Route("/mode/{subject:path}", r.mode, methods=["GET", "PUT", "DELETE"]),
            Route("/compatibility/subjects/{subject:path}/versions/{version}", r.compatibility,
                  methods=["POST"]),
            Route("/compatibility/subjects/{subject:path}/versions", r.compatibility, methods=["POST"]),
        ]
        self.app = Starlette(routes=routes, exception_handlers={
            HTTPException: self._http_error, Exception: self._internal_error})

    # ---- plumbing -----------------------------------------------------------------------
    async def _http_error(self, request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        phrase = {404: "Not Found", 405: "Method Not Allowed"}.get(exc.status_code, str(exc.detail))
        return _json({"error_code": exc.status_code, "message": f"HTTP {exc.status_code} {phrase}"},
                     exc.status_code)

    async def _internal_error(self, request: Request, exc: Exception) -> Response:
        log.exception("internal error on %s %s", request.method, request.url.path)
        return _json({"error_code": 50001, "message": f"Internal error: {exc}"}, 500)

    async def _body(self, request: Request) -> Any:
        ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if ctype and ctype not in ACCEPTED_TYPES:
            raise RegistryError(415, 415, "HTTP 415 Unsupported Media Type")
        declared = request.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > self.max_body:
            raise RegistryError(413, 413, f"Request body is larger than {self.max_body} bytes")
        chunks = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > self.max_body:
                raise RegistryError(413, 413, f"Request body is larger than {self.max_body} bytes")
            chunks.append(chunk)
        raw = b"".join(chunks)
        if not raw.strip():
            return {}
        try:
            # a big body is parsed off the event loop (the embedded registry shares the broker's)
            return json.loads(raw) if len(raw) < _INLINE_JSON else \
                await asyncio.to_thread(json.loads, raw)
        except (ValueError, UnicodeDecodeError) as e:
            raise errors.bad_request(f"Unexpected character in the request body: {e}") from None
        except RecursionError:
            raise errors.bad_request("The request body nests too deeply") from None

    async def _run(self, request: Request, fn: Callable[[], Any], write: bool = False,
                   body: bytes | None = None, offload: bool = False) -> Response:
        """`fn` on a thread for writes and for reads that parse a schema the client sent
        (`offload`: lookups, compatibility checks, whose cost the client chooses); the
        embedded registry shares the broker's event loop, which must not wait on them."""
        try:
            if write and self.leader_url:
                return await self._forward(request, body)
            result = await asyncio.to_thread(fn) if write or offload else fn()
            return result if isinstance(result, Response) else _json(result)
        except RegistryError as e:
            return _json(e.body(), e.status)

    async def _forward(self, request: Request, body: bytes | None) -> Response:
        import httpx
        url = f"{self.leader_url}{request.url.path}"
        headers = {"content-type": CONTENT_TYPE}
        if "authorization" in request.headers:  # the leader authenticates the caller itself
            headers["authorization"] = request.headers["authorization"]
        verify: ssl.SSLContext | bool = self.forward_tls if self.forward_tls is not None else True
        try:
            async with httpx.AsyncClient(timeout=30.0, verify=verify) as client:
                resp = await client.request(request.method, url, params=request.query_params,
                                            content=body or b"", headers=headers)
        except httpx.HTTPError as e:
            raise errors.forwarding_error(f"{self.leader_url}: {e}") from None
        if resp.status_code < 300 and self.sync is not None:
            await asyncio.to_thread(self.sync)
        return Response(resp.content, status_code=resp.status_code, media_type=CONTENT_TYPE)

    async def _read(self, request: Request) -> tuple[Any, bytes]:
        body = await self._body(request)
        return body, json.dumps(body).encode()

    # ---- endpoints ----------------------------------------------------------------------
    async def root(self, request: Request) -> Response:
        return _json({})

    async def schema_types(self, request: Request) -> Response:
        return _json(sorted(TYPES))

    async def schemas(self, request: Request) -> Response:
        reg = self.registry
        return await self._run(request, lambda: reg.list_schemas(
            _flag(request, "deleted"), request.query_params.get("subjectPrefix", ""),
            _flag(request, "latestOnly"), _int_param(request, "offset", 0),
            _int_param(request, "limit", -1)))

    async def schema_by_id(self, request: Request) -> Response:
        fmt = request.query_params.get("format")
        return await self._run(request, lambda: self.registry.get_schema(_schema_id(request), fmt))

    async def schema_by_id_raw(self, request: Request) -> Response:
        def raw() -> Response:
            s = self.registry.get_schema(_schema_id(request))
            return Response(s["schema"], media_type=CONTENT_TYPE)
        return await self._run(request, raw)

    async def schema_versions(self, request: Request) -> Response:
        return await self._run(request, lambda: self.registry.schema_versions(
            _schema_id(request), _flag(request, "deleted")))

    async def schema_subjects(self, request: Request) -> Response:
        return await self._run(request, lambda: self.registry.schema_subjects(
            _schema_id(request), _flag(request, "deleted")))

    async def subjects(self, request: Request) -> Response:
        return await self._run(request, lambda: self.registry.subjects(
            _flag(request, "deleted"), request.query_params.get("subjectPrefix", "")))

    async def versions(self, request: Request) -> Response:
        subject = request.path_params["subject"]
        if request.method == "GET":
            return await self._run(request, lambda: self.registry.versions(
                subject, _flag(request, "deleted")))
        try:
            body, raw = await self._read(request)
        except RegistryError as e:
            return _json(e.body(), e.status)
        return await self._run(request, lambda: self.registry.register(
            subject, body, _flag(request, "normalize")), write=True, body=raw)

    async def version(self, request: Request) -> Response:
        subject = request.path_params["subject"]
        version = request.path_params["version"]
        if request.method == "GET":
            fmt = request.query_params.get("format")
            return await self._run(request, lambda: self.registry.get_version(
                subject, version, _flag(request, "deleted"), fmt))
        return await self._run(request, lambda: self.registry.delete_version(
            subject, version, _flag(request, "permanent")), write=True)

    async def version_schema(self, request: Request) -> Response:
        subject = request.path_params["subject"]
        version = request.path_params["version"]
        return await self._run(request, lambda: Response(self.registry.get_version_schema(
            subject, version, _flag(request, "deleted")), media_type=CONTENT_TYPE))

    async def referenced_by(self, request: Request) -> Response:
        subject = request.path_params["subject"]
        version = request.path_params["version"]
        return await self._run(request, lambda: self.registry.referenced_by(subject, version))

    async def subject(self, request: Request) -> Response:
        subject = request.path_params["subject"]
        if request.method == "DELETE":
            return await self._run(request, lambda: self.registry.delete_subject(
                subject, _flag(request, "permanent")), write=True)
        try:
            body, _ = await self._read(request)
        except RegistryError as e:
            return _json(e.body(), e.status)
        return await self._run(request, lambda: self.registry.lookup(
            subject, body, _flag(request, "normalize"), _flag(request, "deleted")), offload=True)

    async def config(self, request: Request) -> Response:
        subject = request.path_params.get("subject")
        reg = self.registry
        if request.method == "GET":
            return await self._run(request, lambda: reg.get_config(
                subject, _flag(request, "defaultToGlobal")))
        if request.method == "DELETE":
            return await self._run(request, lambda: reg.delete_config(subject), write=True)
        try:
            body, raw = await self._read(request)
        except RegistryError as e:
            return _json(e.body(), e.status)
        return await self._run(request, lambda: reg.set_config(subject, body), write=True, body=raw)

    async def mode(self, request: Request) -> Response:
        subject = request.path_params.get("subject")
        reg = self.registry
        if request.method == "GET":
            return await self._run(request, lambda: reg.get_mode(subject, _flag(request, "defaultToGlobal")))
        if request.method == "DELETE":
            assert subject is not None
            return await self._run(request, lambda: reg.delete_mode(subject), write=True)
        try:
            body, raw = await self._read(request)
        except RegistryError as e:
            return _json(e.body(), e.status)
        return await self._run(request, lambda: reg.set_mode(subject, body, _flag(request, "force")),
                               write=True, body=raw)

    async def compatibility(self, request: Request) -> Response:
        subject = request.path_params["subject"]
        version = request.path_params.get("version")
        try:
            body, _ = await self._read(request)
        except RegistryError as e:
            return _json(e.body(), e.status)
        return await self._run(request, lambda: self.registry.test_compatibility(
            subject, version, body, _flag(request, "verbose"), _flag(request, "normalize")),
            offload=True)
