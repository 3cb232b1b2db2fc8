"""SASL over TLS (SASL_SSL listeners, certificates made at test time with trustme): PLAIN,
SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER with confluent-kafka, kafka-python, aiokafka and kcat,
and the seeds' producer (004) with its config verbatim except the host."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from samsa.testing import SamsaBroker, free_port
from samsa.testing.tls import TlsFiles
from tests.sasl_util import (
    create_scram,
    first_values,
    kcat,
    plain_jaas,
    roundtrip_confluent,
    unsecured_jwt,
)

USERS = {"alice": "alice-secret", "API_KEY": "API_SECRET"}

# The seeds' producer (shared/seeds/004, "Example: Python producer"), verbatim but for the host.
# The seed calls a delivery_report it never defines: the test's prelude defines it.
SEED_PRODUCER = """
from confluent_kafka import Producer
import json

# Configure producer
conf = {
    'bootstrap.servers': '@HOST@',
    'security.protocol': 'SASL_SSL',
    'sasl.mechanism': 'PLAIN',
    'sasl.username': 'API_KEY',
    'sasl.password': 'API_SECRET'
}

producer = Producer(conf)

# Produce an event
event = {
    'order_id': 101,
    'customer_id': 'cust_456',
    'status': 'created',
    'timestamp': '2026-02-20T10:00:00Z'
}

producer.produce(
    topic='order-events',
    key=str(event['order_id']).encode('utf-8'),  # Partition by order_id
    value=json.dumps(event).encode('utf-8'),
    callback=delivery_report  # Confirm delivery
)

producer.flush()  # Wait for all messages to be sent
"""
PRELUDE = """
def delivery_report(err, msg):
    print("DELIVERY", err, msg.topic() if err is None else "")
