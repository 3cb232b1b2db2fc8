"""Connector config validation as AbstractHerder does it: the client override policy, the sink's
topics rules, exactly.once.support=required, and the ConfigInfos shape."""

from __future__ import annotations

import pytest

from samsa.connect.errors import BadRequestException
from samsa.connect.plugins import Plugins
from samsa.connect.runtime.validation import raise_if_invalid, validate_connector_config


@pytest.fixture(scope="module")
def plugins() -> Plugins:
    return Plugins()


def errors(result: dict, key: str) -> list[str]:
    """The key's errors ([] for a key the answer does not list, e.g. an allowed override)."""
    return next((c["value"]["errors"] for c in result["configs"] if c["value"]["name"] == key), [])


def validate(plugins: Plugins, props: dict, policy: str = "All", eos: bool = False) -> dict:
    return validate_connector_config(plugins, props, override_policy=policy,
                                     exactly_once_source=eos)


def test_override_policy(plugins: Plugins) -> None:
    props = {"connector.class": "FileStreamSource", "topic": "t",
             "producer.override.linger.ms": "50", "producer.override.sasl.mechanism": "PLAIN"}
    assert validate(plugins, props, "All")["error_count"] == 0
    none = validate(plugins, props, "None")
    assert none["error_count"] == 2 and errors(none, "producer.override.linger.ms")
    principal = validate(plugins, props, "Principal")
    assert principal["error_count"] == 1
    assert errors(principal, "producer.override.linger.ms")
    assert not errors(principal, "producer.override.sasl.mechanism")


def test_sink_needs_exactly_one_of_topics_and_regex(plugins: Plugins) -> None:
    base = {"connector.class": "FileStreamSink"}
    assert errors(validate(plugins, base), "topics")
    both = validate(plugins, {**base, "topics": "a", "topics.regex": "a.*"})
    assert errors(both, "topics") and errors(both, "topics.regex")
    dlq = validate(plugins, {**base, "topics": "a,dlq", "errors.deadletterqueue.topic.name": "dlq"})
    assert any("DLQ" in e for e in errors(dlq, "topics"))
    assert validate(plugins, {**base, "topics": "a"})["error_count"] == 0


def test_exactly_once_required(plugins: Plugins) -> None:
    stdin = {"connector.class": "FileStreamSource", "topic": "t",
             "exactly.once.support": "required"}
    assert errors(validate(plugins, stdin, eos=True), "exactly.once.support")  # no file: no EOS
    with_file = {**stdin, "file": "/tmp/x"}
    assert validate(plugins, with_file, eos=True)["error_count"] == 0
    assert validate(plugins, stdin, eos=False)["error_count"] == 0  # only checked when enabled


def test_shape_and_the_create_answer(plugins: Plugins) -> None:
    result = validate(plugins, {"connector.class": "FileStreamSource", "tasks.max": "0"})
    assert result["name"] == "org.apache.kafka.connect.file.FileStreamSourceConnector"
    assert "Common" in result["groups"]
    cfg = next(c for c in result["configs"] if c["value"]["name"] == "tasks.max")
    assert cfg["definition"]["type"] == "INT" and cfg["definition"]["default_value"] == "1"
    assert cfg["value"]["value"] == "0" and cfg["value"]["errors"]
    with pytest.raises(BadRequestException, match=r"contains the following 2 error\(s\)"):
        raise_if_invalid(result)
    with pytest.raises(BadRequestException, match="no connector type"):
        validate(plugins, {"tasks.max": "1"})
