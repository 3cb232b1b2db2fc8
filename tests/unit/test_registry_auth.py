"""The registry's security settings without a server: Jetty users files, JAAS realm lookup
(also through $SCHEMA_REGISTRY_OPTS), role levels per endpoint, client and kafkastore settings."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

import pytest

from samsa.config import ConfigError
from samsa.registry.auth import ADMIN, READ, WRITE, BasicAuth, jaas_users_file, parse_users, required
from samsa.registry.client_config import RegistryClientSettings
from samsa.registry.storeconf import bootstrap, client_config
from samsa.registry.tls import client_auth, forwarding_context


def basic(user: str, pw: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{pw}".encode()).decode()


def test_users_file_format() -> None:
    md5 = hashlib.md5(b"s3cret").hexdigest()
    users = parse_users(f"# comment\n! also\nalice: pw,admin, read-only\nbob=MD5:{md5}\n\n"
                        "carol : pw:with:colons,read-write\n")
    assert users["alice"].roles == {"admin", "read-only"}
    assert users["bob"].roles == frozenset() and users["bob"].check("s3cret")
    assert not users["bob"].check("md5:" + md5)
    assert users["carol"].check("pw:with:colons") and not users["carol"].check("pw")
    with pytest.raises(ConfigError, match="OBF"):
        parse_users("x: OBF:1v2j1uum1xtv1zej1zer1xtn1uvk1v1v,admin")
    with pytest.raises(ConfigError, match="line 1"):
        parse_users("no separator here")


def test_jaas_realm_entry() -> None:
    text = ('Other {\n org.x.Module required file="/nope";\n};\n'
            'SchemaRegistry-Props {\n  org.eclipse.jetty.jaas.spi.PropertyFileLoginModule required\n'
            '  file="/etc/sr/users" debug="false";\n};\n')
    assert jaas_users_file(text, "SchemaRegistry-Props") == "/etc/sr/users"
    with pytest.raises(ConfigError, match="no login entry named 'Missing'"):
        jaas_users_file(text, "Missing")


def test_basic_auth_from_env_jaas(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    users = tmp_path / "users"
    users.write_text("a: pa,admin\nw: pw,read-write\nr: pr,read-only\ng: pg,guest\nx: px,ops\n")
    jaas = tmp_path / "jaas.conf"
    jaas.write_text(f'Realm {{ org.eclipse.jetty.jaas.spi.PropertyFileLoginModule required '
                    f'file="{users}"; }};')
    monkeypatch.setenv("SCHEMA_REGISTRY_OPTS", f"-Xmx1g -Djava.security.auth.login.config={jaas}")
    settings = {"authentication.method": "BASIC", "authentication.realm": "Realm",
                "authentication.roles": "admin,read-write,read-only,ops",
                "samsa.registry.admin.roles": "admin,ops"}
    auth = BasicAuth.from_settings(settings.get)
    assert auth is not None
    levels = {}
    for name, pw in (("a", "pa"), ("w", "pw"), ("r", "pr"), ("g", "pg"), ("x", "px")):
        user, why = auth.authenticate(basic(name, pw))
        assert user is not None, why
        levels[name] = auth.level(user)
    assert levels == {"a": ADMIN, "w": WRITE, "r": READ, "g": None, "x": ADMIN}
    assert auth.authenticate(basic("a", "wrong"))[0] is None
    assert auth.authenticate(None)[0] is None
    assert auth.authenticate("Bearer abc")[0] is None
    monkeypatch.delenv("SCHEMA_REGISTRY_OPTS")
    with pytest.raises(ConfigError, match="needs users"):
        BasicAuth.from_settings(settings.get)
    assert BasicAuth.from_settings({}.get) is None
    with pytest.raises(ConfigError, match="BEARER"):
        BasicAuth.from_settings({"authentication.method": "BEARER"}.get)


def test_skip_paths(tmp_path: Path) -> None:
    users = tmp_path / "u"
    users.write_text("a: b,admin\n")
    auth = BasicAuth.from_settings({"authentication.method": "BASIC", "samsa.registry.users.file":
                                    str(users), "authentication.skip.paths": "/,/schemas/types/*"}.get)
    assert auth is not None
    assert auth.skipped("/") and auth.skipped("/schemas/types") and auth.skipped("/schemas/types/x")
    assert not auth.skipped("/subjects")


@pytest.mark.parametrize(("method", "path", "level"), [
    ("GET", "/subjects", READ), ("GET", "/config", READ), ("GET", "/mode", READ),
    ("POST", "/subjects/s", READ), ("POST", "/compatibility/subjects/s/versions/latest", READ),
    ("POST", "/subjects/a%2Fb", READ),
    ("POST", "/subjects/s/versions", WRITE), ("DELETE", "/subjects/s", WRITE),
    ("DELETE", "/subjects/s/versions/1", WRITE), ("PUT", "/config/s", WRITE),
    ("DELETE", "/config/s", WRITE), ("PUT", "/config", ADMIN), ("DELETE", "/config", ADMIN),
    ("PUT", "/mode", ADMIN), ("PUT", "/mode/s", ADMIN), ("DELETE", "/mode/s", ADMIN),
])
def test_endpoint_levels(method: str, path: str, level: int) -> None:
    assert required(method, path)[0] == level


def test_client_settings() -> None:
    s = RegistryClientSettings.parse("https://u%40x:p%3Aw@reg:8081/,https://other", {})
    assert s.url == "https://reg:8081" and s.auth == ("u@x", "p:w")
    conf = s.confluent_conf()
    assert conf == {"url": "https://reg:8081", "basic.auth.user.info": "u@x:p:w"}
    s = RegistryClientSettings.parse("http://r", {
        "basic.auth.credentials.source": "USER_INFO", "basic.auth.user.info": "a:b",
        "schema.registry.ssl.truststore.location": "/ca.pem",
        "schema.registry.ssl.keystore.location": "/me.pem", "schema.registry.ssl.key.password": "k"})
    assert s.confluent_conf() == {"url": "http://r", "basic.auth.user.info": "a:b",
                                  "ssl.ca.location": "/ca.pem", "ssl.certificate.location": "/me.pem",
                                  "ssl.key.location": "/me.pem", "ssl.key.password": "k"}
    assert s.headers() == {"Authorization": basic("a", "b")}
    # USER_INFO ignores URL credentials' source; URL (default) ignores basic.auth.user.info
    assert RegistryClientSettings.parse("http://r", {"basic.auth.user.info": "a:b"}).auth is None
    inherit = RegistryClientSettings.parse("http://r", {
        "basic.auth.credentials.source": "SASL_INHERIT",
        "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required '
                            'username="k" password="s";'})
    assert inherit.auth == ("k", "s")
    with pytest.raises(ConfigError, match="USER_INFO"):
        RegistryClientSettings.parse("http://r", {"basic.auth.credentials.source": "TOKEN"})
    with pytest.raises(ConfigError, match="PEM"):
        RegistryClientSettings.parse("http://r", {"schema.registry.ssl.truststore.type": "JKS"})


def test_kafkastore_settings() -> None:
    get = {"kafkastore.bootstrap.servers": "PLAINTEXT://h:9092,SASL_SSL://h:9094,SASL_SSL://g:9094",
           "kafkastore.security.protocol": "SASL_SSL", "kafkastore.sasl.mechanism": "SCRAM-SHA-512",
           "kafkastore.sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule '
                                          'required username="sr" password="pw";',
           "kafkastore.ssl.truststore.location": "/ca.pem",
           "kafkastore.ssl.keystore.location": "/sr.pem",
           "kafkastore.ssl.endpoint.identification.algorithm": ""}.get
    assert bootstrap(get, "x:1") == "h:9094,g:9094"
    assert client_config(get) == {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "sr",
        "sasl.password": "pw", "ssl.ca.location": "/ca.pem", "ssl.certificate.location": "/sr.pem",
        "ssl.key.location": "/sr.pem", "ssl.endpoint.identification.algorithm": "none"}
    assert bootstrap({}.get, "x:1") == "x:1"
    assert client_config({}.get) == {"security.protocol": "PLAINTEXT"}
    with pytest.raises(ConfigError, match="GSSAPI"):
        client_config({"kafkastore.security.protocol": "SASL_PLAINTEXT"}.get)
    with pytest.raises(ConfigError, match="no SSL endpoint"):
        bootstrap({"kafkastore.bootstrap.servers": "PLAINTEXT://h:1",
                   "kafkastore.security.protocol": "SSL"}.get, "x:1")


def test_client_authentication_names() -> None:
    assert client_auth({}.get) == "none"
    assert client_auth({"ssl.client.authentication": "REQUESTED"}.get) == "requested"
    assert client_auth({"ssl.client.auth": "true"}.get) == "required"
    with pytest.raises(ConfigError):
        client_auth({"ssl.client.authentication": "MAYBE"}.get)


def test_forwarding_context(tmp_path: Path) -> None:
    from samsa.testing.tls import TlsFiles

    tls = TlsFiles.create(tmp_path)
    base = {"ssl.truststore.location": str(tls.ca_file), "ssl.keystore.location": str(tls.server_file)}
    assert forwarding_context(base.get).check_hostname
    off = forwarding_context({**base, "ssl.endpoint.identification.algorithm": ""}.get)
    assert not off.check_hostname
    with pytest.raises(ConfigError, match="forwarding"):
        forwarding_context({"ssl.keystore.location": str(tmp_path / "missing.pem")}.get)


def test_registry_command_settings(tmp_path: Path) -> None:
    import argparse

    from samsa.cli.registry import add_parser, registry_config

    conf = tmp_path / "schema-registry.properties"
    conf.write_text("listeners=https://0.0.0.0:8443,http://127.0.0.1:8081\n"
                    "kafkastore.bootstrap.servers=SASL_SSL://b1:9094\nkafkastore.topic=_sr\n"
                    "schema.compatibility.level=full\nauthentication.method=BASIC\n")
    ap = argparse.ArgumentParser()
    add_parser(ap.add_subparsers())
    cfg = registry_config(ap.parse_args(["registry", str(conf), "--override", "kafkastore.timeout.ms=5000"]))
    assert cfg.listeners == [("https", "0.0.0.0", 8443), ("http", "127.0.0.1", 8081)]
    assert (cfg.topic, cfg.compatibility, cfg.timeout_s) == ("_sr", "FULL", 5.0)
    assert cfg.props["authentication.method"] == "BASIC" and cfg.bootstrap == ""
    flags = registry_config(ap.parse_args(["registry", str(conf), "--bootstrap-server", "x:1",
                                           "--listen", "127.0.0.1:9"]))
    assert flags.bootstrap == "x:1" and "kafkastore.bootstrap.servers" not in flags.props
    assert flags.listeners == [("http", "127.0.0.1", 9)]
    with pytest.raises(ConfigError, match="neither http"):
        _ = registry_config(ap.parse_args(["registry", "--listen", "ftp://h:1"])).listeners
