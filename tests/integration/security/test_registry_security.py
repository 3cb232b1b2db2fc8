"""Schema registry security, Confluent's way: HTTP basic auth with roles (a Jetty users file found
through a JAAS file's realm entry), an HTTPS listener with PEM stores, and the registry's own
`_schemas` store over SASL_SSL (kafkastore.*). Driven with confluent-kafka's SchemaRegistryClient,
raw httpx, the `samsa schemas` CLI, the Connect Avro converter and the Spark decode helpers."""

from __future__ import annotations

import base64
import hashlib
import json
import random
import ssl
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import trustme
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from samsa.testing import SamsaBroker, free_port
from samsa.testing.registry import InProcessRegistry, SamsaRegistry, registry_tls_props, wait_http
from samsa.testing.tls import TlsFiles
from tests.sasl_util import plain_jaas

pytestmark = pytest.mark.timeout(180)

REALM = "SchemaRegistry-Props"
PASSWORDS = {"admin": "admin-pw", "writer": "writer-pw", "reader": "reader-pw",
             "guest": "guest-pw", "hashed": "hashed-pw"}
AVRO = json.dumps({"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]})
AVRO2 = json.dumps({"type": "record", "name": "Order", "fields": [
    {"name": "id", "type": "long"}, {"name": "note", "type": ["null", "string"], "default": None}]})


@dataclass
class Env:
    url: str
    tls: TlsFiles
    plain_bs: str
    sasl_bs: str
    store_props: dict[str, str]
    auth_props: dict[str, str]


def write_users(d: Path) -> tuple[Path, Path]:
    """A Jetty users file (one MD5 password) and a JAAS file whose realm entry names it."""
    md5 = hashlib.md5(PASSWORDS["hashed"].encode()).hexdigest()
    users = d / "password-file"
    users.write_text("# name: password,roles\n"
                     f"admin: {PASSWORDS['admin']},admin\n"
                     f"writer: {PASSWORDS['writer']},read-write\n"
                     f"reader: {PASSWORDS['reader']},read-only\n"
                     f"guest: {PASSWORDS['guest']},guest\n"
                     f"hashed: MD5:{md5},read-only,guest\n")
    jaas = d / "jaas.conf"
    jaas.write_text(f'{REALM} {{\n  org.eclipse.jetty.jaas.spi.PropertyFileLoginModule required\n'
                    f'  file="{users}"\n  debug="false";\n}};\n')
    return users, jaas


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    d = tmp_path_factory.mktemp("registry-sec")
    tls = TlsFiles.create(d / "tls", clients=("alice",))
    plain, sasl = free_port(), free_port()
    overrides = {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_SSL://127.0.0.1:{sasl}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_SSL://127.0.0.1:{sasl}",
        **tls.broker_ssl("none", prefix="listener.name.sasl_ssl."),
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": plain_jaas({"registry": "store-pw"}),
    }
    _, jaas = write_users(d)
    store = {"kafkastore.bootstrap.servers": f"SASL_SSL://127.0.0.1:{sasl}",
             "kafkastore.security.protocol": "SASL_SSL",
             "kafkastore.sasl.mechanism": "PLAIN",
             "kafkastore.sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule '
                                            'required username="registry" password="store-pw";',
             "kafkastore.ssl.truststore.type": "PEM",
             "kafkastore.ssl.truststore.location": str(tls.ca_file)}
    auth = {"authentication.method": "BASIC", "authentication.realm": REALM,
            "authentication.roles": "admin,read-write,read-only",
            "java.security.auth.login.config": str(jaas)}
    with SamsaBroker(port=plain, overrides=overrides) as b:
        # the registry reaches the cluster through the SASL_SSL listener only
        with SamsaRegistry(f"127.0.0.1:{sasl}", https=True,
                           props={**store, **auth, **registry_tls_props(tls)}) as reg:
            yield Env(reg.url, tls, b.bootstrap, f"127.0.0.1:{sasl}", store, auth)


def client(env: Env, user: str | None) -> SchemaRegistryClient:
    conf: dict[str, Any] = {"url": env.url, "ssl.ca.location": str(env.tls.ca_file)}
    if user is not None:
        conf["basic.auth.user.info"] = f"{user}:{PASSWORDS[user]}"
    return SchemaRegistryClient(conf)


def raw(env: Env, method: str, path: str, auth: tuple[str, str] | None = None,
        **kw: Any) -> httpx.Response:
    with httpx.Client(verify=ssl.create_default_context(cafile=str(env.tls.ca_file)),
                      timeout=30) as c:
        return c.request(method, env.url + path, auth=auth, **kw)


def status(e: pytest.ExceptionInfo[SchemaRegistryError]) -> tuple[int, int]:
    return e.value.http_status_code, e.value.error_code


def test_roles_with_confluent_client(env: Env) -> None:
    subject = f"orders-{uuid.uuid4().hex[:6]}-value"
    sid = client(env, "writer").register_schema(subject, Schema(AVRO, "AVRO"))
    reader = client(env, "reader")
    assert json.loads(reader.get_schema(sid).schema_str)["name"] == "Order"
    assert reader.get_latest_version(subject).schema_id == sid
    assert reader.lookup_schema(subject, Schema(AVRO, "AVRO")).schema_id == sid  # a POST that reads
    assert reader.test_compatibility(subject, Schema(AVRO2, "AVRO")) is True
    with pytest.raises(SchemaRegistryError) as e:
        reader.register_schema(subject, Schema(AVRO2, "AVRO"))
    assert status(e) == (403, 40301) and "Write on Subject" in e.value.error_message
    with pytest.raises(SchemaRegistryError) as e:
        reader.delete_subject(subject)
    assert status(e) == (403, 40301)
    writer = client(env, "writer")
    assert writer.set_compatibility(subject, "FULL")["compatibility"] == "FULL"
    with pytest.raises(SchemaRegistryError) as e:  # the global level is the admin's
        writer.set_compatibility(level="NONE")
    assert status(e) == (403, 40301) and "Global" in e.value.error_message
    admin = client(env, "admin")
    assert admin.set_compatibility(level="BACKWARD")["compatibility"] == "BACKWARD"
    assert writer.delete_subject(subject) == [1]
    with pytest.raises(SchemaRegistryError) as e:
        client(env, None).get_subjects()
    assert status(e) == (401, 401)


def test_raw_http_answers(env: Env) -> None:
    none = raw(env, "GET", "/subjects")
    assert none.status_code == 401
    assert none.json() == {"error_code": 401, "message": "Unauthorized"}
    assert none.headers["www-authenticate"] == f'Basic realm="{REALM}"'
    assert raw(env, "GET", "/subjects", ("reader", "wrong")).status_code == 401
    assert raw(env, "GET", "/subjects", ("nobody", "x")).status_code == 401
    bad = raw(env, "GET", "/subjects", headers={"Authorization": "Basic !!notbase64"})
    assert bad.status_code == 401
    rng = random.Random(17)
    garbage = ["Basic", "basic " + base64.b64encode(b"reader").decode(),
               "Basic " + base64.b64encode(b"\xff\xfe:\x00").decode(), "Digest x", "B" * 4000,
               "Basic " + base64.b64encode(b":").decode(), "Basic " + "=" * 100]
    garbage += ["Basic " + base64.b64encode(rng.randbytes(rng.randrange(1, 300))).decode()
                for _ in range(20)]
    for value in garbage:  # never a 500, never served
        assert raw(env, "GET", "/subjects", headers={"Authorization": value}).status_code == 401
    # a role that authentication.roles does not list: authenticated, but forbidden
    guest = raw(env, "GET", "/subjects", ("guest", PASSWORDS["guest"]))
    assert guest.status_code == 403 and guest.json()["error_code"] == 403
    # an MD5: password in the users file; its read-only role is allowed, guest is not
    assert raw(env, "GET", "/subjects", ("hashed", PASSWORDS["hashed"])).status_code == 200
    assert raw(env, "PUT", "/mode", ("writer", PASSWORDS["writer"]),
               json={"mode": "READONLY"}).json()["error_code"] == 40301
    assert raw(env, "GET", "/mode", ("reader", PASSWORDS["reader"])).json() == {"mode": "READWRITE"}


def test_tls_negative(env: Env, tmp_path: Path) -> None:
    port = env.url.rsplit(":", 1)[1]
    with pytest.raises(httpx.HTTPError):  # plain HTTP to the HTTPS port
        httpx.get(f"http://127.0.0.1:{port}/subjects", timeout=10)
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        httpx.get(env.url + "/subjects", timeout=10)  # the system's CAs do not know ours
    other = tmp_path / "other-ca.pem"
    trustme.CA().cert_pem.write_to_path(str(other))
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        httpx.get(env.url + "/subjects", verify=ssl.create_default_context(cafile=str(other)),
                  timeout=10)
    with pytest.raises(Exception, match="CERTIFICATE_VERIFY_FAILED"):  # its httpx's ConnectError
        SchemaRegistryClient({"url": env.url, "ssl.ca.location": str(other),
                              "basic.auth.user.info": f"reader:{PASSWORDS['reader']}",
                              "max.retries": 0}).get_subjects()
    # the registry still serves after all that
    assert raw(env, "GET", "/subjects", ("reader", PASSWORDS["reader"])).status_code == 200


def test_client_certificates_required(env: Env, tmp_path: Path) -> None:
    props = {**registry_tls_props(env.tls, "REQUIRED"), **env.store_props}
    with InProcessRegistry(env.sasl_bs, https=True, props=props) as r:
        with pytest.raises(httpx.HTTPError):
            httpx.get(r.url + "/subjects", verify=ssl.create_default_context(
                cafile=str(env.tls.ca_file)), timeout=10).raise_for_status()
        crt, key = env.tls.clients["alice"]
        ok = SchemaRegistryClient({"url": r.url, "ssl.ca.location": str(env.tls.ca_file),
                                   "ssl.certificate.location": str(crt),
                                   "ssl.key.location": str(key)})
        assert isinstance(ok.get_subjects(), list)
        # a follower forwarding to this leader shows its own key store (PEM: key + chain)
        keystore = tmp_path / "follower.pem"
        keystore.write_bytes(key.read_bytes() + crt.read_bytes())
        fprops = {**env.store_props, "ssl.truststore.location": str(env.tls.ca_file),
                  "ssl.keystore.location": str(keystore)}
        with InProcessRegistry(env.sasl_bs, leader_url=r.url, props=fprops) as f:
            sid = SchemaRegistryClient({"url": f.url}).register_schema(
                f"mtls-{uuid.uuid4().hex[:6]}", Schema(AVRO, "AVRO"))
            assert ok.get_schema(sid).schema_type == "AVRO"


def test_follower_forwards_credentials(env: Env) -> None:
    """A follower authenticates the caller, then forwards the write with the caller's header
    to the HTTPS leader (trusting it through its own ssl.truststore.*)."""
    props = {**env.auth_props, **env.store_props, "ssl.truststore.location": str(env.tls.ca_file)}
    with InProcessRegistry(env.sasl_bs, leader_url=env.url, props=props) as f:
        subject = f"fwd-{uuid.uuid4().hex[:6]}"
        writer = SchemaRegistryClient({"url": f.url, "basic.auth.user.info":
                                       f"writer:{PASSWORDS['writer']}"})
        sid = writer.register_schema(subject, Schema(AVRO, "AVRO"))
        assert client(env, "reader").get_latest_version(subject).schema_id == sid
        reader = SchemaRegistryClient({"url": f.url, "basic.auth.user.info":
                                       f"reader:{PASSWORDS['reader']}"})
        with pytest.raises(SchemaRegistryError) as e:
            reader.register_schema(subject, Schema(AVRO2, "AVRO"))
        assert status(e) == (403, 40301)


def test_store_with_wrong_sasl_password_does_not_start(env: Env) -> None:
    props = {**env.store_props, "kafkastore.timeout.ms": "4000",
             "kafkastore.sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule '
                                            'required username="registry" password="wrong";'}
    r = SamsaRegistry(env.sasl_bs, props=props, startup_timeout=40)
    try:
        with pytest.raises(RuntimeError, match="exited with 1"):
            r.start()
    finally:
        r.close()


def test_schemas_cli(env: Env, tmp_path: Path) -> None:
    avsc = tmp_path / "order.avsc"
    avsc.write_text(AVRO)
    subject = f"cli-{uuid.uuid4().hex[:6]}-value"
    conf = tmp_path / "registry-client.properties"
    conf.write_text(f"schema.registry.url={env.url}\nbasic.auth.credentials.source=USER_INFO\n"
                    f"basic.auth.user.info=writer:{PASSWORDS['writer']}\n"
                    f"schema.registry.ssl.truststore.location={env.tls.ca_file}\n")

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "samsa.cli.main", "schemas", *args],
                              capture_output=True, text=True, timeout=60)
    ok = cli("--command-config", str(conf), "register", subject, str(avsc))
    assert ok.returncode == 0 and ok.stdout.strip().isdigit(), ok.stderr
    trust = f"schema.registry.ssl.truststore.location={env.tls.ca_file}"
    as_reader = ("--registry-url", env.url, "--property", trust, "--property",
                 "basic.auth.credentials.source=USER_INFO", "--property",
                 f"basic.auth.user.info=reader:{PASSWORDS['reader']}")
    ro = cli(*as_reader, "register", subject, str(avsc))
    assert ro.returncode == 1 and "error 40301" in ro.stderr
    assert cli(*as_reader, "list").stdout.split().count(subject) == 1
    # credentials in the URL (basic.auth.credentials.source=URL, the default)
    url = env.url.replace("https://", f"https://reader:{PASSWORDS['reader']}@")
    assert cli("--registry-url", url, "--property", trust, "list", subject).stdout.split() == ["1"]
    anon = cli("--registry-url", env.url, "--property", trust, "list")
    assert anon.returncode == 1 and "Unauthorized (error 401)" in anon.stderr
    untrusted = cli("--registry-url", env.url, "list")
    assert untrusted.returncode == 1 and "CERTIFICATE_VERIFY_FAILED" in untrusted.stderr


