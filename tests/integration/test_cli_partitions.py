"""`samsa partitions reassign|elect-leaders`, `samsa log-dirs describe` and the report filters of
`samsa topics describe`, run against a real 3-node cluster (one per module): Kafka's JSON formats,
messages and exit codes; the throttle configs --execute sets and --verify clears; the broker's
DescribeTopicPartitions and DescribeLogDirs answers for RF=3 topics; a reassignment carried out
by the controller and replication, one held in progress by a frozen broker and cancelled."""

from __future__ import annotations

import contextlib
import io
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

from samsa.cli.main import main
from samsa.testing import SamsaCluster
from tests.wire import Wire

pytestmark = pytest.mark.timeout(180)

T3 = "rf3"  # 3 partitions, RF 3
T2 = "rf2"  # 2 partitions, RF 2


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def cluster() -> Iterator[SamsaCluster]:
    with SamsaCluster(3, overrides={"broker.session.timeout.ms": "6000",
                                    "broker.heartbeat.interval.ms": "500"}) as c:
        c.wait_brokers(3)
        admin = AdminClient({"bootstrap.servers": c.bootstrap})
        futures = admin.create_topics([
            NewTopic(T3, 3, 3), NewTopic(T2, 2, 2),
            NewTopic("solo", 1, replica_assignment=[[2]]),
            NewTopic("pair", 1, replica_assignment=[[1, 2]]),
            NewTopic("mover", 1, replica_assignment=[[1, 2]]),
            NewTopic("atmin", 1, replica_assignment=[[3]]),
            NewTopic("minisr2", 1, replica_assignment=[[1]], config={"min.insync.replicas": "2"})])
        for f in futures.values():
            f.result(30)
        for t, n in ((T3, 3), (T2, 2), ("solo", 1), ("pair", 1), ("mover", 1), ("atmin", 1),
                     ("minisr2", 1)):
            wait_for(lambda t=t, n=n: len([p for p in metadata(c, [t])[t].values()
                                           if p["leader"] >= 0]) == n, f"leaders of {t}")
        yield c


def bs(c: SamsaCluster) -> str:
    return c.bootstrap.split(",")[0]


