"""The Connect REST API's paths, status codes and JSON shapes, field by field, against the
in-memory herder (the Herder contract) through Starlette's TestClient, and forwarding between two
real listeners."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from connect_rest_fixtures import SINK, SOURCE, MemoryHerder, make_plugins, serving
from starlette.testclient import TestClient

from samsa import __version__
from samsa.connect.rest import ConnectRestApp, Loggers, create_app
from samsa.connect.runtime.herder import RestartRequest
from samsa.connect.runtime.status import TargetState


@pytest.fixture(scope="module")
def plugin_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("plugins")


@pytest.fixture
def herder(plugin_dir: Path) -> MemoryHerder:
    return MemoryHerder(make_plugins(plugin_dir))


@pytest.fixture
def client(herder: MemoryHerder) -> Iterator[TestClient]:
    with TestClient(ConnectRestApp(herder).app, raise_server_exceptions=False) as c:
        yield c


def source_config(**extra: str) -> dict[str, str]:
    return {"connector.class": SOURCE, "topic": "t1", "tasks.max": "2", **extra}


def create(client: TestClient, name: str = "src", **extra: str) -> httpx.Response:
    return client.post("/connectors", json={"name": name, "config": source_config(**extra)})


def assert_error(resp: httpx.Response, status: int, contains: str = "") -> None:
    assert resp.status_code == status, resp.text
    body = resp.json()
    assert set(body) == {"error_code", "message"}
    assert body["error_code"] == status
    assert contains in (body["message"] or "")


# ---- root and listing ----------------------------------------------------------------------
def test_root_answers_server_info(client: TestClient) -> None:
    resp = client.get("/")
    assert resp.status_code == 200
    assert resp.headers["content-type"].startswith("application/json")
    body = resp.json()
    assert set(body) == {"version", "commit", "kafka_cluster_id"}
    assert body["version"] == __version__
    assert body["kafka_cluster_id"] == "samsa-test-cluster"
    assert isinstance(body["commit"], str) and body["commit"]


def test_list_connectors_plain_and_expanded(client: TestClient, herder: MemoryHerder) -> None:
    assert client.get("/connectors").json() == []
    assert create(client, "b").status_code == 201
    assert create(client, "a").status_code == 201
    assert client.get("/connectors").json() == ["a", "b"]
    assert client.get("/connectors/").json() == ["a", "b"]  # Jersey serves the trailing slash too

    status = client.get("/connectors?expand=status").json()
    assert set(status) == {"a", "b"}
    assert set(status["a"]) == {"status"}
    assert status["a"]["status"]["name"] == "a"
    assert status["a"]["status"]["connector"] == {"state": "RUNNING", "worker_id": herder.worker_id}
    assert status["a"]["status"]["type"] == "source"

    both = client.get("/connectors", params=[("expand", "status"), ("expand", "info")]).json()
    assert set(both["b"]) == {"status", "info"}
    info = both["b"]["info"]
    assert info["name"] == "b" and info["type"] == "source"
    assert info["config"] == {**source_config(), "name": "b"}
    assert info["tasks"] == [{"connector": "b", "task": 0}, {"connector": "b", "task": 1}]

    assert client.get("/connectors?expand=bogus").json() == {"a": {}, "b": {}}


# ---- create / get / delete -----------------------------------------------------------------
def test_create_returns_201_with_connector_info(client: TestClient) -> None:
    resp = create(client, " src ")  # Kafka trims the name
    assert resp.status_code == 201
    assert resp.headers["location"] == "/connectors/src"
    body = resp.json()
    assert body == {"name": "src", "config": {**source_config(), "name": "src"},
                    "tasks": [{"connector": "src", "task": 0}, {"connector": "src", "task": 1}],
                    "type": "source"}
    assert client.get("/connectors/src").json() == body


def test_create_twice_is_409(client: TestClient) -> None:
    assert create(client).status_code == 201
    assert_error(create(client), 409, "already exists")


def test_create_with_mismatched_name_is_400(client: TestClient) -> None:
    resp = client.post("/connectors", json={"name": "a", "config": source_config(name="b")})
    assert_error(resp, 400, "Connector name configuration (b) doesn't match connector name in the URL (a)")


def test_create_invalid_config_is_400(client: TestClient) -> None:
    resp = client.post("/connectors", json={"name": "a", "config": {"connector.class": SOURCE}})
    assert_error(resp, 400, "contains the following 1 error(s)")
    resp = client.post("/connectors", json={"name": "a", "config": {"topic": "x"}})
    assert_error(resp, 400, "no connector type")


def test_create_with_initial_state(client: TestClient, herder: MemoryHerder) -> None:
    resp = client.post("/connectors", json={"name": "p", "config": source_config(),
                                            "initial_state": "paused"})
    assert resp.status_code == 201
    assert herder.conns["p"].target is TargetState.PAUSED
    resp = client.post("/connectors", json={"name": "s", "config": source_config(),
                                            "initial_state": "STOPPED"})
    assert resp.status_code == 201 and resp.json()["tasks"] == []
    resp = client.post("/connectors", json={"name": "x", "config": source_config(),
                                            "initial_state": "SLEEPING"})
    assert_error(resp, 500, "initial_state")


def test_create_coerces_scalars_to_strings(client: TestClient) -> None:
    """Jackson reads numbers and booleans into a Map<String, String> as their text."""
    resp = client.post("/connectors", json={"name": "n", "config": {
        "connector.class": SOURCE, "topic": "t", "tasks.max": 3, "batch.size": 10, "x.flag": True}})
    assert resp.status_code == 201, resp.text
    config = resp.json()["config"]
    assert config["tasks.max"] == "3" and config["batch.size"] == "10" and config["x.flag"] == "true"


def test_create_null_value_is_400(client: TestClient) -> None:
    resp = client.post("/connectors", json={"name": "n", "config": {**source_config(), "topic": None}})
    assert_error(resp, 400, "Null value can not be supplied")


@pytest.mark.parametrize("body", [
    b"{not json", b"[1, 2]", b'{"name": "x", "config": [1]}', b'{"name": "x", "config": {"a": {}}}',
    b'{"name": "x", "config": {}, "unknown": 1}', b"",
])
def test_malformed_create_bodies_are_500_like_kafka(client: TestClient, body: bytes) -> None:
    """Kafka's exception mapper has no case for Jackson's parse/mapping errors: 500."""
    resp = client.post("/connectors", content=body, headers={"content-type": "application/json"})
    assert_error(resp, 500)
    assert resp.json()["message"]
    assert client.get("/connectors").json() == []


def test_non_json_content_type_is_415(client: TestClient) -> None:
    resp = client.post("/connectors", content=b"name=x", headers={
        "content-type": "application/x-www-form-urlencoded"})
    assert_error(resp, 415, "Unsupported Media Type")


def test_unknown_connector_is_404_everywhere(client: TestClient) -> None:
    for method, path in [("GET", "/connectors/nope"), ("DELETE", "/connectors/nope"),
                         ("GET", "/connectors/nope/config"), ("GET", "/connectors/nope/status"),
                         ("GET", "/connectors/nope/tasks"), ("GET", "/connectors/nope/tasks/0/status"),
                         ("POST", "/connectors/nope/tasks/0/restart"),
                         ("POST", "/connectors/nope/restart"), ("PUT", "/connectors/nope/pause"),
                         ("PUT", "/connectors/nope/resume"), ("PUT", "/connectors/nope/stop"),
                         ("GET", "/connectors/nope/offsets"), ("DELETE", "/connectors/nope/offsets"),
                         ("GET", "/connectors/nope/topics"), ("PUT", "/connectors/nope/topics/reset")]:
        assert_error(client.request(method, path), 404, "Connector nope not found")
    assert_error(client.patch("/connectors/nope/config", json={"a": "b"}), 404, "not found")


def test_unknown_routes_and_methods(client: TestClient) -> None:
    assert_error(client.get("/nothing-here"), 404, "HTTP 404 Not Found")
    assert_error(client.get("/connectors/x/tasks/abc/status"), 404)
    assert_error(client.post("/connectors/x/config"), 405, "HTTP 405 Method Not Allowed")


def test_delete_is_204(client: TestClient) -> None:
    create(client)
    resp = client.delete("/connectors/src")
    assert resp.status_code == 204 and resp.content == b""
    assert client.get("/connectors").json() == []


# ---- config --------------------------------------------------------------------------------
def test_config_get_put_patch(client: TestClient, herder: MemoryHerder) -> None:
    resp = client.put("/connectors/c/config", json=source_config())
    assert resp.status_code == 201
    assert resp.json()["name"] == "c" and resp.json()["config"]["name"] == "c"
    resp = client.put("/connectors/c/config", json=source_config(topic="t2"))
    assert resp.status_code == 200
    assert resp.json()["config"]["topic"] == "t2"
    assert client.get("/connectors/c/config").json() == {**source_config(topic="t2"), "name": "c"}

    resp = client.patch("/connectors/c/config", json={"batch.size": "7", "tasks.max": None})
    assert resp.status_code == 200
    config = resp.json()["config"]
    assert config["batch.size"] == "7" and "tasks.max" not in config
    assert herder.conns["c"].config == config

    assert_error(client.put("/connectors/c/config", json=source_config(name="d")), 400, "doesn't match")
    assert_error(client.put("/connectors/c/config", json=source_config(**{"batch.size": "0"})), 400,
                 "batch.size")


# ---- status and tasks ----------------------------------------------------------------------
def test_status_tasks_and_task_status(client: TestClient, herder: MemoryHerder) -> None:
    create(client)
    herder.conns["src"].failed_tasks.add(1)
    status = client.get("/connectors/src/status").json()
    assert status == {"name": "src", "connector": {"state": "RUNNING", "worker_id": herder.worker_id},
                      "tasks": [{"id": 0, "state": "RUNNING", "worker_id": herder.worker_id},
                                {"id": 1, "state": "FAILED", "worker_id": herder.worker_id,
                                 "trace": "Traceback: boom"}],
                      "type": "source"}
    tasks = client.get("/connectors/src/tasks").json()
    assert tasks == [{"id": {"connector": "src", "task": 0}, "config": {"task.index": "0"}},
                     {"id": {"connector": "src", "task": 1}, "config": {"task.index": "1"}}]
    assert client.get("/connectors/src/tasks/0/status").json() == {
        "id": 0, "state": "RUNNING", "worker_id": herder.worker_id}
    assert_error(client.get("/connectors/src/tasks/9/status"), 404)


# ---- life cycle ----------------------------------------------------------------------------
def test_restart_variants(client: TestClient, herder: MemoryHerder) -> None:
    create(client)
    herder.conns["src"].failed_tasks.add(1)
    resp = client.post("/connectors/src/restart")
    assert resp.status_code == 204 and resp.content == b""
    assert herder.restarts == ["src"]
    resp = client.post("/connectors/src/restart?includeTasks=false&onlyFailed=false")
    assert resp.status_code == 204

    resp = client.post("/connectors/src/restart?includeTasks=true")
    assert resp.status_code == 202
    body = resp.json()
    assert body["connector"]["state"] == "RESTARTING"
    assert [t["state"] for t in body["tasks"]] == ["RESTARTING", "RESTARTING"]
    assert herder.restarts[-1] == RestartRequest("src", only_failed=False, include_tasks=True)

    resp = client.post("/connectors/src/restart?includeTasks=TRUE&onlyFailed=true")
    assert resp.status_code == 202
    assert [t["state"] for t in resp.json()["tasks"]] == ["RUNNING", "RESTARTING"]
    assert herder.restarts[-1] == RestartRequest("src", only_failed=True, include_tasks=True)

    resp = client.post("/connectors/src/tasks/1/restart")
    assert resp.status_code == 204 and resp.content == b""


def test_pause_resume_stop(client: TestClient, herder: MemoryHerder) -> None:
    create(client)
    resp = client.put("/connectors/src/pause")
    assert resp.status_code == 202 and resp.content == b""
    assert client.get("/connectors/src/status").json()["connector"]["state"] == "PAUSED"
    assert client.put("/connectors/src/resume").status_code == 202
    assert herder.conns["src"].target is TargetState.STARTED
    resp = client.put("/connectors/src/stop")
    assert resp.status_code == 204 and resp.content == b""
    assert client.get("/connectors/src/status").json()["connector"]["state"] == "STOPPED"


# ---- offsets -------------------------------------------------------------------------------
def test_offsets_get_alter_reset(client: TestClient, herder: MemoryHerder) -> None:
    create(client)
    assert client.get("/connectors/src/offsets").json() == {"offsets": []}
    offsets = {"offsets": [{"partition": {"filename": "/tmp/a"}, "offset": {"position": 42}}]}
    assert_error(client.patch("/connectors/src/offsets", json=offsets), 400, "STOPPED")
    client.put("/connectors/src/stop")
    resp = client.patch("/connectors/src/offsets", json=offsets)
    assert resp.status_code == 200
    assert resp.json() == {"message": "The offsets for this connector have been altered successfully"}
    assert client.get("/connectors/src/offsets").json() == offsets

    assert_error(client.patch("/connectors/src/offsets", json={"offsets": []}), 400,
                 "Partitions / offsets need to be provided")
    assert_error(client.patch("/connectors/src/offsets", json={}), 400, "Partitions / offsets")
    assert_error(client.patch("/connectors/src/offsets", json={"offsets": [{"partition": 1}]}), 500)

    resp = client.delete("/connectors/src/offsets")
    assert resp.status_code == 200
    assert resp.json() == {"message": "The offsets for this connector have been reset successfully"}
    assert client.get("/connectors/src/offsets").json() == {"offsets": []}


# ---- topics --------------------------------------------------------------------------------
def test_active_topics(client: TestClient, herder: MemoryHerder) -> None:
    create(client)
    herder.conns["src"].topics = ["t1", "t2"]
    assert client.get("/connectors/src/topics").json() == {"src": {"topics": ["t1", "t2"]}}
    resp = client.put("/connectors/src/topics/reset")
    assert resp.status_code == 202 and resp.content == b""
    assert client.get("/connectors/src/topics").json() == {"src": {"topics": []}}


def test_topic_tracking_disabled_is_403(herder: MemoryHerder) -> None:
    with TestClient(ConnectRestApp(herder, topic_tracking=False).app) as c:
        assert_error(c.get("/connectors/x/topics"), 403, "Topic tracking is disabled.")
        assert_error(c.put("/connectors/x/topics/reset"), 403, "Topic tracking is disabled.")
    with TestClient(ConnectRestApp(herder, topic_tracking_reset=False).app) as c:
        assert_error(c.put("/connectors/x/topics/reset"), 403, "Topic tracking reset is disabled.")


# ---- plugins -------------------------------------------------------------------------------
def test_connector_plugins_listing(client: TestClient) -> None:
    only = client.get("/connector-plugins").json()
    mine = [p for p in only if p["class"].startswith("resttestplugins.")]
    assert mine == [{"class": SINK, "type": "sink", "version": mine[0]["version"]},
                    {"class": SOURCE, "type": "source", "version": "1.2.3"}]
    assert all(p["type"] in ("sink", "source") for p in only)
    assert [p["type"] for p in only] == sorted((p["type"] for p in only), key=["sink", "source"].index)

    everything = client.get("/connector-plugins?connectorsOnly=false").json()
    kinds = {p["class"]: p["type"] for p in everything}
    assert kinds["resttestplugins.RestTestConverter"] == "converter"
    assert kinds["resttestplugins.RestTestTransform"] == "transformation"
    order = ["sink", "source", "transformation", "predicate", "converter", "header_converter"]
    assert [p["type"] for p in everything] == sorted((p["type"] for p in everything), key=order.index)
    assert all(set(p) == {"class", "type", "version"} for p in everything)


def test_plugin_config_definitions(client: TestClient) -> None:
    resp = client.get("/connector-plugins/RestTestSource/config")
    assert resp.status_code == 200
    keys = resp.json()
    names = [k["name"] for k in keys]
    assert names[:2] == ["topic", "batch.size"]  # the plugin's own keys first
    assert {"name", "connector.class", "tasks.max", "transforms"} <= set(names[2:])  # then the base's
    assert len(names) == len(set(names))
    topic = keys[0]
    assert topic == {"name": "topic", "type": "STRING", "required": True, "default_value": None,
                     "importance": "HIGH", "documentation": "The topic to write to", "group": "Source",
                     "width": "NONE", "display_name": "topic", "dependents": [], "order": -1}
    assert keys[1]["default_value"] == "100" and keys[1]["required"] is False
    assert_error(client.get("/connector-plugins/NoSuchThing/config"), 404, "Unknown plugin NoSuchThing.")
    sink = [k["name"] for k in client.get("/connector-plugins/RestTestSink/config").json()]
    assert sink[0] == "file" and {"topics", "topics.regex"} <= set(sink)
    converter = client.get("/connector-plugins/resttestplugins.RestTestConverter/config").json()
    assert converter == []  # a converter has only its own keys


def test_validate(client: TestClient) -> None:
    resp = client.put("/connector-plugins/RestTestSourceConnector/config/validate",
                      json={"connector.class": SOURCE, "batch.size": "0"})
    assert resp.status_code == 200
    body = resp.json()
    assert body["name"] == SOURCE and body["error_count"] == 2
    assert body["groups"] == ["Source"]
    by_name = {c["definition"]["name"]: c["value"] for c in body["configs"]}
    assert by_name["topic"]["errors"] and by_name["batch.size"]["value"] == "0"
    assert set(by_name["batch.size"]) == {"name", "value", "recommended_values", "errors", "visible"}

    ok = client.put("/connector-plugins/RestTestSource/config/validate",
                    json={"connector.class": SOURCE, "topic": "t"}).json()
    assert ok["error_count"] == 0

    resp = client.put("/connector-plugins/RestTestSinkConnector/config/validate",
                      json={"connector.class": SOURCE})
    assert_error(resp, 400, f"Included connector type {SOURCE} does not match request type "
                            f"RestTestSinkConnector")


# ---- loggers -------------------------------------------------------------------------------
def test_admin_loggers(herder: MemoryHerder) -> None:
    now = [1000.0]
    app = ConnectRestApp(herder, loggers=Loggers(clock=lambda: now[0]))
    parent = logging.getLogger("samsa.resttest")
    child = logging.getLogger("samsa.resttest.child")
    parent.setLevel(logging.INFO)
    child.setLevel(logging.NOTSET)
    try:
        with TestClient(app.app) as c:
            assert c.get("/admin/loggers/samsa.resttest").json() == {"level": "INFO",
                                                                     "last_modified": None}
            listing = c.get("/admin/loggers").json()
            assert listing["samsa.resttest.child"] == {"level": "INFO", "last_modified": None}
            assert "root" in listing
            assert_error(c.get("/admin/loggers/samsa.resttest.nope"), 404,
                         "Logger samsa.resttest.nope not found.")

            resp = c.put("/admin/loggers/samsa.resttest", json={"level": "debug"})
            assert resp.status_code == 200
            assert resp.json() == ["samsa.resttest", "samsa.resttest.child"]
            assert child.getEffectiveLevel() == logging.DEBUG
            assert c.get("/admin/loggers/samsa.resttest.child").json() == {
                "level": "DEBUG", "last_modified": 1_000_000}
            now[0] = 2000.0
            assert c.put("/admin/loggers/samsa.resttest", json={"level": "DEBUG"}).json() == []
            assert c.put("/admin/loggers/samsa.resttest.child", json={"level": "WARN"}).json() == [
                "samsa.resttest.child"]
            assert c.get("/admin/loggers/samsa.resttest.child").json() == {
                "level": "WARN", "last_modified": 2_000_000}

            assert_error(c.put("/admin/loggers/samsa.resttest", json={"level": "LOUD"}), 404,
                         "invalid log level 'LOUD'.")
            assert_error(c.put("/admin/loggers/samsa.resttest", json={}), 400,
                         "Desired 'level' parameter was not specified in request.")
            resp = c.put("/admin/loggers/samsa.resttest?scope=cluster", json={"level": "ERROR"})
            assert resp.status_code == 204
            assert parent.getEffectiveLevel() == logging.ERROR
    finally:
        parent.setLevel(logging.NOTSET)
        child.setLevel(logging.NOTSET)


# ---- forwarding ----------------------------------------------------------------------------
def test_not_leader_forwards_to_the_leader(plugin_dir: Path) -> None:
    plugins = make_plugins(plugin_dir)
    leader, follower = MemoryHerder(plugins, "leader:1"), MemoryHerder(plugins, "follower:2")
    leader_app, follower_app = ConnectRestApp(leader), ConnectRestApp(follower)
    with serving(leader_app, follower_app) as (leader_srv, follower_srv):
        follower.not_leader = leader_srv.url
        with httpx.Client(base_url=follower_srv.url, timeout=10) as http:
            resp = http.post("/connectors", json={"name": "f", "config": source_config()})
            assert resp.status_code == 201, resp.text
            assert resp.json()["name"] == "f"
            assert resp.headers["location"] == "/connectors/f"
            assert "f" in leader.conns and "f" not in follower.conns
            resp = http.post("/connectors/f/restart", params={"includeTasks": "true"})
            assert resp.status_code == 202
            assert leader.restarts[-1] == RestartRequest("f", only_failed=False, include_tasks=True)
            assert_error(http.post("/connectors", json={"name": "f", "config": source_config()}), 409,
                         "already exists")  # the leader's error comes back as it was
            assert http.delete("/connectors/f").status_code == 204
            assert leader.conns == {}

            # a request that already made its second hop is not forwarded again
            assert_error(http.delete("/connectors/f", params={"forward": "false"}), 409,
                         "conflicting operation")
            follower.not_leader = None  # no leader known (a rebalance is under way)
            assert_error(http.delete("/connectors/f"), 409, "no known leader URL")


def test_forward_chain_stops_after_two_hops(plugin_dir: Path) -> None:
    """A -> B (forward=true) -> C (forward=false) -> C is not the leader either: 409."""
    plugins = make_plugins(plugin_dir)
    herders = [MemoryHerder(plugins, f"w{i}") for i in range(3)]
    apps = [ConnectRestApp(h) for h in herders]
    with serving(*apps) as servers:
        herders[0].not_leader = servers[1].url
        herders[1].not_leader = servers[2].url
        herders[2].not_leader = servers[0].url
        with httpx.Client(base_url=servers[0].url, timeout=10) as http:
            resp = http.post("/connectors", json={"name": "f", "config": source_config()})
            assert_error(resp, 409, "conflicting operation")
        herders[2].not_leader = MemoryHerder._NOT_SET  # C is the leader: two hops reach it
        with httpx.Client(base_url=servers[0].url, timeout=10) as http:
            assert http.post("/connectors", json={"name": "f", "config": source_config()}).status_code == 201
        assert "f" in herders[2].conns


def test_forward_to_unreachable_leader_is_500(plugin_dir: Path) -> None:
    follower = MemoryHerder(make_plugins(plugin_dir))
    follower.not_leader = "http://127.0.0.1:1"
    with TestClient(ConnectRestApp(follower).app) as c:
        assert_error(c.delete("/connectors/x"), 500, "IO Error trying to forward REST request")


def test_request_timeout_is_500(herder: MemoryHerder) -> None:
    import threading

    release = threading.Event()
    herder.connectors = lambda: (release.wait(5), [])[1]  # type: ignore[method-assign]
    try:
        with TestClient(ConnectRestApp(herder, request_timeout_s=0.2).app) as c:
            assert_error(c.get("/connectors"), 500, "Request timed out")
    finally:
        release.set()




def test_herder_provider_answers_503_until_the_herder_exists(herder: MemoryHerder) -> None:
    holder: dict[str, MemoryHerder] = {}
    with TestClient(create_app(lambda: holder["herder"])) as c:
        assert_error(c.get("/connectors"), 503, "starting up")
        assert c.get("/admin/loggers").status_code == 200  # the worker's logging needs no herder
        holder["herder"] = herder
        assert c.get("/connectors").json() == []


def test_topic_tracking_flags_come_from_the_worker_config(herder: MemoryHerder) -> None:
    class Config:
        values = {"topic.tracking.enable": "true", "topic.tracking.allow.reset": "false"}

        def get(self, name: str) -> str:
            return self.values[name]

    herder.config = Config()  # type: ignore[attr-defined]
    create_client = TestClient(create_app(herder))
    with create_client as c:
        c.post("/connectors", json={"name": "t", "config": source_config()})
        assert c.get("/connectors/t/topics").status_code == 200
        assert_error(c.put("/connectors/t/topics/reset"), 403, "Topic tracking reset is disabled.")
        Config.values["topic.tracking.enable"] = "false"
        assert_error(c.get("/connectors/t/topics"), 403, "Topic tracking is disabled.")


def test_health(herder: MemoryHerder) -> None:
    holder: dict[str, MemoryHerder] = {}
    with TestClient(create_app(lambda: holder["herder"])) as c:
        resp = c.get("/health")
        assert resp.status_code == 503
        assert resp.json() == {"status": "starting", "message": "Worker is still starting up."}
        holder["herder"] = herder
        resp = c.get("/health")
        assert resp.status_code == 200
        assert resp.json() == {"status": "healthy",
                               "message": "Worker has completed startup and is ready to handle requests."}

        def broken() -> list[str]:
            raise RuntimeError("herder thread is gone")

        herder.connectors = broken  # type: ignore[method-assign]
        resp = c.get("/health")
        assert resp.status_code == 500
        assert resp.json()["status"] == "unhealthy"
        assert resp.json()["message"].endswith("herder thread is gone")


def test_cors_when_allow_origin_is_set(herder: MemoryHerder) -> None:
    with TestClient(create_app(herder)) as c:
        assert "access-control-allow-origin" not in c.get("/", headers={"origin": "http://ui"}).headers
    with TestClient(create_app(herder, allow_origin="http://ui")) as c:
        resp = c.get("/connectors", headers={"origin": "http://ui"})
        assert resp.headers["access-control-allow-origin"] == "http://ui"
        pre = c.options("/connectors", headers={"origin": "http://ui",
                                                "access-control-request-method": "POST"})
        assert pre.status_code == 200 and "POST" in pre.headers["access-control-allow-methods"]
        pre = c.options("/connectors", headers={"origin": "http://ui",
                                                "access-control-request-method": "DELETE"})
        assert pre.status_code == 400  # not among the allowed methods


BAD_BODIES = [b"\xff\xfe", b"{", b"null", b"1", b'"text"', b"[]", b"[{}]", b'{"a": [1, {"b": null}]}',
              b"[" * 100_000 + b"]" * 100_000, b'{"offsets": "x"}', b'{"level": 5}',
              b'{"name": {"x": 1}, "config": {}}', b'{"name": "n", "config": {"connector.class": 7}}']
ROUTES = [("GET", "/"), ("GET", "/connectors"), ("POST", "/connectors"), ("GET", "/connectors/c"),
          ("DELETE", "/connectors/c"), ("GET", "/connectors/c/config"), ("PUT", "/connectors/c/config"),
          ("PATCH", "/connectors/c/config"), ("GET", "/connectors/c/status"),
          ("POST", "/connectors/c/restart"), ("PUT", "/connectors/c/pause"),
          ("PUT", "/connectors/c/resume"), ("PUT", "/connectors/c/stop"),
          ("GET", "/connectors/c/tasks"), ("GET", "/connectors/c/tasks/0/status"),
          ("POST", "/connectors/c/tasks/0/restart"), ("GET", "/connectors/c/offsets"),
          ("PATCH", "/connectors/c/offsets"), ("DELETE", "/connectors/c/offsets"),
          ("GET", "/connectors/c/topics"), ("PUT", "/connectors/c/topics/reset"),
          ("GET", "/connector-plugins"), ("GET", "/connector-plugins/RestTestSource/config"),
          ("PUT", "/connector-plugins/RestTestSource/config/validate"), ("GET", "/admin/loggers"),
          ("GET", "/admin/loggers/root"), ("PUT", "/admin/loggers/samsa.resttest.bad")]


def test_bad_bodies_get_connect_error_bodies_on_every_route(client: TestClient,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    """Garbage, wrong shapes and absurd nesting: every answer is a success or Connect's error body
    whose error_code is the status, never a crash or a non-JSON 500."""
    create(client, "c")
    client.put("/connectors/c/stop")
    for method, path in ROUTES:
        for body in BAD_BODIES:
            resp = client.request(method, path, content=body, headers={"content-type": "application/json"})
            if resp.status_code < 300:
                continue
            assert resp.headers["content-type"].startswith("application/json"), (method, path, body[:20])
            err = resp.json()
            assert set(err) == {"error_code", "message"} and err["error_code"] == resp.status_code
    assert client.get("/").status_code == 200  # the worker still serves
    assert not [r for r in caplog.records if r.name == "samsa.connect.rest" and r.exc_info], \
        "a bad body is the client's error: no uncaught-exception trace in the worker's log"
    logging.getLogger("samsa.resttest.bad").setLevel(logging.NOTSET)


def test_internal_task_configs_post(client: TestClient, herder: MemoryHerder) -> None:
    """POST /connectors/{name}/tasks (distributed mode's worker -> leader hand-off)."""
    assert_error(client.post("/connectors/c/tasks", json=[{"a": "1"}]), 404, "standalone")
    got: list[tuple[str, list[dict[str, str]]]] = []
    herder.put_task_configs = lambda name, configs: got.append((name, configs))  # type: ignore[attr-defined]
    resp = client.post("/connectors/c/tasks", json=[{"a": 1}, {"b": "x"}])
    assert resp.status_code == 204
    assert got == [("c", [{"a": "1"}, {"b": "x"}])]
    assert_error(client.post("/connectors/c/tasks", json={"a": "1"}), 400)