def test_connect_avro_converter(env: Env) -> None:
    from samsa.connect.converters.avro import AvroConverter
    from samsa.connect.data import INT64_SCHEMA, Struct, struct_schema
    from samsa.connect.errors import DataException

    schema = struct_schema([("id", INT64_SCHEMA)], name="Order")
    topic = f"conv-{uuid.uuid4().hex[:6]}"
    base = {"schema.registry.url": env.url, "basic.auth.credentials.source": "USER_INFO",
            "schema.registry.ssl.truststore.location": str(env.tls.ca_file)}
    conv = AvroConverter()
    conv.configure({**base, "basic.auth.user.info": f"writer:{PASSWORDS['writer']}"}, False)
    data = conv.from_connect_data(topic, schema, Struct(schema).put("id", 7))
    assert data is not None and data[0] == 0
    ro = AvroConverter()
    ro.configure({**base, "basic.auth.user.info": f"reader:{PASSWORDS['reader']}"}, False)
    assert ro.to_connect_data(topic, data).value.get("id") == 7
    with pytest.raises(DataException, match="40301"):
        ro.from_connect_data(topic + "-other", schema, Struct(schema).put("id", 8))


def test_connector_takes_worker_registry_settings(env: Env) -> None:
    """A connector naming a registry converter without a URL takes the worker's URL and, with
    it, the worker's credentials and TLS settings for that converter."""
    from samsa.connect.data import INT64_SCHEMA, Struct, struct_schema
    from samsa.connect.plugins import Plugins
    from samsa.connect.runtime.worker_task import build_converters

    avro = "io.confluent.connect.avro.AvroConverter"
    string = "org.apache.kafka.connect.storage.StringConverter"
    worker = {"value.converter.schema.registry.url": env.url,
              "value.converter.basic.auth.credentials.source": "USER_INFO",
              "value.converter.basic.auth.user.info": f"writer:{PASSWORDS['writer']}",
              "value.converter.schema.registry.ssl.truststore.location": str(env.tls.ca_file)}
    defaults = {"key.converter": string, "value.converter": string,
                "header.converter": "org.apache.kafka.connect.storage.SimpleHeaderConverter"}
    conv = build_converters(Plugins(), {"value.converter": avro}, worker, defaults).value
    schema = struct_schema([("id", INT64_SCHEMA)], name="Order")
    data = conv.from_connect_data(f"wk-{uuid.uuid4().hex[:6]}", schema, Struct(schema).put("id", 1))
    assert data is not None and data[0] == 0