def wait_for(fn: Any, what: str, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            got = fn()
        except KeyError:  # the node's metadata has not got the new topic or partition yet
            got = None
        if got:
            return got
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        time.sleep(0.2)


def metadata(c: SamsaCluster, topics: list[str], address: str | None = None
             ) -> dict[str, dict[int, dict[str, Any]]]:
    """Metadata v12 at one node: topic -> partition -> leader, epoch, replicas, isr, offline."""
    w = Wire(address or bs(c))
    try:
        resp = w.request(3, 12, {"topics": [{"name": t} for t in topics],
                                 "allow_auto_topic_creation": False,
                                 "include_topic_authorized_operations": False})
    finally:
        w.close()
    return {t.name: {int(p.partition_index): {
        "leader": int(p.leader_id), "epoch": int(p.leader_epoch),
        "replicas": list(p.replica_nodes), "isr": list(p.isr_nodes),
        "offline": list(p.offline_replicas)} for p in t.partitions} for t in resp.topics}


def live_brokers(c: SamsaCluster) -> set[int]:
    """The brokers node 1's Metadata lists (registered and unfenced)."""
    w = Wire(bs(c))
    try:
        resp = w.request(3, 12, {"topics": [], "allow_auto_topic_creation": False,
                                 "include_topic_authorized_operations": False})
    finally:
        w.close()
    return {int(b.node_id) for b in resp.brokers}


def write(tmp_path: Path, name: str, data: Any) -> str:
    p = tmp_path / name
    p.write_text(data if isinstance(data, str) else json.dumps(data))
    return str(p)


def topic_configs(c: SamsaCluster, topic: str) -> dict[str, str]:
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    res = ConfigResource(ResourceType.TOPIC, topic)
    entries = admin.describe_configs([res])[res].result(30)
    return {k: e.value for k, e in entries.items()}


def broker_config(c: SamsaCluster, broker: int, key: str) -> tuple[str, bool]:
    """(value, is_default) of a broker setting as that broker describes it."""
    w = Wire(c.node(broker).bootstrap)
    try:
        resp = w.request(32, 4, {"resources": [{"resource_type": 4, "resource_name": str(broker),
                                                "configuration_keys": [key]}],
                                 "include_synonyms": False, "include_documentation": False})
    finally:
        w.close()
    (entry,) = resp.results[0].configs
    return entry.value, bool(entry.config_source == 5)


# ---- --generate ----------------------------------------------------------------------------------
def _blocks(out: str) -> tuple[dict[str, Any], dict[str, Any]]:
    lines = out.splitlines()
    assert lines[0] == "Current partition replica assignment"
    assert lines[2] == "" and lines[3] == "Proposed partition reassignment configuration"
    assert len(lines) == 5
    return json.loads(lines[1]), json.loads(lines[4])


def test_generate(cluster: SamsaCluster, tmp_path: Path) -> None:
    f = write(tmp_path, "move.json", {"topics": [{"topic": T3}, {"topic": T2}], "version": 1})
    # 9 is not a broker: left out, as Kafka does
    code, out, err = run("partitions", "reassign", "--bootstrap-server", bs(cluster),
                         "--generate", "--topics-to-move-json-file", f, "--broker-list", "3,2,1,9")
    assert code == 0, err
    current, proposed = _blocks(out)
    md = metadata(cluster, [T3, T2])
    assert current == {"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": md[t][p]["replicas"],
         "log_dirs": ["any"] * len(md[t][p]["replicas"])} for t in (T2, T3) for p in sorted(md[t])]}
    assert [(e["topic"], e["partition"]) for e in proposed["partitions"]] == \
        [(t, p) for t in (T2, T3) for p in sorted(md[t])]
    for e in proposed["partitions"]:
        rf = 3 if e["topic"] == T3 else 2
        assert len(e["replicas"]) == rf and len(set(e["replicas"])) == rf
        assert set(e["replicas"]) <= {1, 2, 3} and e["log_dirs"] == ["any"] * rf
    # the first replicas of a topic's partitions go round-robin over the brokers
    firsts = [e["replicas"][0] for e in proposed["partitions"] if e["topic"] == T3]
    assert sorted(firsts) == [1, 2, 3]

    code, out, err = run("partitions", "reassign", "--bootstrap-server", bs(cluster),
                         "--generate", "--topics-to-move-json-file", f, "--broker-list", "1,2")
    assert code == 1 and out == ""
    assert "Replication factor: 3 larger than available brokers: 2." in err


@pytest.mark.parametrize(("content", "brokers", "message"), [
    ("{not json", "1,2,3", "The input string is not a valid JSON"),
    ({"topics": [{"topic": T3}, {"topic": T3}]}, "1,2,3",
     f"List of topics to reassign contains duplicate entries: {T3}"),
    ({"topics": [{"name": T3}]}, "1,2,3", "No such field exists: `topic`"),
    ({"topics": [{"topic": T3}], "version": 2}, "1,2,3", "Not supported version field value 2"),
    ({"topics": [{"topic": T3}]}, "1,1,2", "Broker list contains duplicate entries: [1]"),
    ({"topics": [{"topic": T3}]}, "1,x", 'For input string: "x"'),
    ({"topics": [{"topic": "nope"}]}, "1,2,3", "Topic nope not found."),
])
def test_generate_bad_input(cluster: SamsaCluster, tmp_path: Path, content: Any, brokers: str,
                            message: str) -> None:
    f = write(tmp_path, "move.json", content)
    code, out, err = run("partitions", "reassign", "--bootstrap-server", bs(cluster),
                         "--generate", "--topics-to-move-json-file", f, "--broker-list", brokers)
    assert code == 1 and out == ""
    assert message in err


# ---- --execute / --verify / --cancel / --list ----------------------------------------------------
def _plan(entries: list[tuple[str, int, list[int]]]) -> dict[str, Any]:
    return {"version": 1, "partitions": [{"topic": t, "partition": p, "replicas": r}
                                         for t, p, r in entries]}


