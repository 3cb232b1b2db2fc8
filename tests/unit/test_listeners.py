"""Listener parsing and Kafka's start-up checks on listeners, roles and controller listeners."""

from __future__ import annotations

import pytest

from samsa.broker.listeners import (
    Listener,
    controller_listeners,
    inter_broker_listener,
    listeners_for,
    parse_listeners,
    validate_node,
)
from samsa.config import BrokerConfig, ConfigError

VOTERS = "1@127.0.0.1:9093,2@127.0.0.1:9193,3@127.0.0.1:9293"


def cfg(**kv: str) -> BrokerConfig:
    return BrokerConfig({k.replace("_", "."): v for k, v in kv.items()})


def test_parse_listeners() -> None:
    got = parse_listeners("PLAINTEXT://127.0.0.1:9092, controller://:9093,SSL://[::1]:9094",
                          {"PLAINTEXT": "PLAINTEXT", "CONTROLLER": "PLAINTEXT", "SSL": "SSL"})
    assert got == [Listener("PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT"),
                   Listener("CONTROLLER", "", 9093, "PLAINTEXT"),
                   Listener("SSL", "::1", 9094, "SSL")]


def test_parse_listeners_without_controller_in_the_default_map() -> None:
    # the CONTROLLER name is only PLAINTEXT through controller.listener.names (effective map)
    with pytest.raises(ConfigError, match="No security protocol defined for listener CONTROLLER"):
        parse_listeners("CONTROLLER://:9093")


@pytest.mark.parametrize("value,why", [
    ("PLAINTEXT://a:9092,PLAINTEXT://b:9093", "Each listener must have a different name"),
    ("PLAINTEXT://a:9092,SSL://b:9092", "Each listener must have a different port"),
    ("PLAINTEXT://a", "unable to parse PLAINTEXT://a"),
    ("a:9092", "unable to parse a:9092"),
    ("PLAINTEXT://a:70000", "port 70000"),
    ("INTERNAL://a:9092", "No security protocol defined for listener INTERNAL"),
])
def test_bad_listeners(value: str, why: str) -> None:
    with pytest.raises(ConfigError, match=why):
        parse_listeners(value)


def test_port_zero_may_repeat() -> None:
    assert len(parse_listeners("PLAINTEXT://a:0,SSL://a:0")) == 2


def test_embedded_default_needs_no_controller_listener() -> None:
    bind, adv = listeners_for(BrokerConfig())
    assert bind == adv == [Listener("PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT")]
    assert controller_listeners(BrokerConfig()) == []


def test_combined_node() -> None:
    c = cfg(listeners="PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
            controller_quorum_voters=VOTERS)
    bind, adv = listeners_for(c)
    assert [x.name for x in bind] == ["PLAINTEXT", "CONTROLLER"]
    assert adv == [Listener("PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT")]  # never the controller
    assert controller_listeners(c) == [Listener("CONTROLLER", "127.0.0.1", 9093, "PLAINTEXT")]
    assert inter_broker_listener(c).port == 9092


def test_advertised_listeners_and_inter_broker_listener() -> None:
    c = cfg(listeners="INTERNAL://127.0.0.1:19092,EXTERNAL://127.0.0.1:9092,"
                      "CONTROLLER://127.0.0.1:9093",
            advertised_listeners="INTERNAL://broker-1:19092,EXTERNAL://lb.example:9092",
            listener_security_protocol_map="INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT,"
                                           "CONTROLLER:PLAINTEXT",
            inter_broker_listener_name="INTERNAL", controller_quorum_voters=VOTERS)
    _, adv = listeners_for(c)
    assert [(x.name, x.host) for x in adv] == [("INTERNAL", "broker-1"), ("EXTERNAL", "lb.example")]
    assert inter_broker_listener(c) == Listener("INTERNAL", "broker-1", 19092, "PLAINTEXT")


