"""Kafka Connect's REST API on Starlette, over a Herder: the same paths, bodies, status codes and
`{"error_code", "message"}` errors as Kafka Connect, so its tools (curl recipes, kcctl,
kafka-connect-py, Strimzi-style operators) work unchanged. Herder calls block, so they run in
worker threads; a herder that is not the leader raises NotLeaderException and the request is
forwarded (see forward.py)."""

from __future__ import annotations

import asyncio
import functools
import logging
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from ... import __version__
from ..errors import BadRequestException, NotFoundException, NotLeaderException
from ..runtime.herder import Herder, RestartRequest
from ..runtime.status import ConnectorTaskId, TargetState
from . import plugin_info
from .bodies import MAX_BODY, read_json, require_object, string_map
from .errors import RestError, error_response, json_response, message_of, status_of
from .forward import forward
from .loggers import Loggers, parse_level

log = logging.getLogger("samsa.connect.rest")

Handler = Callable[[Request], Awaitable[Response]]
T = TypeVar("T")

REQUEST_TIMEOUT_S = 90.0  # Kafka's ConnectResource.DEFAULT_REST_REQUEST_TIMEOUT_MS
HEALTH_TIMEOUT_S = 10.0
HEALTHY = "Worker has completed startup and is ready to handle requests."
UNHEALTHY = "Worker was unable to handle this request and may be unable to handle other requests."
INITIAL_STATES = {"RUNNING": TargetState.STARTED, "PAUSED": TargetState.PAUSED,
                  "STOPPED": TargetState.STOPPED}
_PHRASES = {400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed", 406: "Not Acceptable",
            415: "Unsupported Media Type"}


@functools.cache
def source_commit() -> str:
    """The git commit this code runs from (Kafka reports its build's commit id)."""
    try:
        out = subprocess.run(["git", "rev-parse", "--short=16", "HEAD"], capture_output=True,
                             text=True, timeout=2, cwd=Path(__file__).parent)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _flag(request: Request, name: str, default: bool) -> bool:
    """A boolean query parameter as JAX-RS reads one: "true" (any case) is true, else false."""
    raw = request.query_params.get(name)
    return default if raw is None else raw.strip().lower() == "true"


def endpoint(fn: Callable[[ConnectRestApp, Request], Awaitable[Response]]) -> Callable[..., Any]:
    """Map the herder's exceptions to Connect's error bodies; forward NotLeader to the leader."""

    @functools.wraps(fn)
    async def run(self: ConnectRestApp, request: Request) -> Response:
        try:
            return await fn(self, request)
        except NotLeaderException as e:
            try:
                return await forward(request, e.leader_url, self.request_timeout_s,
                                     verify=self.client_tls)
            except RestError as e2:
                return error_response(e2.status, e2.message)
        except Exception as e:  # every failure becomes Connect's error body
            status = status_of(e)
            if status == 500 and not isinstance(e, RestError):
                log.exception("uncaught exception in REST call %s %s", request.method, request.url.path)
            return error_response(status, message_of(e))

    return run