def test_pipeline_registry_props(env: Env, tmp_path: Path) -> None:
    """The pipeline's generator registers and serializes through a secured registry; its Spark
    driver and Connect sink get the same settings."""
    from samsa.pipeline import events
    from samsa.pipeline.connect import ConnectProcess
    from samsa.pipeline.driver import SparkDriver

    props = {"basic.auth.credentials.source": "USER_INFO",
             "basic.auth.user.info": f"writer:{PASSWORDS['writer']}",
             "schema.registry.ssl.truststore.location": str(env.tls.ca_file)}
    sid = events.register_schema(env.url, props)
    assert client(env, "reader").get_latest_version(events.SUBJECT).schema_id == sid
    events.ensure_topic(env.plain_bs)
    out = events.generate(env.plain_bs, env.url, 5, start_ms=0, span_ms=60_000, seed=1,
                          registry_props=props)
    assert out.count == 5
    driver = SparkDriver(env.plain_bs, env.url, "duckdb:x", tmp_path, registry_props=props)
    assert f"basic.auth.user.info=writer:{PASSWORDS['writer']}" in driver.argv
    ConnectProcess(env.plain_bs, env.url, tmp_path, free_port(), {}, registry_props=props)
    worker = (tmp_path / "connect-worker.properties").read_text()
    assert f"value.converter.schema.registry.ssl.truststore.location={env.tls.ca_file}" in worker