@pytest.mark.parametrize("kv,why", [
    # a controller whose controller listener is not bound
    ({"listeners": "PLAINTEXT://127.0.0.1:9092", "controller.quorum.voters": VOTERS},
     "controller.listener.names must contain at least one value appearing in the 'listeners'"),
    ({"listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
      "controller.listener.names": "CONTROLLER,CTRL2", "controller.quorum.voters": VOTERS,
      "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,CTRL2:PLAINTEXT"},
     "controller.listener.names must only contain values appearing in the 'listeners'"),
    # a broker-only node listing a controller listener
    ({"process.roles": "broker", "node.id": "4", "controller.quorum.voters": VOTERS,
      "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"},
     "must not contain a value appearing in the 'listeners' configuration when running KRaft "
     "with just the broker role"),
    ({"process.roles": "broker", "controller.listener.names": "", "controller.quorum.voters": VOTERS},
     "controller.listener.names must contain at least one value when running KRaft with just "
     "the broker role"),
    ({"process.roles": "broker", "controller.quorum.voters": VOTERS,
      "controller.listener.names": "CTRL",
      "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT"},
     "Controller listener with name CTRL defined in controller.listener.names not found in "
     "listener.security.protocol.map"),
    # the inter-broker listener must be advertised
    ({"listeners": "PLAINTEXT://127.0.0.1:9092", "inter.broker.listener.name": "INTERNAL"},
     "inter.broker.listener.name must be a listener name defined in advertised.listeners. The "
     "valid options based on currently configured listeners are PLAINTEXT"),
    ({"advertised.listeners": "CONTROLLER://127.0.0.1:9093"},
     "The advertised.listeners config must not contain KRaft controller listeners"),
    ({"listeners": "CONTROLLER://127.0.0.1:9093"},
     "There must be at least one advertised listener"),
    ({"listeners": "PLAINTEXT://0.0.0.0:9092"},
     "advertised.listeners cannot use the nonroutable meta-address 0.0.0.0"),
    ({"advertised.listeners": "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9094"},
     "advertised.listeners listener names must be equal to or a subset of the ones defined in "
     "listeners"),
    # a controller-only node
    ({"process.roles": "controller", "controller.quorum.voters": VOTERS,
      "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"},
     "The listeners config must only contain KRaft controller listeners from "
     "controller.listener.names when process.roles=controller"),
    ({"process.roles": "controller", "controller.quorum.voters": VOTERS,
      "listeners": "CONTROLLER://127.0.0.1:9093", "advertised.listeners": "CONTROLLER://x:1"},
     "The advertised.listeners config must be empty when process.roles=controller"),
    # node-to-node SASL: Kafka's checks of the inter-broker mechanism and listener name
    ({"listeners": "SASL_SSL://127.0.0.1:9092", "inter.broker.listener.name": "SASL_SSL",
      "sasl.enabled.mechanisms": "PLAIN"},
     "sasl.mechanism.inter.broker.protocol must be included in sasl.enabled.mechanisms when "
     "SASL is used for inter-broker communication"),
    ({"listeners": "SASL_SSL://127.0.0.1:9092", "security.inter.broker.protocol": "SASL_SSL",
      "inter.broker.listener.name": "SASL_SSL", "sasl.enabled.mechanisms": "PLAIN"},
     "Only one of inter.broker.listener.name and security.inter.broker.protocol should be set."),
])
def test_startup_checks(kv: dict[str, str], why: str) -> None:
    with pytest.raises(ConfigError) as e:
        listeners_for(BrokerConfig(kv))
    assert why in str(e.value)


def test_ssl_listener_beside_plaintext() -> None:
    bind, adv = listeners_for(BrokerConfig({
        "listeners": "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9094,"
                     "SASL_SSL://127.0.0.1:9095,SASL_PLAINTEXT://127.0.0.1:9096"}))
    assert [(x.name, x.security_protocol) for x in bind] == [
        ("PLAINTEXT", "PLAINTEXT"), ("SSL", "SSL"), ("SASL_SSL", "SASL_SSL"),
        ("SASL_PLAINTEXT", "SASL_PLAINTEXT")]


