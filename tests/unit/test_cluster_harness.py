"""The node configs SamsaCluster and `samsa cluster up` write: Kafka's KRaft config names, one
CONTROLLER listener per voter, the voters string every node shares, port layout and roles."""

from __future__ import annotations

from pathlib import Path

import pytest

from samsa.config import read_properties
from samsa.testing.cluster import SamsaCluster, plan_nodes, random_cluster_id, voters_of, write_config


def test_combined_nodes_with_base_port(tmp_path: Path) -> None:
    specs = plan_nodes(3, "broker,controller", tmp_path, base_port=19092)
    assert [(s.node_id, s.port, s.controller_port) for s in specs] == [
        (1, 19092, 19093), (2, 19094, 19095), (3, 19096, 19097)]
    voters = voters_of(specs)
    assert voters == "1@127.0.0.1:19093,2@127.0.0.1:19095,3@127.0.0.1:19097"
    props = read_properties(str(write_config(specs[1], voters, {"num.partitions": "3"})))
    assert props == {
        "process.roles": "broker,controller", "node.id": "2",
        "controller.quorum.voters": voters, "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listeners": "PLAINTEXT://127.0.0.1:19094,CONTROLLER://127.0.0.1:19095",
        "advertised.listeners": "PLAINTEXT://127.0.0.1:19094",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(tmp_path / "node-2" / "logs"), "num.partitions": "3"}


def test_separate_controllers_and_brokers(tmp_path: Path) -> None:
    specs = plan_nodes(5, "controller", tmp_path, controllers=3)
    assert [s.roles for s in specs] == [("controller",)] * 3 + [("broker",)] * 2
    voters = voters_of(specs)
    assert [v.split("@")[0] for v in voters.split(",")] == ["1", "2", "3"]
    ctrl = specs[0].properties(voters, {})
    assert ctrl["listeners"].startswith("CONTROLLER://") and "PLAINTEXT" not in ctrl["listeners"]
    assert "advertised.listeners" not in ctrl
    broker = specs[4].properties(voters, {})
    assert broker["process.roles"] == "broker"
    assert broker["listeners"] == f"PLAINTEXT://127.0.0.1:{specs[4].port}"
    assert broker["controller.quorum.voters"] == voters
    c = SamsaCluster(4, controllers=[2, 3], data_dir=tmp_path / "c")
    assert c.bootstrap.count(",") == 3 and c.bootstrap_controller.count(",") == 1
    assert [n.node_id for n in c.controllers] == [2, 3]


@pytest.mark.parametrize("n, roles, controllers", [
    (0, "broker,controller", None), (3, "broker", None), (3, "broker,zookeeper", None),
    (3, "controller", [4]), (3, "controller", 0)])
def test_bad_plans(tmp_path: Path, n: int, roles: str, controllers: object) -> None:
    with pytest.raises(ValueError):
        plan_nodes(n, roles, tmp_path, controllers)  # type: ignore[arg-type]


def test_cluster_id_kept_in_data_dir(tmp_path: Path) -> None:
    cid = random_cluster_id()
    assert len(cid) == 22 and "=" not in cid
    (tmp_path / "cluster.id").write_text(cid + "\n")
    assert SamsaCluster(3, data_dir=tmp_path).cluster_id == cid


def test_restart_keeps_ports(tmp_path: Path) -> None:
    first = SamsaCluster(3, data_dir=tmp_path)
    for spec in first.specs:
        write_config(spec, first.voters, {})
    again = SamsaCluster(3, data_dir=tmp_path)
    assert again.voters == first.voters and again.bootstrap == first.bootstrap