@pytest.mark.parametrize(("content", "message"), [
    ("[1, 2", "The input string is not a valid JSON"),
    ({"version": 1, "partitions": []}, "Partition reassignment list cannot be empty"),
    ({"version": 1}, "Partition reassignment list cannot be empty"),
    (_plan([(T3, 0, [])]), "Partition replica list cannot be empty"),
    (_plan([(T3, 0, [1, 2, 3]), (T3, 0, [3, 2, 1])]),
     f"Partition reassignment contains duplicate topic partitions: {T3}-0"),
    (_plan([(T3, 0, [1, 2, 1])]),
     f"Partition replica lists may not contain duplicate entries: {T3}-0 contains multiple "
     "entries for 1"),
    ({"version": 1, "partitions": [{"topic": T3, "partition": 0, "replicas": [1, 2],
                                    "log_dirs": ["any"]}]},
     f"Size of replicas list [1, 2] is different from size of log dirs list [any] for partition "
     f"{T3}-0"),
    ({"version": 1, "partitions": [{"topic": T3, "replicas": [1]}]},
     "No such field exists: `partition`"),
    ({"version": 1, "partitions": [{"topic": T3, "partition": "0", "replicas": [1]}]},
     'Expected `int` value, received "0"'),
    ({"version": 3, "partitions": []}, "Not supported version field value 3"),
    (_plan([(T3, 0, [1, 2, 7])]), "Unknown broker id 7"),
    (_plan([("nope", 0, [1])]), "Topic nope not found."),
    (_plan([(T3, 9, [1])]), f"Unable to find partition: {T3}-9"),
])
def test_execute_bad_input(cluster: SamsaCluster, tmp_path: Path, content: Any,
                           message: str) -> None:
    f = write(tmp_path, "plan.json", content)
    code, out, err = run("partitions", "reassign", "--bootstrap-server", bs(cluster),
                         "--execute", "--reassignment-json-file", f)
    assert code == 1, (out, err)
    assert message in err
    assert "Successfully started" not in out


def test_usage_errors(cluster: SamsaCluster, tmp_path: Path) -> None:
    f = write(tmp_path, "plan.json", _plan([(T3, 0, [1, 2, 3])]))
    code, _, err = run("partitions", "reassign", "--bootstrap-server", bs(cluster), "--verify",
                       "--reassignment-json-file", f, "--throttle", "10")
    assert code == 2 and 'Option "--throttle" can\'t be used with action "--verify"' in err
    code, _, err = run("partitions", "reassign", "--bootstrap-server", bs(cluster), "--execute")
    assert code == 2 and 'Missing required argument "[reassignment-json-file]"' in err


def test_execute_throttle_verify_clears(cluster: SamsaCluster, tmp_path: Path) -> None:
    """A plan that keeps T2's replica sets (so it is complete however reassignment is built):
    --execute --throttle sets Kafka's throttle configs, --verify reports the partitions
    completed and removes them."""
    md = metadata(cluster, [T2])[T2]
    plan = _plan([(T2, p, md[p]["replicas"]) for p in sorted(md)])
    f = write(tmp_path, "plan.json", plan)
    code, out, err = run("partitions", "reassign", "--bootstrap-server", bs(cluster),
                         "--execute", "--reassignment-json-file", f, "--throttle", "1048576")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[:3] == ["Current partition replica assignment", "", json.dumps({
        "version": 1, "partitions": [{"topic": T2, "partition": p, "replicas": md[p]["replicas"],
                                      "log_dirs": ["any"] * 2} for p in sorted(md)]},
        separators=(",", ":"))]
    assert lines[4] == "Save this to use as the --reassignment-json-file option during rollback"
    assert lines[5].startswith("Warning: You must run --verify periodically")
    assert lines[6] == "The inter-broker throttle limit was set to 1048576 B/s"
    assert lines[7] == f"Successfully started partition reassignments for {T2}-0,{T2}-1"

    # Kafka's throttle lists: every current replica throttled as a leader, nothing moves in
    leader = ",".join(sorted(f"{p}:{b}" for p in md for b in md[p]["replicas"]))
    cfg = topic_configs(cluster, T2)
    assert cfg["leader.replication.throttled.replicas"] == leader
    assert cfg["follower.replication.throttled.replicas"] == ""
    involved = sorted({b for p in md for b in md[p]["replicas"]})
    for b in involved:
        assert broker_config(cluster, b, "leader.replication.throttled.rate") == ("1048576", False)
        assert broker_config(cluster, b, "follower.replication.throttled.rate") == \
            ("1048576", False)

    code, out, err = run("partitions", "reassign", "--bootstrap-server", bs(cluster),
                         "--verify", "--reassignment-json-file", f, "--wait",
                         "--wait-timeout", "30")
    assert code == 0, err
    assert out.splitlines() == [
        "Status of partition reassignment:",
        f"Reassignment of partition {T2}-0 is completed.",
        f"Reassignment of partition {T2}-1 is completed.",
        "Clearing broker-level throttles on brokers 1,2,3",
        f"Clearing topic-level throttles on topic {T2}"]
    assert "2/2 partitions reassigned" in err.splitlines()[-1]
    cfg = topic_configs(cluster, T2)
    assert cfg["leader.replication.throttled.replicas"] == ""
    for b in (1, 2, 3):  # each broker applies the cleared setting when its metadata arrives
        wait_for(lambda b=b: broker_config(cluster, b, "leader.replication.throttled.rate") ==
                 ("9223372036854775807", True), f"broker {b}'s throttle cleared", 10)