class _SlashStripper:
    """Jersey serves `/connectors/` as `/connectors`; Starlette would redirect, so strip it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            path = scope.get("path", "/")
            if len(path) > 1 and path.endswith("/"):
                scope = dict(scope, path=path.rstrip("/") or "/")
        await self.app(scope, receive, send)


HerderSource = Herder | Callable[[], Herder | None]
STARTING = "The worker is still starting up; try again shortly"


class ConnectRestApp:
    """The ASGI app (`.app`) serving one herder. The herder may be given as a function returning
    it (None, or raising LookupError, while the worker starts: requests then get 503), so the
    listener can be up before the herder, which needs the listener's URL, exists.
    `topic_tracking(_reset)` None reads `topic.tracking.enable` / `topic.tracking.allow.reset`
    from the herder's worker config (default true, as in Kafka)."""

    def __init__(self, herder: HerderSource, *, loggers: Loggers | None = None,
                 topic_tracking: bool | None = None, topic_tracking_reset: bool | None = None,
                 request_timeout_s: float = REQUEST_TIMEOUT_S, max_body: int = MAX_BODY,
                 allow_origin: str = "", allow_methods: str = "",
                 client_tls: Any = None) -> None:
        """`allow_origin` / `allow_methods`: the worker's `access.control.allow.origin` and
        `access.control.allow.methods` (CORS; methods default to GET, POST, HEAD as Kafka's).
        `client_tls`: the ssl.SSLContext requests forwarded to other workers use (HTTPS)."""
        self._herder = herder
        self.client_tls = client_tls
        self.loggers = loggers or Loggers()
        self._topic_tracking = topic_tracking
        self._topic_tracking_reset = topic_tracking_reset
        self.request_timeout_s = request_timeout_s
        self.max_body = max_body
        self._plugins: dict[bool, list[dict[str, Any]]] = {}
        c = "/connectors/{connector}"
        routes = [
            Route("/", self.root, methods=["GET"]),
            Route("/health", self.health, methods=["GET"]),
            Route("/connectors", self.list_connectors, methods=["GET"]),
            Route("/connectors", self.create_connector, methods=["POST"]),
            Route(c, self.get_connector, methods=["GET"]),
            Route(c, self.delete_connector, methods=["DELETE"]),
            Route(c + "/config", self.get_config, methods=["GET"]),
            Route(c + "/config", self.put_config, methods=["PUT"]),
            Route(c + "/config", self.patch_config, methods=["PATCH"]),
            Route(c + "/status", self.connector_status, methods=["GET"]),
            Route(c + "/restart", self.restart_connector, methods=["POST"]),
            Route(c + "/pause", self.pause, methods=["PUT"]),
            Route(c + "/resume", self.resume, methods=["PUT"]),
            Route(c + "/stop", self.stop, methods=["PUT"]),
            Route(c + "/tasks", self.task_configs, methods=["GET"]),
            Route(c + "/tasks", self.put_task_configs, methods=["POST"]),
            Route(c + "/tasks/{task:int}/status", self.task_status, methods=["GET"]),
            Route(c + "/tasks/{task:int}/restart", self.restart_task, methods=["POST"]),
            Route(c + "/offsets", self.get_offsets, methods=["GET"]),
            Route(c + "/offsets", self.alter_offsets, methods=["PATCH"]),
            Route(c + "/offsets", self.reset_offsets, methods=["DELETE"]),
            Route(c + "/topics", self.active_topics, methods=["GET"]),
            Route(c + "/topics/reset", self.reset_topics, methods=["PUT"]),
            Route("/connector-plugins", self.list_plugins, methods=["GET"]),
            Route("/connector-plugins/{plugin}/config", self.plugin_config, methods=["GET"]),
            Route("/connector-plugins/{plugin}/config/validate", self.validate, methods=["PUT"]),
            Route("/admin/loggers", self.list_loggers, methods=["GET"]),
            Route("/admin/loggers/{logger}", self.get_logger, methods=["GET"]),
            Route("/admin/loggers/{logger}", self.set_logger, methods=["PUT"]),
        ]
        self.starlette = Starlette(routes=routes, exception_handlers={
            HTTPException: self._http_error, Exception: self._internal_error})
        inner: ASGIApp = self.starlette
        origins = [o.strip() for o in allow_origin.split(",") if o.strip()]
        if origins:
            methods = [m.strip().upper() for m in allow_methods.split(",") if m.strip()]
            inner = CORSMiddleware(inner, allow_origins=origins,
                                   allow_methods=methods or ["GET", "POST", "HEAD"],
                                   allow_headers=["*"])
        self.app = _SlashStripper(inner)

    # ---- plumbing ----------------------------------------------------------------------------
    @property
    def herder(self) -> Herder:
        if isinstance(self._herder, Herder):
            return self._herder
        try:
            herder = self._herder()
        except LookupError:
            herder = None
        if herder is None:
            raise RestError(503, STARTING)
        return herder

    def _worker_flag(self, given: bool | None, name: str) -> bool:
        if given is not None:
            return given
        config = getattr(self.herder, "config", None)
        try:
            value = config.get(name) if config is not None else None
        except Exception:  # a worker config that does not define it: Kafka's default
            value = None
        return True if value is None else str(value).strip().lower() == "true"

    @property
    def topic_tracking(self) -> bool:
        return self._worker_flag(self._topic_tracking, "topic.tracking.enable")

    @property
    def topic_tracking_reset(self) -> bool:
        return self._worker_flag(self._topic_tracking_reset, "topic.tracking.allow.reset")

    async def _http_error(self, request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        phrase = _PHRASES.get(exc.status_code, str(exc.detail))
        return error_response(exc.status_code, f"HTTP {exc.status_code} {phrase}")

    async def _internal_error(self, request: Request, exc: Exception) -> Response:
        log.exception("uncaught exception in REST call %s %s", request.method, request.url.path)
        return error_response(500, message_of(exc))

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        """A blocking herder call in a worker thread, bounded by the request timeout."""
        try:
            return await asyncio.wait_for(asyncio.to_thread(fn, *args), self.request_timeout_s)
        except TimeoutError:
            raise RestError(500, "Request timed out") from None

    async def _body(self, request: Request) -> Any:
        return await read_json(request, self.max_body)

    @staticmethod
    def _name(request: Request) -> str:
        return str(request.path_params["connector"])

    def _task(self, request: Request) -> ConnectorTaskId:
        return ConnectorTaskId(self._name(request), int(request.path_params["task"]))

    @staticmethod
    def _check_name(name: str, config: dict[str, str | None]) -> None:
        """Kafka's checkAndPutConnectorConfigName: `name` in the config must match, else it is set."""
        included = config.get("name")
        if included is not None:
            if included != name:
                raise RestError(400, f"Connector name configuration ({included}) doesn't match "
                                     f"connector name in the URL ({name})")
        else:
            config["name"] = name

    # ---- root --------------------------------------------------------------------------------
    @endpoint
    async def root(self, request: Request) -> Response:
        return json_response({"version": __version__, "commit": source_commit(),
                              "kafka_cluster_id": self.herder.kafka_cluster_id})

    async def health(self, request: Request) -> Response:
        """KIP-1017: 200 once the worker serves requests, 503 while it starts, 500 when the herder
        does not answer within 10 s (a herder may offer `health_check()`; else `connectors()`)."""
        try:
            herder = self.herder
        except RestError:
            return json_response({"status": "starting", "message": "Worker is still starting up."}, 503)
        probe = getattr(herder, "health_check", None)
        try:
            await asyncio.wait_for(asyncio.to_thread(probe if callable(probe) else herder.connectors),
                                   HEALTH_TIMEOUT_S)
        except Exception as e:
            detail = "Request timed out." if isinstance(e, TimeoutError) else str(e)
            return json_response({"status": "unhealthy", "message": UNHEALTHY + " " + detail}, 500)
        return json_response({"status": "healthy", "message": HEALTHY})

    # ---- connectors --------------------------------------------------------------------------
    @endpoint
    async def list_connectors(self, request: Request) -> Response:
        names = await self._call(self.herder.connectors)
        expansions = request.query_params.getlist("expand")
        if not expansions:
            return json_response(list(names))
        return json_response(await self._call(self._expanded, names, expansions))

    def _expanded(self, names: list[str], expansions: list[str]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in names:
            try:
                entry: dict[str, Any] = {}
                for what in expansions:
                    if what == "status":
                        entry["status"] = self.herder.connector_status(name).to_json()
                    elif what == "info":
                        entry["info"] = self.herder.connector_info(name).to_json()
                    else:
                        log.info("Ignoring unknown expansion type %s", what)
                out[name] = entry
            except NotFoundException:
                log.debug("connector %s went away while listing", name)  # deleted meanwhile
        return out

    @endpoint
    async def create_connector(self, request: Request) -> Response:
        body = require_object(await self._body(request), "the create connector request",
                              ("name", "config", "initial_state"))
        raw_name = body.get("name")
        if raw_name is not None and not isinstance(raw_name, str | int | float):
            raise RestError(500, "Cannot deserialize the connector name from a non-scalar value")
        name = "" if raw_name is None else str(raw_name).strip()
        if body.get("config") is None:
            raise RestError(500, "The create connector request has no config")
        config = string_map(body["config"], "config")
        initial = body.get("initial_state")
        state: TargetState | None = None
        if initial is not None:
            state = INITIAL_STATES.get(str(initial).upper())
            if state is None:
                raise RestError(500, f"Cannot deserialize initial_state from {initial!r}: not one "
                                     f"of RUNNING, PAUSED, STOPPED")
        self._check_name(name, config)
        result = await self._call(self.herder.put_connector_config, name, self._strings(config),
                                  False, state)
        response = json_response(result.info.to_json(), 201)
        response.headers["location"] = f"/connectors/{name}"
        return response

    @staticmethod
    def _strings(config: dict[str, str | None]) -> dict[str, str]:
        """A full config may not hold nulls: Kafka's validation refuses them (400)."""
        nulls = sorted(k for k, v in config.items() if v is None)
        if nulls:
            raise BadRequestException(
                f"Connector configuration is invalid and contains the following {len(nulls)} "
                f"error(s):\n" + "\n".join(f"Null value can not be supplied as the configuration "
                                           f"value (key {k})." for k in nulls) +
                "\nYou can also find the above list of errors at the endpoint "
                "`/connector-plugins/{connectorType}/config/validate`")
        return {k: v for k, v in config.items() if v is not None}

    @endpoint
    async def get_connector(self, request: Request) -> Response:
        info = await self._call(self.herder.connector_info, self._name(request))
        return json_response(info.to_json())

    @endpoint
    async def delete_connector(self, request: Request) -> Response:
        await self._call(self.herder.delete_connector, self._name(request))
        return Response(status_code=204)

    @endpoint
    async def get_config(self, request: Request) -> Response:
        return json_response(await self._call(self.herder.connector_config, self._name(request)))

    @endpoint
    async def put_config(self, request: Request) -> Response:
        name = self._name(request)
        body = await self._body(request)
        if body is None:
            raise RestError(500, "The connector config is missing from the request")
        config = string_map(body, "the connector config")
        self._check_name(name, config)
        result = await self._call(self.herder.put_connector_config, name, self._strings(config),
                                  True, None)
        response = json_response(result.info.to_json(), 201 if result.created else 200)
        if result.created:
            response.headers["location"] = f"/connectors/{name}"
        return response

    @endpoint
    async def patch_config(self, request: Request) -> Response:
        body = await self._body(request)
        if body is None:
            raise RestError(500, "The connector config patch is missing from the request")
        patch = string_map(body, "the connector config patch")
        result = await self._call(self.herder.patch_connector_config, self._name(request), patch)
        return json_response(result.info.to_json())

    @endpoint
    async def connector_status(self, request: Request) -> Response:
        state = await self._call(self.herder.connector_status, self._name(request))
        return json_response(state.to_json())

    @endpoint
    async def restart_connector(self, request: Request) -> Response:
        name = self._name(request)
        include_tasks = _flag(request, "includeTasks", False)
        only_failed = _flag(request, "onlyFailed", False)
        if not include_tasks and not only_failed:
            await self._call(self.herder.restart_connector, name)  # KIP-745: the old behaviour
            return Response(status_code=204)
        req = RestartRequest(name, only_failed=only_failed, include_tasks=include_tasks)
        state = await self._call(self.herder.restart_connector_and_tasks, req)
        return json_response(state.to_json(), 202)

    @endpoint
    async def pause(self, request: Request) -> Response:
        await self._call(self.herder.pause_connector, self._name(request))
        return Response(status_code=202)

    @endpoint
    async def resume(self, request: Request) -> Response:
        await self._call(self.herder.resume_connector, self._name(request))
        return Response(status_code=202)

    @endpoint
    async def stop(self, request: Request) -> Response:
        await self._call(self.herder.stop_connector, self._name(request))
        return Response(status_code=204)

    # ---- tasks -------------------------------------------------------------------------------
    @endpoint
    async def task_configs(self, request: Request) -> Response:
        tasks = await self._call(self.herder.task_configs, self._name(request))
        return json_response([t.to_json() for t in tasks])

    @endpoint
    async def put_task_configs(self, request: Request) -> Response:
        """Internal (distributed mode): the worker running a connector hands its task configs to
        the leader, which writes them to the config topic (Kafka's POST .../tasks)."""
        body = await self._body(request)
        if not isinstance(body, list) or not all(isinstance(c, dict) for c in body):
            raise RestError(400, "Task configs must be a JSON array of objects")
        put = getattr(self.herder, "put_task_configs", None)
        if put is None:
            raise RestError(404, "This worker takes no task configs (standalone mode)")
        await self._call(put, self._name(request),
                         [{str(k): str(v) for k, v in c.items()} for c in body])
        return Response(status_code=204)

    @endpoint
    async def task_status(self, request: Request) -> Response:
        status = await self._call(self.herder.task_status, self._task(request))
        return json_response(status.to_json())

    @endpoint
    async def restart_task(self, request: Request) -> Response:
        await self._call(self.herder.restart_task, self._task(request))
        return Response(status_code=204)

    # ---- offsets (KIP-875) -------------------------------------------------------------------
    @endpoint
    async def get_offsets(self, request: Request) -> Response:
        offsets = await self._call(self.herder.connector_offsets, self._name(request))
        return json_response(offsets.to_json())

    @endpoint
    async def alter_offsets(self, request: Request) -> Response:
        body = await self._body(request)
        if body is None:
            raise RestError(500, "The offsets are missing from the request")
        body = require_object(body, "the connector offsets", ("offsets",))
        entries = body.get("offsets")
        if entries is not None and not isinstance(entries, list):
            raise RestError(500, "Cannot deserialize offsets: expected an array")
        if not entries:
            raise RestError(400, "Partitions / offsets need to be provided for an alter offsets request")
        offsets: list[dict[str, Any]] = []
        for i, entry in enumerate(entries):
            entry = require_object(entry, f"offsets[{i}]", ("partition", "offset"))
            partition, offset = entry.get("partition"), entry.get("offset")
            if partition is not None and not isinstance(partition, dict):
                raise RestError(500, f"Cannot deserialize offsets[{i}].partition: expected an object")
            if offset is not None and not isinstance(offset, dict):
                raise RestError(500, f"Cannot deserialize offsets[{i}].offset: expected an object")
            offsets.append({"partition": partition, "offset": offset})
        message = await self._call(self.herder.alter_connector_offsets, self._name(request), offsets)
        return json_response({"message": message})

    @endpoint
    async def reset_offsets(self, request: Request) -> Response:
        message = await self._call(self.herder.reset_connector_offsets, self._name(request))
        return json_response({"message": message})

    # ---- active topics (KIP-558) -------------------------------------------------------------
    @endpoint
    async def active_topics(self, request: Request) -> Response:
        if not self.topic_tracking:
            raise RestError(403, "Topic tracking is disabled.")
        name = self._name(request)
        topics = await self._call(self.herder.connector_active_topics, name)
        return json_response({name: {"topics": list(topics)}})

    @endpoint
    async def reset_topics(self, request: Request) -> Response:
        if not self.topic_tracking:
            raise RestError(403, "Topic tracking is disabled.")
        if not self.topic_tracking_reset:
            raise RestError(403, "Topic tracking reset is disabled.")
        await self._call(self.herder.reset_connector_active_topics, self._name(request))
        return Response(status_code=202)

    # ---- plugins -----------------------------------------------------------------------------
    @endpoint
    async def list_plugins(self, request: Request) -> Response:
        only = _flag(request, "connectorsOnly", True)
        if only not in self._plugins:  # versions load every plugin: once per worker, as Kafka does
            self._plugins[only] = await self._call(plugin_info.listing, self.herder.plugins, only)
        return json_response(self._plugins[only])

    @endpoint
    async def plugin_config(self, request: Request) -> Response:
        name = str(request.path_params["plugin"])
        return json_response(await self._call(plugin_info.plugin_config, self.herder, name))

    @endpoint
    async def validate(self, request: Request) -> Response:
        plugin = str(request.path_params["plugin"])
        body = await self._body(request)
        if body is None:
            raise RestError(500, "The connector config is missing from the request")
        config = string_map(body, "the connector config")
        included = config.get("connector.class")
        if included is not None and \
                not plugin_info.normalized(included).endswith(plugin_info.normalized(plugin)):
            raise RestError(400, f"Included connector type {included} does not match request type "
                                 f"{plugin}")
        answer = await self._call(self.herder.validate_connector_config, config)
        return json_response(answer)

    # ---- loggers (KIP-495, KIP-976) ----------------------------------------------------------
    @endpoint
    async def list_loggers(self, request: Request) -> Response:
        return json_response(self.loggers.all_levels())

    @endpoint
    async def get_logger(self, request: Request) -> Response:
        name = str(request.path_params["logger"])
        level = self.loggers.level(name)
        if level is None:
            raise NotFoundException(f"Logger {name} not found.")
        return json_response(level)

    @endpoint
    async def set_logger(self, request: Request) -> Response:
        name = str(request.path_params["logger"])
        body = await self._body(request)
        if body is None:
            raise RestError(500, "The logger level is missing from the request")
        wanted = string_map(body, "the logger level").get("level")
        if wanted is None:
            raise RestError(400, "Desired 'level' parameter was not specified in request.")
        level = parse_level(wanted)
        if level is None:
            raise RestError(404, f"invalid log level '{wanted}'.")
        scope = (request.query_params.get("scope") or "worker").lower()
        if scope == "cluster":
            cluster = getattr(self.herder, "set_cluster_logger_level", None)
            if callable(cluster):
                await self._call(cluster, name, wanted.upper())
            else:  # a standalone worker is its own cluster
                self.loggers.set_level(name, level)
            return Response(status_code=204)
        if scope != "worker":
            log.warning("Received invalid scope '%s' in request to adjust logging level; will "
                        "default to worker", scope)
        return json_response(self.loggers.set_level(name, level))


def create_app(herder: HerderSource, **options: Any) -> ASGIApp:
    """The ASGI app for uvicorn (see ConnectRestApp for the options)."""
    return ConnectRestApp(herder, **options).app