"""


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SamsaBroker, str, TlsFiles]]:
    tls = TlsFiles.create(tmp_path_factory.mktemp("tls"))
    plain, sasl_ssl = free_port(), free_port()
    overrides = {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_SSL://127.0.0.1:{sasl_ssl}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_SSL://127.0.0.1:{sasl_ssl}",
        **tls.broker_ssl("none", prefix="listener.name.sasl_ssl."),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": plain_jaas(USERS),
        "num.partitions": "1",
    }
    with SamsaBroker(port=plain, overrides=overrides) as b:
        create_scram(b.bootstrap, "scram256", "pw-256", "SCRAM-SHA-256")
        create_scram(b.bootstrap, "scram512", "pw-512", "SCRAM-SHA-512")
        yield b, f"127.0.0.1:{sasl_ssl}", tls


def client_conf(mech: str, tls: TlsFiles) -> dict[str, Any]:
    conf: dict[str, Any] = {"security.protocol": "SASL_SSL", "sasl.mechanism": mech,
                            "ssl.ca.location": str(tls.ca_file)}
    if mech == "PLAIN":
        conf |= {"sasl.username": "alice", "sasl.password": USERS["alice"]}
    elif mech.startswith("SCRAM"):
        conf |= {"sasl.username": f"scram{mech[-3:]}", "sasl.password": f"pw-{mech[-3:]}"}
    else:
        conf |= {"enable.sasl.oauthbearer.unsecure.jwt": True,
                 "sasl.oauthbearer.config": "principal=alice"}
    return conf


@pytest.mark.parametrize("mech", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"])
def test_confluent_and_kcat_over_sasl_ssl(broker: tuple[SamsaBroker, str, TlsFiles],
                                          mech: str) -> None:
    _, bs, tls = broker
    t = f"ssl-{uuid.uuid4().hex[:8]}"
    conf = client_conf(mech, tls)
    assert roundtrip_confluent(bs, conf, t, 3) == [b"m0", b"m1", b"m2"]
    props = {k.replace("sasl.mechanism", "sasl.mechanisms"): str(v).lower()
             if isinstance(v, bool) else str(v) for k, v in conf.items()}
    r = kcat(bs, props, "-C", "-t", t, "-o", "beginning", "-e", "-q")
    assert r.returncode == 0 and r.stdout.split() == ["m0", "m1", "m2"], r.stderr


@pytest.mark.parametrize("mech", ["PLAIN", "SCRAM-SHA-512", "OAUTHBEARER"])
def test_kafka_python_and_aiokafka_over_sasl_ssl(broker: tuple[SamsaBroker, str, TlsFiles],
                                                 mech: str) -> None:
    from aiokafka import AIOKafkaProducer
    from aiokafka.abc import AbstractTokenProvider
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.net.sasl.oauth import AbstractTokenProvider as KpTokenProvider

    _, bs, tls = broker
    t = f"ssl-{uuid.uuid4().hex[:8]}"
    conf = client_conf(mech, tls)
    kp_kw: dict[str, Any] = {"security_protocol": "SASL_SSL", "sasl_mechanism": mech,
                             "ssl_cafile": str(tls.ca_file)}
    aio_kw: dict[str, Any] = {"security_protocol": "SASL_SSL", "sasl_mechanism": mech,
                              "ssl_context": tls.ssl_context()}
    if mech == "OAUTHBEARER":
        class KpTokens(KpTokenProvider):  # type: ignore[misc]
            def token(self) -> str:
                return unsecured_jwt({"sub": "alice", "exp": int(time.time()) + 600})

        class AioTokens(AbstractTokenProvider):  # type: ignore[misc]
            async def token(self) -> str:
                return unsecured_jwt({"sub": "alice", "exp": int(time.time()) + 600})
        kp_kw["sasl_oauth_token_provider"] = KpTokens()
        aio_kw["sasl_oauth_token_provider"] = AioTokens()
    else:
        creds = {"sasl_plain_username": conf["sasl.username"],
                 "sasl_plain_password": conf["sasl.password"]}
        kp_kw |= creds
        aio_kw |= creds
    kp = KafkaProducer(bootstrap_servers=bs, **kp_kw)
    kp.send(t, b"kp").get(timeout=30)
    kp.close()

    async def aio() -> None:
        p = AIOKafkaProducer(bootstrap_servers=bs, **aio_kw)
        await p.start()
        await p.send_and_wait(t, b"aio")
        await p.stop()
    asyncio.run(aio())
    kc = KafkaConsumer(t, bootstrap_servers=bs, auto_offset_reset="earliest",
                       consumer_timeout_ms=10000, **kp_kw)
    assert first_values(kc, 2) == [b"kp", b"aio"]
    kc.close()


SYSTEM_CA = Path("/etc/ssl/certs/ca-certificates.crt")  # librdkafka's probed CA bundle here


def test_seed_producer_config_verbatim(broker: tuple[SamsaBroker, str, TlsFiles],
                                       tmp_path: Path) -> None:
    """The seed sets no ssl.ca.location: a statically linked librdkafka (confluent-kafka's wheel)
    then trusts the system CA bundle it probes. The test CA is added there only inside a private
    mount namespace of the producer process (unshare -m + a bind mount): the machine's trust
    store and the seed's config stay untouched."""
    from confluent_kafka import Consumer

    b, bs, tls = broker
    unshare = shutil.which("unshare")
    if unshare is None or not SYSTEM_CA.exists() or os.geteuid() != 0:
        pytest.skip("needs root, unshare and a Debian-style CA bundle to trust the test CA")
    bundle = tmp_path / "ca-bundle.pem"
    bundle.write_bytes(SYSTEM_CA.read_bytes() + b"\n" + tls.ca_file.read_bytes())
    script = tmp_path / "seed_producer.py"
    script.write_text(PRELUDE + SEED_PRODUCER.replace("@HOST@", bs))
    r = subprocess.run([unshare, "-m", "sh", "-c",
                        f'mount --bind "{bundle}" "{SYSTEM_CA}" && exec "{sys.executable}" '
                        f'"{script}"'], capture_output=True, text=True, timeout=60)
    if r.returncode != 0 and "mount" in r.stderr and "DELIVERY" not in r.stdout:
        pytest.skip(f"cannot bind-mount in a private mount namespace: {r.stderr.strip()}")
    assert r.returncode == 0, r.stderr
    assert "DELIVERY None order-events" in r.stdout, (r.stdout, r.stderr)
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "seed-check",
                  "auto.offset.reset": "earliest"})
    c.subscribe(["order-events"])
    got = None
    deadline = time.monotonic() + 30
    while got is None and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got = m
    c.close()
    assert got is not None and got.key() == b"101"