def test_verify_reports_a_different_replica_set(cluster: SamsaCluster, tmp_path: Path) -> None:
    md = metadata(cluster, [T3])[T3]
    other = list(reversed(md[0]["replicas"]))
    f = write(tmp_path, "plan.json", _plan([(T3, 0, other)]))
    code, out, err = run("partitions", "reassign", "--bootstrap-server", bs(cluster),
                         "--verify", "--reassignment-json-file", f, "--preserve-throttles")
    assert code == 0, err
    assert out.splitlines() == [
        "Status of partition reassignment:",
        f"There is no active reassignment of partition {T3}-0, but replica set is "
        f"{','.join(map(str, md[0]['replicas']))} rather than {','.join(map(str, other))}."]


def test_list_and_cancel_with_nothing_active(cluster: SamsaCluster, tmp_path: Path) -> None:
    code, out, err = run("partitions", "reassign", "--bootstrap-server", bs(cluster), "--list")
    assert (code, out) == (0, "No partition reassignments found.\n"), err
    f = write(tmp_path, "plan.json", _plan([(T3, 0, [1, 2, 3])]))
    code, out, err = run("partitions", "reassign", "--bootstrap-server", bs(cluster),
                         "--cancel", "--reassignment-json-file", f, "--preserve-throttles")
    assert code == 0, err
    assert out.splitlines() == ["None of the specified partition reassignments are active.",
                                "None of the specified partition moves are active."]


def test_reassignment_moves_replicas(cluster: SamsaCluster, tmp_path: Path) -> None:
    """mover-0 moves from [1, 2] to [3, 1]: --verify --wait sees it complete, the metadata shows
    the new replica set; whatever happens, the reassignment is cancelled afterwards."""
    f = write(tmp_path, "plan.json", _plan([("mover", 0, [3, 1])]))
    try:
        code, out, err = run("partitions", "reassign", "--bootstrap-server", bs(cluster),
                             "--execute", "--reassignment-json-file", f)
        assert code == 0, err
        code, out, err = run("partitions", "reassign", "--bootstrap-server", bs(cluster),
                             "--verify", "--reassignment-json-file", f, "--wait",
                             "--wait-timeout", "60")
        assert code == 0, (out, err)
        assert "Reassignment of partition mover-0 is completed." in out
        assert metadata(cluster, ["mover"])["mover"][0]["replicas"] == [3, 1]
    finally:
        run("partitions", "reassign", "--bootstrap-server", bs(cluster), "--cancel",
            "--reassignment-json-file", f)