def test_spark_decode(env: Env, spark: Any) -> None:
    """from_avro with registry options: the planner's lookups and the Python workers' (which
    fetch the writer schema themselves) pass credentials and trust the registry's CA."""
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from samsa.spark.registry_decode import from_avro, latest_id, schema_by_id

    topic = f"spark-{uuid.uuid4().hex[:6]}"
    ser = AvroSerializer(client(env, "writer"), AVRO)
    framed = [ser({"id": i}, SerializationContext(topic, MessageField.VALUE)) for i in range(3)]
    subject = f"{topic}-value"
    sid = client(env, "reader").get_latest_version(subject).schema_id
    opts = {"basic.auth.credentials.source": "USER_INFO",
            "basic.auth.user.info": f"reader:{PASSWORDS['reader']}",
            "schema.registry.ssl.truststore.location": str(env.tls.ca_file)}
    assert latest_id(env.url, subject, opts) == sid
    assert json.loads(schema_by_id(env.url, sid, options=opts)["schema"])["name"] == "Order"
    df = spark.createDataFrame([(f,) for f in framed], "value binary")
    got = df.select(from_avro("value", env.url, schema_id=sid, options=opts).alias("o")).collect()
    assert [r.o.id for r in got] == [0, 1, 2]
    import urllib.error
    with pytest.raises(urllib.error.HTTPError) as e:
        latest_id(env.url, subject, {k: v for k, v in opts.items() if not k.startswith("basic")})
    assert e.value.code == 401


