"""SCRAM user names are names: one that happens to contain "tokenauth" (the key of Kafka's
delegation-token extension) or characters SCRAM escapes (`,` `=`) authenticates like any other,
with confluent-kafka; a wrong password still fails."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from samsa.testing import SamsaBroker, free_port
from tests.sasl_util import create_scram

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def ports() -> Iterator[tuple[str, str]]:
    plain, sasl = free_port(), free_port()
    overrides = {"listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
                 "sasl.enabled.mechanisms": "SCRAM-SHA-256"}
    with SamsaBroker(port=plain, overrides=overrides):
        yield f"127.0.0.1:{plain}", f"127.0.0.1:{sasl}"


def _admin(bs: str, user: str, password: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bs, "security.protocol": "SASL_PLAINTEXT",
                        "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": user,
                        "sasl.password": password, "log_level": 0})


@pytest.mark.parametrize("user", ["tokenauth-svc", "svc,ops=1"])
def test_scram_names(ports: tuple[str, str], user: str) -> None:
    plain, sasl = ports
    create_scram(plain, user, "pw-1")
    assert _admin(sasl, user, "pw-1").list_topics(timeout=15).brokers  # authenticated
    with pytest.raises(KafkaException):
        _admin(sasl, user, "wrong").list_topics(timeout=3)