def test_controller_only_node() -> None:
    c = BrokerConfig({"process.roles": "controller", "controller.quorum.voters": VOTERS,
                      "listeners": "CONTROLLER://127.0.0.1:9093"})
    bind, adv = listeners_for(c)
    assert [x.port for x in bind] == [9093] and adv == []


def test_empty_host_advertises_the_host_name() -> None:
    import socket
    _, adv = listeners_for(BrokerConfig({"listeners": "PLAINTEXT://:9092"}))
    assert adv == [Listener("PLAINTEXT", socket.gethostname(), 9092, "PLAINTEXT")]


def test_new_config_names_are_known_with_kafka_defaults() -> None:
    c = BrokerConfig()
    assert c.get("controller.listener.names") == "CONTROLLER"
    assert c.get("broker.heartbeat.interval.ms") == "2000"
    assert c.get("broker.session.timeout.ms") == "9000"
    assert c.get("metadata.log.max.record.bytes.between.snapshots") == "20971520"
    assert c.get("controller.quorum.fetch.timeout.ms") == "2000"
    assert c.get("initial.broker.registration.timeout.ms") == "60000"
    with pytest.raises(ConfigError, match="broker.session.timeout.ms"):
        BrokerConfig({"broker.session.timeout.ms": "soon"})


@pytest.mark.parametrize("kv,why", [
    ({"process.roles": "controller", "listeners": "CONTROLLER://127.0.0.1:9093"},
     "If using process.roles=controller, controller.quorum.voters must contain a parseable set"),
    ({"process.roles": "broker"},
     "If using process.roles=broker, controller.quorum.voters must contain a parseable set"),
    ({"node.id": "4", "controller.quorum.voters": VOTERS,
      "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"},
     "the node id 4 must be included in the set of voters controller.quorum.voters=[1, 2, 3]"),
    ({"process.roles": "broker", "node.id": "2", "controller.quorum.voters": VOTERS},
     "If process.roles contains just the 'broker' role, the node id 2 must not be included"),
    ({"controller.quorum.voters": "1@127.0.0.1"}, "has no ':port'"),
])
def test_node_checks(kv: dict[str, str], why: str) -> None:
    with pytest.raises(ConfigError) as e:
        validate_node(BrokerConfig(kv))
    assert why in str(e.value)


def test_valid_nodes() -> None:
    assert validate_node(BrokerConfig())[1][0].port == 9092  # the embedded default
    broker_only = validate_node(BrokerConfig({"process.roles": "broker", "node.id": "4",
                                              "controller.quorum.voters": VOTERS}))
    assert [x.name for x in broker_only[0]] == ["PLAINTEXT"]
    voter = validate_node(BrokerConfig({
        "node.id": "2", "controller.quorum.voters": VOTERS,
        "listeners": "PLAINTEXT://127.0.0.1:9192,CONTROLLER://127.0.0.1:9193"}))
    assert [x.port for x in voter[0]] == [9192, 9193]


def test_tls_and_sasl_between_nodes_accepted() -> None:
    """Controller and inter-broker listeners may be SSL / SASL_SSL (they were refused before
    node-to-node security existed); security.inter.broker.protocol names the listener."""
    bind, adv = validate_node(BrokerConfig({
        "process.roles": "broker,controller", "node.id": "1", "controller.quorum.voters": VOTERS,
        "listeners": "SASL_SSL://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
        "listener.security.protocol.map": "SASL_SSL:SASL_SSL,CONTROLLER:SSL",
        "security.inter.broker.protocol": "SASL_SSL", "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN"}))
    assert [(x.name, x.security_protocol) for x in bind] == [("SASL_SSL", "SASL_SSL"),
                                                             ("CONTROLLER", "SSL")]
    assert controller_listeners(BrokerConfig({
        "process.roles": "controller", "node.id": "1", "controller.quorum.voters": VOTERS,
        "listeners": "CONTROLLER://127.0.0.1:9093",
        "listener.security.protocol.map": "CONTROLLER:SASL_SSL"}))[0].security_protocol == \
        "SASL_SSL"
