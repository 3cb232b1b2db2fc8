"""A minimal Iceberg REST catalog for tests: the REST spec's config, namespace and table endpoints
(create, load, commit) served by Starlette on uvicorn in a thread, backed by pyiceberg's
SqlCatalog (SQLite) in a directory. Enough for pyiceberg's RestCatalog, which the sink uses with
iceberg.catalog.type=rest."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import uvicorn
from pyiceberg.catalog.rest import CreateTableRequest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import (
    CommitFailedException,
    NamespaceAlreadyExistsError,
    NoSuchNamespaceError,
    NoSuchTableError,
    TableAlreadyExistsError,
)
from pyiceberg.table import CommitTableRequest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from samsa.testing import free_port


def _error(code: int, kind: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind, "code": code}}, code)


def _namespace(raw: str) -> tuple[str, ...]:
    return tuple(raw.split("\x1f"))


class RestCatalogServer:
    def __init__(self, directory: Path, port: int | None = None) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.catalog = SqlCatalog("rest-backend", uri=f"sqlite:///{directory}/rest.db",
                                  warehouse=f"file://{directory}")
        self.port = port or free_port()
        self.commits = 0
        routes = [
            Route("/v1/config", self.config, methods=["GET"]),
            Route("/v1/namespaces", self.namespaces, methods=["GET", "POST"]),
            Route("/v1/namespaces/{ns}", self.namespace, methods=["GET", "HEAD"]),
            Route("/v1/namespaces/{ns}/tables", self.tables, methods=["GET", "POST"]),
            Route("/v1/namespaces/{ns}/tables/{table}", self.table,
                  methods=["GET", "HEAD", "POST"]),
        ]
        self.app = Starlette(routes=routes)
        self.server = uvicorn.Server(uvicorn.Config(self.app, host="127.0.0.1", port=self.port,
                                                    log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> RestCatalogServer:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started and time.monotonic() < deadline:
            time.sleep(0.05)
        assert self.server.started, "REST catalog did not start"
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.server.should_exit = True
        self.thread.join(10)

    async def config(self, request: Request) -> Response:
        return JSONResponse({"defaults": {}, "overrides": {}})

    async def namespaces(self, request: Request) -> Response:
        if request.method == "GET":
            return JSONResponse({"namespaces": [list(n) for n in self.catalog.list_namespaces()]})
        body = await request.json()
        ns = tuple(body["namespace"])
        try:
            self.catalog.create_namespace(ns, body.get("properties") or {})
        except NamespaceAlreadyExistsError as e:
            return _error(409, "AlreadyExistsException", str(e))
        return JSONResponse({"namespace": list(ns), "properties": body.get("properties") or {}})

    async def namespace(self, request: Request) -> Response:
        ns = _namespace(request.path_params["ns"])
        try:
            props = self.catalog.load_namespace_properties(ns)
        except NoSuchNamespaceError as e:
            return _error(404, "NoSuchNamespaceException", str(e))
        return JSONResponse({"namespace": list(ns), "properties": props})

    async def tables(self, request: Request) -> Response:
        ns = _namespace(request.path_params["ns"])
        if request.method == "GET":
            return JSONResponse({"identifiers": [{"namespace": list(i[:-1]), "name": i[-1]}
                                                 for i in self.catalog.list_tables(ns)]})
        body = {"location": None, "partition-spec": None, "write-order": None,
                **(await request.json())}  # the client leaves out what is null
        req = CreateTableRequest.model_validate(body)
        try:
            table = self.catalog.create_table((*ns, req.name), req.table_schema,
                                              partition_spec=req.partition_spec or None,  # type: ignore[arg-type]
                                              properties=req.properties)
        except TableAlreadyExistsError as e:
            return _error(409, "AlreadyExistsException", str(e))
        except NoSuchNamespaceError as e:
            return _error(404, "NoSuchNamespaceException", str(e))
        return self._load_result(table.metadata_location, table.metadata)

    async def table(self, request: Request) -> Response:
        ident = (*_namespace(request.path_params["ns"]), request.path_params["table"])
        try:
            table = self.catalog.load_table(ident)
        except NoSuchTableError as e:
            return _error(404, "NoSuchTableException", str(e))
        if request.method == "HEAD":
            return Response(status_code=204)
        if request.method == "GET":
            return self._load_result(table.metadata_location, table.metadata)
        req = CommitTableRequest.model_validate_json(await request.body())
        try:
            resp = self.catalog.commit_table(table, req.requirements, req.updates)
        except CommitFailedException as e:
            return _error(409, "CommitFailedException", str(e))
        self.commits += 1
        return Response(resp.model_dump_json(by_alias=True), media_type="application/json")

    @staticmethod
    def _load_result(location: str, metadata: Any) -> Response:
        body = {"metadata-location": location,
                "metadata": json.loads(metadata.model_dump_json(by_alias=True)), "config": {}}
        return JSONResponse(body)
