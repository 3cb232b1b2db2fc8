"""`--command-config client.properties` on every CLI command that talks to a broker (and
`--producer.config` / `--consumer.config` on produce / consume), as Kafka's tools take them:
SASL_SSL with PLAIN, SCRAM and OAUTHBEARER, SSL with a client certificate, and one-line errors
for a wrong password, an untrusted CA, a missing or malformed file. The broker has ACLs on, so a
command that works as alice shows what alice may see (the principal really is alice)."""

from __future__ import annotations

import argparse
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from samsa.testing.secure import SecureBroker, write_properties

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def sb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    with SecureBroker(tmp_path_factory.mktemp("secure-cli"), acls=True) as b:
        yield b


def cli(*args: str, stdin: str | None = None, timeout: float = 60) \
        -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "samsa.cli.main", *args], input=stdin,
                          capture_output=True, text=True, timeout=timeout)


def ok(r: subprocess.CompletedProcess[str]) -> str:
    assert r.returncode == 0, r.stderr
    return r.stdout


def props(sb: SecureBroker, tmp: Path, name: str, **kw: str | None) -> str:
    return str(write_properties(tmp / f"{name}.properties", sb.java(**kw)))  # type: ignore[arg-type]


def _walk(p: argparse.ArgumentParser, path: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
    options = {o for a in p._actions for o in a.option_strings}
    subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
    if "--bootstrap-server" in options:
        yield (*path, "ok" if "--command-config" in options else "MISSING")
    for s in subs:
        for name, child in s.choices.items():
            yield from _walk(child, (*path, name))


def test_every_command_with_a_bootstrap_server_takes_command_config() -> None:
    from samsa.cli import main as m

    seen: list[tuple[str, ...]] = []
    real = argparse.ArgumentParser.parse_args

    def capture(self: argparse.ArgumentParser, *a: object, **k: object) -> argparse.Namespace:
        seen.extend(_walk(self, ()))
        raise SystemExit(0)
    argparse.ArgumentParser.parse_args = capture  # type: ignore[assignment,method-assign]
    try:
        with pytest.raises(SystemExit):
            m.main(["topics", "list"])
    finally:
        argparse.ArgumentParser.parse_args = real  # type: ignore[method-assign]
    # `samsa registry` runs a registry whose Kafka store has its own kafkastore.* settings
    missing = [c for c in seen if c[-1] == "MISSING" and c[0] != "registry"]
    assert not missing, missing
    assert len([c for c in seen if c[-1] == "ok"]) >= 25  # topics, groups, acls, users, ...


@pytest.mark.parametrize("mech", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"])
def test_topics_produce_consume_over_sasl_ssl(sb: SecureBroker, tmp_path: Path,
                                              mech: str) -> None:
    topic = f"adm-{uuid.uuid4().hex[:6]}"
    admin = props(sb, tmp_path, "admin", user="admin", mechanism=mech)
    ok(cli("topics", "create", topic, "--bootstrap-server", sb.sasl_ssl, "--command-config", admin))
    assert topic in ok(cli("topics", "list", "--bootstrap-server", sb.sasl_ssl,
                           "--command-config", admin)).split()
    r = cli("produce", topic, "--bootstrap-server", sb.sasl_ssl, "--producer.config", admin,
            stdin="one\ntwo\n")
    assert "Produced 2 message(s)" in ok(r) + r.stderr
    r = cli("consume", topic, "--bootstrap-server", sb.sasl_ssl, "--consumer.config", admin,
            "--from-beginning", "--max-messages", "2", "--timeout", "20")
    assert ok(r).split() == ["one", "two"]
    r = cli("consume", topic, "--bootstrap-server", sb.sasl_ssl, "--command-config", admin,
            "--group", f"g-{mech}", "--from-beginning", "--max-messages", "2", "--timeout", "20")
    assert ok(r).split() == ["one", "two"]
    described = ok(cli("groups", "describe", f"g-{mech}", "--bootstrap-server", sb.sasl_ssl,
                       "--command-config", admin))
    assert topic in described


def test_principal_is_the_authenticated_user(sb: SecureBroker, tmp_path: Path) -> None:
    """alice (SASL_SSL, SCRAM) and the certificate CN=alice (SSL) see only the topic they were
    granted: the CLI's connection carries their identity, not ANONYMOUS (a super user here)."""
    mine, other = f"alice-{uuid.uuid4().hex[:6]}", f"other-{uuid.uuid4().hex[:6]}"
    ok(cli("topics", "create", mine, "--bootstrap-server", sb.plaintext))
    ok(cli("topics", "create", other, "--bootstrap-server", sb.plaintext))
    ok(cli("acls", "add", "--bootstrap-server", sb.plaintext, "--allow-principal", "User:alice",
           "--allow-principal", "User:CN=alice,OU=eng,O=acme", "--operation", "All",
           "--topic", mine))
    alice = props(sb, tmp_path, "alice", user="alice", mechanism="SCRAM-SHA-512")
    cert = props(sb, tmp_path, "cert", cert="alice")
    for bs, conf in ((sb.sasl_ssl, alice), (sb.ssl, cert)):
        listed = ok(cli("topics", "list", "--bootstrap-server", bs, "--command-config", conf))
        assert mine in listed.split() and other not in listed.split(), listed
        r = cli("produce", other, "--bootstrap-server", bs, "--command-config", conf,
                stdin="x\n")
        assert r.returncode != 0 and "Traceback" not in r.stderr
    r = cli("consume", mine, "--bootstrap-server", sb.sasl_ssl, "--command-config", alice,
            "--group", "not-granted", "--timeout", "20")
    assert r.returncode == 1 and "Group authorization failed" in r.stderr, r.stderr


def test_raw_protocol_commands_over_sasl_ssl_and_ssl(sb: SecureBroker, tmp_path: Path) -> None:
    """Commands that speak the protocol themselves (no librdkafka) do TLS and SASL too."""
    admin = props(sb, tmp_path, "admin", user="admin", mechanism="SCRAM-SHA-256")
    cert = props(sb, tmp_path, "cert", cert="admin")
    t = f"raw-{uuid.uuid4().hex[:6]}"
    ok(cli("topics", "create", t, "--bootstrap-server", sb.plaintext))
    for bs, conf in ((sb.sasl_ssl, admin), (sb.ssl, cert)):
        base = ("--bootstrap-server", bs, "--command-config", conf)
        assert f"{t}-0" in ok(cli("log-dirs", "describe", *base))
        assert "ClusterId:" in ok(cli("cluster", "describe", *base))
        assert "LeaderId:" in ok(cli("metadata-quorum", *base, "describe", "--status"))
        ok(cli("transactions", "list", *base))
        ok(cli("partitions", "reassign", "--list", *base))
    base = ("--bootstrap-server", sb.sasl_ssl, "--command-config", admin)
    ok(cli("quotas", "set", "--entity-type", "clients", "--entity-name", "c1",
           "--add-config", "producer_byte_rate=1048576", *base))
    assert "1048576" in ok(cli("quotas", "describe", "--entity-type", "clients", *base))
    assert "admin" in ok(cli("users", "scram", "describe", *base))
    ok(cli("acls", "list", *base))


def test_failures_are_one_line_errors(sb: SecureBroker, tmp_path: Path) -> None:
    import trustme

    wrong = props(sb, tmp_path, "wrong", user="alice", password="not-it")
    untrusted_ca = tmp_path / "other-ca.pem"
    trustme.CA().cert_pem.write_to_path(str(untrusted_ca))
    untrusted = write_properties(tmp_path / "untrusted.properties",
                                 {**sb.java("alice"), "ssl.truststore.location": str(untrusted_ca)})
    cases = [
        (("topics", "list"), wrong, sb.sasl_ssl, 1, "authentication failed"),
        (("log-dirs", "describe"), wrong, sb.sasl_ssl, 1, "authentication failed"),
        (("topics", "list"), str(untrusted), sb.sasl_ssl, 1, "certificate verify failed"),
        (("cluster", "describe"), str(untrusted), sb.sasl_ssl, 1, "CERTIFICATE_VERIFY_FAILED"),
        (("topics", "list"), str(tmp_path / "missing.properties"), sb.sasl_ssl, 2,
         "cannot read --command-config"),
    ]
    garbage = tmp_path / "garbage.properties"
    garbage.write_text("security.protocol=SASL_SSL\nthis line has no separator\n")
    cases.append((("topics", "list"), str(garbage), sb.sasl_ssl, 2, "expected key=value"))
    jks = write_properties(tmp_path / "jks.properties", {
        "security.protocol": "SSL", "ssl.truststore.type": "JKS",
        "ssl.truststore.location": "/etc/truststore.jks"})
    cases.append((("topics", "list"), str(jks), sb.ssl, 2, "JKS is not supported"))
    for cmd, conf, bs, code, text in cases:
        r = cli(*cmd, "--bootstrap-server", bs, "--command-config", conf)
        assert r.returncode == code, (cmd, conf, r.stderr)
        assert text in r.stderr and "Traceback" not in r.stderr, (cmd, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    r = cli("produce", "t", "--bootstrap-server", sb.sasl_ssl, "--producer.config",
            str(tmp_path / "nope.properties"), stdin="")
    assert r.returncode == 2 and "cannot read --producer.config" in r.stderr