def test_embedded_registry_settings(env: Env, tmp_path: Path) -> None:
    """`samsa serve` passes schema.registry.<setting> to its embedded registry."""
    users, _ = write_users(tmp_path)
    port, http_port = free_port(), free_port()
    overrides = {"schema.registry.enable": "true",
                 "schema.registry.listeners": f"https://127.0.0.1:{port},http://127.0.0.1:{http_port}",
                 "schema.registry.authentication.method": "BASIC",
                 "schema.registry.authentication.roles": "admin,read-write,read-only",
                 "schema.registry.samsa.registry.users.file": str(users),
                 **{f"schema.registry.{k}": v for k, v in registry_tls_props(env.tls).items()}}
    with SamsaBroker(overrides=overrides) as b:
        url = f"https://127.0.0.1:{port}"
        wait_http(url, 30)
        line = f"schema registry listening on {url}, http://127.0.0.1:{http_port}"
        for _ in range(100):  # printed just after the listeners answer
            if line in b.log_text():
                break
            time.sleep(0.1)
        assert line in b.log_text()
        plain = httpx.get(f"http://127.0.0.1:{http_port}/subjects", timeout=10)
        assert plain.status_code == 401  # the http:// listener beside it, same users
        assert httpx.get(f"http://127.0.0.1:{http_port}/subjects", timeout=10, auth=(
            "reader", PASSWORDS["reader"])).status_code == 200
        conf = {"url": url, "ssl.ca.location": str(env.tls.ca_file)}
        writer = SchemaRegistryClient({**conf, "basic.auth.user.info": f"writer:{PASSWORDS['writer']}"})
        assert writer.register_schema("embedded-value", Schema(AVRO, "AVRO")) >= 1
        with pytest.raises(SchemaRegistryError) as e:
            SchemaRegistryClient(conf).get_subjects()
        assert status(e) == (401, 401)