def test_reassignment_in_progress_list_describe_cancel(cluster: SamsaCluster,
                                                       tmp_path: Path) -> None:
    """A reassignment adding a replica on a frozen broker cannot finish: --list shows it adding,
    --verify in progress (throttles kept), describe its Adding Replicas (and, as Kafka, not under-
    replicated: the adding replica does not count), a second --execute is refused, --cancel
    restores the old replica set."""
    ctrl = cluster.active_controller()
    x = max(n for n in (2, 3) if n != ctrl)
    admin = AdminClient({"bootstrap.servers": bs(cluster)})
    admin.create_topics([NewTopic("held", 1, replica_assignment=[[1]])])["held"].result(30)
    wait_for(lambda: metadata(cluster, ["held"])["held"][0]["leader"] == 1, "held-0 led by 1")
    f = write(tmp_path, "plan.json", _plan([("held", 0, [1, x])]))
    cluster.node(x).pause()
    try:
        code, out, err = run("partitions", "reassign", "--bootstrap-server", bs(cluster),
                             "--execute", "--reassignment-json-file", f)
        assert code == 0, err
        wait_for(lambda: x not in live_brokers(cluster), f"broker {x} fenced", timeout=30)
        code, out, err = run("partitions", "reassign", "--bootstrap-server", bs(cluster), "--list")
        assert code == 0, err
        lines = out.splitlines()
        assert lines[0] == "Current partition reassignments:"
        assert lines[1].startswith("held-0: replicas: ") and f" adding: {x}." in lines[1]
        code, out, err = run("partitions", "reassign", "--bootstrap-server", bs(cluster),
                             "--verify", "--reassignment-json-file", f)
        assert out.splitlines() == ["Status of partition reassignment:",
                                    "Reassignment of partition held-0 is still in progress."]
        code, out, err = run("partitions", "reassign", "--bootstrap-server", bs(cluster),
                             "--verify", "--reassignment-json-file", f, "--wait",
                             "--wait-timeout", "1")
        assert code == 1 and "Reassignment of partition held-0 is still in progress." in out
        assert "the reassignment is not done after 1 s (0 of 1 partitions)" in err
        assert "0/1 partitions reassigned" in err
        code, out, err = run("topics", "describe", "held", "--bootstrap-server", bs(cluster))
        assert code == 0, err
        assert f"\tAdding Replicas: {x}\tRemoving Replicas: \t" in out
        assert "ReplicationFactor: 1\t" in out
        assert _reported(cluster, "--under-replicated-partitions", ["held"]) == []
        code, out, err = run("partitions", "reassign", "--bootstrap-server", bs(cluster),
                             "--execute", "--reassignment-json-file", f)
        assert code == 1 and "Cannot execute because there is an existing partition assignment" \
            in err
        code, out, err = run("partitions", "reassign", "--bootstrap-server", bs(cluster),
                             "--cancel", "--reassignment-json-file", f, "--preserve-throttles")
        assert code == 0, err
        assert out.splitlines()[0] == "Successfully cancelled partition reassignment for: held-0"
        wait_for(lambda: metadata(cluster, ["held"])["held"][0]["replicas"] == [1],
                 "held-0 back on [1]")
    finally:
        cluster.node(x).resume()
        run("partitions", "reassign", "--bootstrap-server", bs(cluster), "--cancel",
            "--reassignment-json-file", f, "--preserve-throttles")
        cluster.wait_brokers(3)


def test_throttle_lists_and_plan_format() -> None:
    """Kafka's rules without a cluster: an ongoing reassignment's sources (its replicas less the
    ones being added) stay the sources when it is reassigned again; lists are sorted as text
    (Kafka's TreeSet of strings); plans are sorted by topic, then partition number."""
    from samsa.cli import _reassign as R

    moves = R.move_map({("t", 0): ([3, 1, 2], [3])}, {("t", 0): [4, 1], ("t", 10): [1, 2]},
                       {("t", 0): [3, 1, 2], ("t", 10): [2, 3]})
    assert R.leader_throttles(moves) == {"t": "0:1,0:2,10:2,10:3"}
    assert R.follower_throttles(moves) == {"t": "0:4,10:1"}
    assert R.reassigning_brokers(moves) == [1, 2, 3, 4]
    assert json.loads(R.format_plan({("t", 10): [1], ("t", 2): [2], ("a", 5): [3]}))[
        "partitions"] == [
        {"topic": "a", "partition": 5, "replicas": [3], "log_dirs": ["any"]},
        {"topic": "t", "partition": 2, "replicas": [2], "log_dirs": ["any"]},
        {"topic": "t", "partition": 10, "replicas": [1], "log_dirs": ["any"]}]


