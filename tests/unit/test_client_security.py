"""samsa.client_security: Java client properties files and their librdkafka settings, and the
raw-protocol SASL client against Samsa's own SCRAM server."""

from __future__ import annotations

from pathlib import Path

import pytest

from samsa.client_security import (
    AuthenticationError,
    ClientSecurity,
    SaslClient,
    SecurityConfigError,
    librdkafka_config,
    read_client_properties,
)
from samsa.security.sasl.scram import ScramServer, make_credential


def test_properties_file_with_continuations_and_comments(tmp_path: Path) -> None:
    f = tmp_path / "client.properties"
    f.write_text("# Kafka's doc example\n"
                 "security.protocol=SASL_SSL\n"
                 "sasl.mechanism: SCRAM-SHA-512\n"
                 "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule \\\n"
                 "    required username=\"alice\" \\\n"
                 "    password=\"a=b;c\";\n"
                 "! another comment\n\n"
                 "ssl.truststore.location=/etc/ca.pem\n")
    props = read_client_properties(f)
    assert props["sasl.mechanism"] == "SCRAM-SHA-512"
    assert props["sasl.jaas.config"].endswith('password="a=b;c";')
    conf = librdkafka_config(props)
    assert conf == {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                    "sasl.username": "alice", "sasl.password": "a=b;c",
                    "ssl.ca.location": "/etc/ca.pem"}


def test_bad_files_are_errors_naming_the_line(tmp_path: Path) -> None:
    f = tmp_path / "bad.properties"
    f.write_text("security.protocol=SSL\nnot a setting\n")
    with pytest.raises(SecurityConfigError, match=":2: expected key=value"):
        read_client_properties(f)
    f.write_text("sasl.jaas.config=x required \\\n")
    with pytest.raises(SecurityConfigError, match="continuation"):
        read_client_properties(f)


def test_java_settings_become_librdkafka_ones() -> None:
    conf = librdkafka_config({
        "security.protocol": "ssl", "ssl.truststore.type": "PEM",
        "ssl.truststore.location": "/ca.pem", "ssl.keystore.type": "PEM",
        "ssl.keystore.location": "/me.pem", "ssl.keystore.password": "ignored-for-pem",
        "ssl.key.password": "kp", "ssl.endpoint.identification.algorithm": "",
        "ssl.enabled.protocols": "TLSv1.3", "client.id": "x"})
    assert conf == {"security.protocol": "SSL", "ssl.ca.location": "/ca.pem",
                    "ssl.certificate.location": "/me.pem", "ssl.key.location": "/me.pem",
                    "ssl.key.password": "kp", "ssl.endpoint.identification.algorithm": "none",
                    "client.id": "x"}
    oauth = librdkafka_config({
        "sasl.mechanism": "OAUTHBEARER", "sasl.jaas.config":
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
        "unsecuredLoginStringClaim_sub=\"svc\";"})
    assert oauth["enable.sasl.oauthbearer.unsecure.jwt"] is True
    assert oauth["sasl.oauthbearer.config"] == "principal=svc"
    p12 = librdkafka_config({"ssl.keystore.type": "PKCS12", "ssl.keystore.location": "/k.p12",
                             "ssl.keystore.password": "pw"})
    assert p12 == {"ssl.keystore.location": "/k.p12", "ssl.keystore.password": "pw"}
    # librdkafka's own names pass through untouched
    native = {"security.protocol": "SASL_SSL", "sasl.username": "u", "ssl.ca.location": "/c"}
    assert librdkafka_config(native) == native


@pytest.mark.parametrize("props, match", [
    ({"ssl.truststore.type": "JKS", "ssl.truststore.location": "/t.jks"}, "JKS is not supported"),
    ({"ssl.keystore.type": "JKS", "ssl.keystore.location": "/k.jks"}, "JKS is not supported"),
    ({"security.protocol": "TLS"}, "expected one of"),
    ({"sasl.jaas.config": "not jaas"}, "sasl.jaas.config"),
    ({"sasl.login.callback.handler.class": "com.example.Handler"}, "not supported"),
])
def test_unusable_settings_are_refused(props: dict[str, str], match: str) -> None:
    with pytest.raises(SecurityConfigError, match=match):
        librdkafka_config(props)


def test_client_security_needs_credentials() -> None:
    with pytest.raises(SecurityConfigError, match="sasl.username"):
        ClientSecurity.from_config({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"})
    with pytest.raises(SecurityConfigError, match="not supported"):
        ClientSecurity.from_config({"security.protocol": "SASL_PLAINTEXT"})  # GSSAPI default
    s = ClientSecurity.from_config({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
                                    "sasl.username": "u", "sasl.password": "p"})
    assert s.uses_tls and s.uses_sasl and s.sasl_client().first() == b"\0u\0p"


@pytest.mark.parametrize("mech", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_client_against_samsas_server(mech: str) -> None:
    cred = make_credential(mech, "pencil", 4096)
    server = ScramServer(mech, lambda user, m: cred if user == "us,er=" else None)
    client = SaslClient(mech, "us,er=", "pencil")
    final = client.answer(server.evaluate(client.first()))
    assert final is not None
    assert client.answer(server.evaluate(final)) is None  # server signature checked
    assert server.complete and server.authorization_id == "us,er="
    # a server that does not know the password cannot forge its final message
    client2 = SaslClient(mech, "us,er=", "pencil")
    server2 = ScramServer(mech, lambda user, m: make_credential(mech, "other", 4096))
    final2 = client2.answer(server2.evaluate(client2.first()))
    assert final2 is not None
    with pytest.raises(AuthenticationError, match="signature"):
        client2.answer(b"v=" + b"AAAA")