def test_store_with_acls(env: Env) -> None:
    """With ACLs on, the registry's principal needs the ACLs docs/security.md lists; without
    them it does not start."""
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    plain, sasl = free_port(), free_port()
    overrides = {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_SSL://127.0.0.1:{sasl}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_SSL://127.0.0.1:{sasl}",
        **env.tls.broker_ssl("none", prefix="listener.name.sasl_ssl."),
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": plain_jaas({"registry": "store-pw"}),
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS",  # the test's own PLAINTEXT admin
    }
    props = {**env.store_props, "kafkastore.timeout.ms": "4000"}
    with SamsaBroker(port=plain, overrides=overrides) as b:
        bs = f"127.0.0.1:{sasl}"
        denied = SamsaRegistry(bs, props=props, startup_timeout=40)
        try:
            with pytest.raises(RuntimeError, match="exited with 1"):
                denied.start()
        finally:
            denied.close()
        p = "User:registry"
        allow = AclPermissionType.ALLOW
        lit = ResourcePatternType.LITERAL
        acls = [AclBinding(ResourceType.TOPIC, "_schemas", lit, p, "*", op, allow)
                for op in (AclOperation.CREATE, AclOperation.READ, AclOperation.WRITE,
                           AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS)]
        acls += [AclBinding(ResourceType.GROUP, "samsa-registry-reader", lit, p, "*",
                            AclOperation.READ, allow),
                 AclBinding(ResourceType.BROKER, "kafka-cluster", lit, p, "*",
                            AclOperation.IDEMPOTENT_WRITE, allow)]
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        for f in admin.create_acls(acls, request_timeout=10).values():
            f.result(15)
        with SamsaRegistry(bs, props=props) as reg:
            c = SchemaRegistryClient({"url": reg.url})
            sid = c.register_schema("acl-value", Schema(AVRO, "AVRO"))
            assert c.get_latest_version("acl-value").schema_id == sid


def test_embedded_registry_bad_settings_stop_serve(tmp_path: Path) -> None:
    port = free_port()
    r = subprocess.run([sys.executable, "-m", "samsa.cli.main", "serve", "--listeners",
                        f"PLAINTEXT://127.0.0.1:{port}", "--log-dirs", str(tmp_path / "data"),
                        "--schema-registry", f"http://127.0.0.1:{free_port()}",
                        "--override", "schema.registry.authentication.method=BASIC"],
                       capture_output=True, text=True, timeout=90)
    assert r.returncode == 1
    assert "authentication.method=BASIC needs users" in r.stderr