# ---- throttle configs ----------------------------------------------------------------------------
def test_throttle_configs_are_validated(cluster: SamsaCluster) -> None:
    code, _, err = run("topics", "alter", T3, "--bootstrap-server", bs(cluster), "--config",
                       "leader.replication.throttled.replicas=0:1,bogus")
    assert code == 1
    assert ("leader.replication.throttled.replicas must be the literal '*' or a list of replicas "
            "in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],...") in err
    code, _, err = run("topics", "alter", T3, "--bootstrap-server", bs(cluster), "--config",
                       "follower.replication.throttled.replicas=*")
    assert code == 0, err
    assert topic_configs(cluster, T3)["follower.replication.throttled.replicas"] == "*"
    run("topics", "alter", T3, "--bootstrap-server", bs(cluster), "--delete-config",
        "follower.replication.throttled.replicas")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry

    res = ConfigResource(ResourceType.BROKER, "2", incremental_configs=[ConfigEntry(
        "follower.replication.throttled.rate", "-5",
        incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(Exception, match="Value must be at least 0"):
        admin.incremental_alter_configs([res])[res].result(30)


# ---- elect-leaders -------------------------------------------------------------------------------
def test_elect_leaders(cluster: SamsaCluster, tmp_path: Path) -> None:
    md = metadata(cluster, [T3])[T3]
    preferred = [p for p in sorted(md) if md[p]["leader"] == md[p]["replicas"][0]]
    assert preferred, md
    p = preferred[0]
    code, out, err = run("partitions", "elect-leaders", "--bootstrap-server", bs(cluster),
                         "--election-type", "preferred", "--topic", T3, "--partition", str(p))
    assert (code, out) == (0, f"Valid replica already elected for partitions {T3}-{p}\n"), err

    f = write(tmp_path, "el.json", {"partitions": [{"topic": T3, "partition": p},
                                                   {"topic": "nope", "partition": 0}]})
    code, out, err = run("partitions", "elect-leaders", "--bootstrap-server", bs(cluster),
                         "--election-type", "PREFERRED", "--path-to-json-file", f)
    assert code == 1
    assert out.splitlines() == [
        f"Valid replica already elected for partitions {T3}-{p}",
        "Error completing leader election (PREFERRED) for partition: nope-0: "
        "org.apache.kafka.common.errors.UnknownTopicOrPartitionException: No such topic as nope"]
    assert "1 replica(s) could not be elected" in err


def test_preferred_election_moves_leadership_back(cluster: SamsaCluster) -> None:
    """pref-0 on [3, 1]: broker 3 dies, 1 takes over; once 3 is back in the ISR, a PREFERRED
    election hands leadership back to it."""
    admin = AdminClient({"bootstrap.servers": bs(cluster)})
    admin.create_topics([NewTopic("pref", 1, replica_assignment=[[3, 1]])])["pref"].result(30)
    part = lambda: metadata(cluster, ["pref"])["pref"][0]  # noqa: E731
    wait_for(lambda: part()["leader"] == 3 and sorted(part()["isr"]) == [1, 3],
             "pref-0 led by 3 with 1 in sync")
    cluster.node(3).kill()
    wait_for(lambda: part()["leader"] == 1, "pref-0 failed over to 1", timeout=30)
    cluster.node(3).start()
    cluster.wait_brokers(3)
    wait_for(lambda: 3 in part()["isr"], "broker 3 back in pref-0's ISR", timeout=30)
    assert part()["leader"] == 1
    code, out, err = run("partitions", "elect-leaders", "--bootstrap-server", bs(cluster),
                         "--election-type", "PREFERRED", "--topic", "pref", "--partition", "0")
    assert (code, out) == (0, "Successfully completed leader election (PREFERRED) for "
                              "partitions pref-0\n"), err
    assert part()["leader"] == 3


@pytest.mark.parametrize(("argv", "content", "code", "message"), [
    ([], None, 2, "One and only one of the following options is required: topic, "
                  "all-topic-partitions, path-to-json-file"),
    (["--topic", T3], None, 2, "Missing required option(s): partition"),
    (["--partition", "0", "--all-topic-partitions"], None, 2,
     "Option partition is only allowed if topic is used"),
    (["--all-topic-partitions", "--topic", T3, "--partition", "0"], None, 2,
     "One and only one of the following options is required"),
    (["--path-to-json-file"], "{oops", 1, "Replica election data is empty"),
    (["--path-to-json-file"], {"topics": []}, 1,
     'Replica election data is missing "partitions" field'),
    (["--path-to-json-file"], {"partitions": [{"topic": T3, "partition": 0},
                                              {"topic": T3, "partition": 0}]}, 1,
     f"Replica election data contains duplicate partitions: [{T3}-0]"),
])
def test_elect_leaders_bad_input(cluster: SamsaCluster, tmp_path: Path, argv: list[str],
                                 content: Any, code: int, message: str) -> None:
    if content is not None:
        argv = argv + [write(tmp_path, "el.json", content)]
    got, out, err = run("partitions", "elect-leaders", "--bootstrap-server", bs(cluster),
                        "--election-type", "preferred", *argv)
    assert got == code and out == ""
    assert message in err


# ---- DescribeTopicPartitions / DescribeLogDirs ---------------------------------------------------
def describe_topic_partitions(address: str, topics: list[str]) -> dict[str, dict[int, Any]]:
    w = Wire(address)
    try:
        resp = w.request(75, 0, {"topics": [{"name": t} for t in topics],
                                 "response_partition_limit": 2000, "cursor": None})
    finally:
        w.close()
    out = {}
    for t in resp.topics:
        assert t.error_code == 0, (t.name, t.error_code)
        out[t.name] = {int(p.partition_index): p for p in t.partitions}
    return out


def test_describe_topic_partitions_matches_the_image(cluster: SamsaCluster) -> None:
    """Every node answers DescribeTopicPartitions for an RF=3 topic as its Metadata says:
    replicas, ISR, leader and leader epoch; no offline replica while all brokers are up."""
    for node in cluster.nodes:
        md = metadata(cluster, [T3], node.bootstrap)[T3]
        dtp = describe_topic_partitions(node.bootstrap, [T3])[T3]
        assert sorted(dtp) == [0, 1, 2]
        for p, part in dtp.items():
            assert part.error_code == 0
            assert list(part.replica_nodes) == md[p]["replicas"] and len(md[p]["replicas"]) == 3
            assert list(part.isr_nodes) == md[p]["isr"]
            assert int(part.leader_id) == md[p]["leader"] in md[p]["replicas"]
            assert int(part.leader_epoch) == md[p]["epoch"] >= 0
            assert list(part.offline_replicas) == []


def _log_dirs(out: str) -> dict[int, dict[str, dict[str, Any]]]:
    lines = out.splitlines()
    assert lines[0] == "Querying brokers for log directories information"
    assert lines[1].startswith("Received log directory information from brokers ")
    doc = json.loads(lines[2])
    assert doc["version"] == 1
    got: dict[int, dict[str, dict[str, Any]]] = {}
    for b in doc["brokers"]:
        for d in b["logDirs"]:
            assert d["error"] is None and Path(d["logDir"]).is_absolute()
            for p in d["partitions"]:
                assert p["isFuture"] is False and p["offsetLag"] == 0
                got.setdefault(b["broker"], {})[p["partition"]] = p
    return got


def test_log_dirs_describe(cluster: SamsaCluster) -> None:
    p = Producer({"bootstrap.servers": cluster.bootstrap})
    for i in range(30):
        p.produce(T3, value=b"x" * 100, partition=i % 3)
    assert p.flush(30) == 0
    code, out, err = run("log-dirs", "describe", "--bootstrap-server", bs(cluster),
                         "--topic-list", T3)
    assert code == 0, err
    assert out.splitlines()[1] == "Received log directory information from brokers 1,2,3"
    got = _log_dirs(out)
    md = metadata(cluster, [T3])[T3]
    for part, info in md.items():
        name = f"{T3}-{part}"
        holders = {b for b, parts in got.items() if name in parts}
        assert info["leader"] in holders and holders <= set(info["replicas"])
        assert got[info["leader"]][name]["size"] > 0
    assert all(k.startswith(f"{T3}-") for parts in got.values() for k in parts)

    code, out, err = run("log-dirs", "describe", "--bootstrap-server", bs(cluster),
                         "--broker-list", "2")
    assert code == 0, err
    assert out.splitlines()[1] == "Received log directory information from brokers 2"
    code, out, err = run("log-dirs", "describe", "--bootstrap-server", bs(cluster),
                         "--broker-list", "1,7")
    assert code == 1 and out == ""
    assert ("ERROR: The given brokers do not exist from --broker-list: 7. Current existent "
            "brokers: 1,2,3") in err


def test_log_dirs_followers_hold_replicas(cluster: SamsaCluster) -> None:
    """Each broker reports every replica it is assigned, followers included."""
    md = metadata(cluster, [T3])[T3]

    def complete() -> bool:
        got = _log_dirs(run("log-dirs", "describe", "--bootstrap-server", bs(cluster),
                            "--topic-list", T3)[1])
        return all(f"{T3}-{p}" in got.get(b, {}) for p, i in md.items() for b in i["replicas"])

    wait_for(complete, "follower replicas in DescribeLogDirs", timeout=20)


# ---- topics describe report filters (last: stops broker 2) ---------------------------------------
def _reported(c: SamsaCluster, flag: str, topics: list[str]) -> list[str]:
    code, out, err = run("topics", "describe", *topics, "--bootstrap-server", bs(c), flag)
    assert code == 0, err
    for line in out.splitlines():
        fields = line.split("\t")
        assert fields[0] == "" and [f.split(": ")[0] for f in fields[1:6]] == \
            ["Topic", "Partition", "Leader", "Replicas", "Isr"], line
    return out.splitlines()


def test_describe_report_filters(cluster: SamsaCluster) -> None:
    topics = ["solo", "pair", "atmin", "minisr2"]
    # min.insync.replicas=2 on a single replica: under min ISR; RF 1 with the default 1: at it
    assert _reported(cluster, "--under-min-isr-partitions", topics) == [
        "\tTopic: minisr2\tPartition: 0\tLeader: 1\tReplicas: 1\tIsr: 1"]
    at_min = _reported(cluster, "--at-min-isr-partitions", ["solo", "atmin", "minisr2"])
    assert at_min == ["\tTopic: solo\tPartition: 0\tLeader: 2\tReplicas: 2\tIsr: 2",
                      "\tTopic: atmin\tPartition: 0\tLeader: 3\tReplicas: 3\tIsr: 3"]
    assert _reported(cluster, "--unavailable-partitions", topics) == []

    cluster.node(2).kill()
    wait_for(lambda: metadata(cluster, ["solo"])["solo"][0]["leader"] == -1,
             "solo-0 offline after broker 2 died")
    wait_for(lambda: metadata(cluster, ["pair"])["pair"][0]["isr"] == [1],
             "broker 2 out of pair-0's ISR")
    assert _reported(cluster, "--unavailable-partitions", topics) == [
        "\tTopic: solo\tPartition: 0\tLeader: none\tReplicas: 2\tIsr: 2"]
    assert _reported(cluster, "--under-min-isr-partitions", topics) == [
        "\tTopic: solo\tPartition: 0\tLeader: none\tReplicas: 2\tIsr: 2",
        "\tTopic: minisr2\tPartition: 0\tLeader: 1\tReplicas: 1\tIsr: 1"]
    assert "\tTopic: pair\tPartition: 0\tLeader: 1\tReplicas: 1,2\tIsr: 1" in \
        _reported(cluster, "--under-replicated-partitions", topics)
    # DescribeTopicPartitions names the dead broker's replicas offline
    dtp = describe_topic_partitions(bs(cluster), ["solo", "pair", T3])
    assert list(dtp["solo"][0].offline_replicas) == [2]
    assert int(dtp["solo"][0].leader_id) == -1
    assert list(dtp["pair"][0].offline_replicas) == [2]
    assert all(list(p.offline_replicas) == [2] for p in dtp[T3].values())
