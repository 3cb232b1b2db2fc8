"""controller.quorum.* parsing: Kafka's defaults, voter strings, clear errors for bad ones."""

import pytest

from samsa.cluster.quorum.config import (
    QuorumConfig,
    QuorumConfigError,
    VoterEndpoint,
    parse_bootstrap_servers,
    parse_voters,
)


def test_kafka_defaults():
    c = QuorumConfig()
    assert (c.election_timeout_ms, c.fetch_timeout_ms, c.election_backoff_max_ms) == (1000, 2000, 1000)
    assert (c.request_timeout_ms, c.retry_backoff_ms) == (2000, 20)


def test_from_properties_reads_kafka_names():
    c = QuorumConfig.from_properties(
        {
            "controller.quorum.election.timeout.ms": "300",
            "controller.quorum.fetch.timeout.ms": "700",
            "controller.quorum.election.backoff.max.ms": "50",
            "controller.quorum.request.timeout.ms": "900",
            "controller.quorum.retry.backoff.ms": "5",
            "unrelated": "x",
        }
    )
    assert (c.election_timeout_ms, c.fetch_timeout_ms, c.election_backoff_max_ms) == (300, 700, 50)
    assert (c.request_timeout_ms, c.retry_backoff_ms) == (900, 5)


@pytest.mark.parametrize(
    "props, words",
    [
        ({"controller.quorum.fetch.timeout.ms": "2s"}, "controller.quorum.fetch.timeout.ms"),
        ({"controller.quorum.election.timeout.ms": "0"}, "election_timeout_ms must be > 0"),
    ],
)
def test_from_properties_bad_values(props, words):
    with pytest.raises(QuorumConfigError, match=words):
        QuorumConfig.from_properties(props)


def test_parse_voters():
    v = parse_voters("1@localhost:9093, 2@10.0.0.2:9094,3@[::1]:9095")
    assert v == {
        1: VoterEndpoint(1, "localhost", 9093),
        2: VoterEndpoint(2, "10.0.0.2", 9094),
        3: VoterEndpoint(3, "::1", 9095),
    }
    assert parse_voters("") == {}


@pytest.mark.parametrize(
    "value, words",
    [
        ("1@host", "has no ':port'"),
        ("1host:9093", "not of the form id@host:port"),
        ("x@host:9093", "node id 'x'"),
        ("-1@host:9093", "node id '-1'"),
        ("1@host:70000", "port '70000'"),
        ("1@host:abc", "port 'abc'"),
        ("1@:9093", "empty host"),
        ("1@::1:9093", "IPv6 host in brackets"),
        ("1@[::1:9093", "not \\[ipv6-host\\]:port"),
        ("1@a:1,1@b:2", "node id 1 appears twice"),
        ("1@a:1,,2@b:2", "empty entry"),
    ],
)
def test_parse_voters_errors_say_what_is_wrong(value, words):
    with pytest.raises(QuorumConfigError, match=words) as e:
        parse_voters(value)
    assert "controller.quorum.voters" in str(e.value)


def test_parse_bootstrap_servers():
    assert parse_bootstrap_servers("a:1, [::1]:2") == [("a", 1), ("::1", 2)]
    with pytest.raises(QuorumConfigError, match="controller.quorum.bootstrap.servers"):
        parse_bootstrap_servers("a:1,b")
