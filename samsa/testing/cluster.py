"""Run a real multi-node Samsa cluster: n processes, each with its own config file, data dir and
free ports (a PLAINTEXT listener for clients, a CONTROLLER listener for the quorum).

    from samsa.testing import SamsaCluster
    with SamsaCluster(3) as c:
        Producer({"bootstrap.servers": c.bootstrap})
        c.nodes[c.active_controller() - 1].kill()

`samsa cluster up` uses the same config writing, so what tests run is what operators run.

`SamsaCluster(n, proxied=True)` puts a fault proxy (samsa.testing.faultproxy) link on every ordered
node pair: node src reaches node dst's CONTROLLER and inter-broker listeners only through
`cluster.links[(src, dst)]` (the SAMSA_TEST_ROUTES hook in samsa.cluster.channel); clients still
connect directly. `isolate`, `partition`, `one_way` and `heal` drive those links."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from types import TracebackType
from typing import Any

from . import free_port, terminate
from .faultproxy import FaultProxy, Link

PLAINTEXT = "PLAINTEXT"
CONTROLLER = "CONTROLLER"


def random_cluster_id() -> str:
    """A cluster id the way `kafka-storage.sh random-uuid` prints one (URL-safe base64, 22 chars,
    never starting with '-', which a command line would read as a flag)."""
    from samsa.cluster.meta_properties import random_uuid

    return random_uuid()


@dataclass(frozen=True)
class NodeSpec:
    """One node's place in the cluster: what `server.properties` it gets."""

    node_id: int
    roles: tuple[str, ...]  # ("broker",), ("controller",) or both
    host: str
    port: int  # PLAINTEXT, 0 if the node is no broker
    controller_port: int  # CONTROLLER, 0 if the node is no controller
    data_dir: Path

    @property
    def is_broker(self) -> bool:
        return "broker" in self.roles

    @property
    def is_controller(self) -> bool:
        return "controller" in self.roles

    @property
    def config_path(self) -> Path:
        return self.data_dir / "server.properties"

    @property
    def log_dir(self) -> Path:
        return self.data_dir / "logs"

    def properties(self, voters: str, overrides: dict[str, str]) -> dict[str, str]:
        listeners = []
        if self.is_broker:
            listeners.append(f"{PLAINTEXT}://{self.host}:{self.port}")
        if self.is_controller:
            listeners.append(f"{CONTROLLER}://{self.host}:{self.controller_port}")
        props = {
            "process.roles": ",".join(self.roles),
            "node.id": str(self.node_id),
            "controller.quorum.voters": voters,
            "controller.listener.names": CONTROLLER,
            "inter.broker.listener.name": PLAINTEXT,
            "listeners": ",".join(listeners),
            "listener.security.protocol.map": f"{PLAINTEXT}:PLAINTEXT,{CONTROLLER}:PLAINTEXT",
            "log.dirs": str(self.log_dir),
        }
        if self.is_broker:
            props["advertised.listeners"] = f"{PLAINTEXT}://{self.host}:{self.port}"
        props.update(overrides)
        return props


def plan_nodes(n: int, roles: str, data_dir: Path, controllers: int | Iterable[int] | None = None,
               base_port: int | None = None, host: str = "127.0.0.1") -> list[NodeSpec]:
    """Node ids 1..n. `controllers`: None = every node takes `roles`; an int k = nodes 1..k take
    `roles` and the rest are brokers; ids = those nodes take `roles`, the rest are brokers.
    Ports: free ones, or from `base_port` (node i: PLAINTEXT base+2(i-1), CONTROLLER base+2(i-1)+1)."""
    if n < 1:
        raise ValueError("a cluster needs at least one node")
    role_set = tuple(r.strip() for r in roles.split(",") if r.strip())
    if not role_set or any(r not in ("broker", "controller") for r in role_set):
        raise ValueError(f"process.roles must be broker, controller or both, got {roles!r}")
    if controllers is None:
        voter_ids = set(range(1, n + 1))
    elif isinstance(controllers, int):
        voter_ids = set(range(1, controllers + 1))
    else:
        voter_ids = set(controllers)
    if not voter_ids or not voter_ids <= set(range(1, n + 1)):
        raise ValueError(f"controllers must name 1..{n} of nodes 1..{n}")
    if "controller" not in role_set:
        raise ValueError("a cluster needs controllers: roles must include controller")
    specs = []
    for i in range(1, n + 1):
        node_roles = role_set if i in voter_ids else ("broker",)
        if base_port is not None:
            port, cport = base_port + 2 * (i - 1), base_port + 2 * (i - 1) + 1
        else:
            port, cport = free_port(), free_port()
        specs.append(NodeSpec(i, node_roles, host, port if "broker" in node_roles else 0,
                              cport if "controller" in node_roles else 0,
                              data_dir / f"node-{i}"))
    return specs


def voters_of(specs: list[NodeSpec]) -> str:
    return ",".join(f"{s.node_id}@{s.host}:{s.controller_port}" for s in specs if s.is_controller)


def write_config(spec: NodeSpec, voters: str, overrides: dict[str, str]) -> Path:
    spec.data_dir.mkdir(parents=True, exist_ok=True)
    lines = [f"{k}={v}" for k, v in spec.properties(voters, overrides).items()]
    spec.config_path.write_text("# written by samsa.testing.cluster\n" + "\n".join(lines) + "\n")
    return spec.config_path


def _reuse_ports(spec: NodeSpec) -> NodeSpec:
    """A node whose config exists from an earlier run keeps its ports (the voters do not change
    under a restarted cluster)."""
    if not spec.config_path.exists():
        return spec
    from samsa.config import read_properties

    ports = {}
    for item in read_properties(str(spec.config_path)).get("listeners", "").split(","):
        name, sep, rest = item.strip().partition("://")
        if sep and rest.rpartition(":")[2].isdigit():
            ports[name] = int(rest.rpartition(":")[2])
    return replace(spec, port=ports.get(PLAINTEXT, spec.port) if spec.is_broker else 0,
                   controller_port=ports.get(CONTROLLER, spec.controller_port)
                   if spec.is_controller else 0)


def child_env() -> dict[str, str]:
    """The caller's environment minus SAMSA_* settings, which would override the config file."""
    return {k: v for k, v in os.environ.items() if not k.startswith("SAMSA_")}


def format_storage(spec: NodeSpec, cluster_id: str, timeout: float = 60.0) -> None:
    """`samsa storage format -t <id> -c <config>`, once per node; an already formatted dir of the
    same cluster is left alone (--ignore-formatted)."""
    args = [sys.executable, "-m", "samsa.cli.main", "storage", "format", f"--cluster-id={cluster_id}",
            "-c", str(spec.config_path), "--ignore-formatted"]
    done = subprocess.run(args, capture_output=True, text=True, env=child_env(), timeout=timeout,
                          check=False)
    if done.returncode != 0:
        raise RuntimeError(f"formatting the storage of node {spec.node_id} failed "
                           f"(exit {done.returncode}): {(done.stderr or done.stdout).strip()}")


class ClusterNode:
    """One node process. kill() = SIGKILL (crash), stop() = SIGTERM (clean), pause()/resume() =
    SIGSTOP/SIGCONT; start() again reuses the same config, data dir and ports."""

    def __init__(self, spec: NodeSpec, startup_timeout: float = 60.0,
                 env: dict[str, str] | None = None) -> None:
        """`env`: variables added to the child's environment (e.g. SAMSA_TEST_ROUTES)."""
        self.spec = spec
        self.startup_timeout = startup_timeout
        self.env = dict(env or {})
        self.proc: subprocess.Popen[bytes] | None = None
        self.paused = False
        self.log_path = spec.data_dir / "node.log"

    @property
    def node_id(self) -> int:
        return self.spec.node_id

    @property
    def bootstrap(self) -> str:
        """This node's PLAINTEXT host:port ('' for a controller-only node)."""
        return f"{self.spec.host}:{self.spec.port}" if self.spec.is_broker else ""

    @property
    def controller_address(self) -> str:
        return f"{self.spec.host}:{self.spec.controller_port}" if self.spec.is_controller else ""

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def launch(self) -> None:
        """Start the process without waiting for its listeners."""
        if self.running:
            return
        args = [sys.executable, "-m", "samsa.cli.main", "serve", str(self.spec.config_path)]
        log = open(self.log_path, "ab")  # noqa: SIM115 - owned by the child
        self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                     env={**child_env(), **self.env})
        log.close()
        self.paused = False

    def wait_listening(self, deadline: float) -> None:
        """Until every listener of the node accepts connections; a process that exits is an
        error carrying the end of its log."""
        import socket

        ports = [p for p in (self.spec.port, self.spec.controller_port) if p]
        while True:
            if self.proc is None or self.proc.poll() is not None:
                code = self.proc.returncode if self.proc is not None else None
                raise RuntimeError(f"samsa node {self.node_id} exited with {code}:\n"
                                   f"{self.log_text()[-4000:]}")
            try:
                for p in ports:
                    with socket.create_connection((self.spec.host, p), timeout=0.5):
                        pass
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"samsa node {self.node_id} did not listen on {ports} in "
                        f"{self.startup_timeout}s:\n{self.log_text()[-4000:]}") from None
                time.sleep(0.05)

    def start(self) -> ClusterNode:
        self.launch()
        self.wait_listening(time.monotonic() + self.startup_timeout)
        return self

    def kill(self) -> None:
        """SIGKILL: no chance to flush, resign or deregister."""
        if self.running:
            assert self.proc is not None
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
        self.proc = None
        self.paused = False

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM, then SIGKILL if the node has not exited within `timeout`."""
        if self.running:
            assert self.proc is not None
            if self.paused:
                self.proc.send_signal(signal.SIGCONT)
            terminate(self.proc, timeout)
        self.proc = None
        self.paused = False

    def pause(self) -> None:
        """SIGSTOP: the process is frozen with its sockets open (a GC pause, a hung VM)."""
        if self.running:
            assert self.proc is not None
            self.proc.send_signal(signal.SIGSTOP)
            self.paused = True

    def resume(self) -> None:
        if self.running:
            assert self.proc is not None
            self.proc.send_signal(signal.SIGCONT)
        self.paused = False

    def restart(self, hard: bool = False) -> ClusterNode:
        self.kill() if hard else self.stop()
        return self.start()

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def __repr__(self) -> str:
        state = "paused" if self.paused else "running" if self.running else "stopped"
        return f"<ClusterNode {self.node_id} {','.join(self.spec.roles)} {state}>"


class SamsaCluster:
    """n node processes sharing one formatted cluster id. start() launches them all (a quorum
    needs a majority up at once), waits for their listeners, a quorum leader and every broker in
    DescribeCluster."""

    def __init__(self, n: int = 3, roles: str = "broker,controller",
                 overrides: dict[str, str] | None = None, data_dir: str | Path | None = None,
                 controllers: int | Iterable[int] | None = None, startup_timeout: float = 60.0,
                 base_port: int | None = None, cluster_id: str | None = None,
                 proxied: bool = False,
                 node_overrides: dict[int, dict[str, str]] | None = None) -> None:
        """`node_overrides`: settings for single nodes (node id -> settings), over `overrides`
        (e.g. each broker's `broker.rack`)."""
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if data_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="samsa-cluster-")
            data_dir = self._tmp.name
        self.data_dir = Path(data_dir)
        self.overrides = dict(overrides or {})
        self.node_overrides = {k: dict(v) for k, v in (node_overrides or {}).items()}
        self.startup_timeout = startup_timeout
        self.cluster_id = cluster_id or self._existing_cluster_id() or random_cluster_id()
        self.specs = plan_nodes(n, roles, self.data_dir, controllers, base_port)
        if base_port is None:
            self.specs = [_reuse_ports(s) for s in self.specs]
        self.voters = voters_of(self.specs)
        self.nodes = [ClusterNode(s, startup_timeout) for s in self.specs]
        self._formatted = False
        self.proxied = proxied
        self.proxy: FaultProxy | None = None
        self.links: dict[tuple[int, int], Link] = {}
        # TLS / SASL of the harness's own questions (samsa.testing.secure_cluster); None: PLAINTEXT
        self.wire_security: Any = None

    def _existing_cluster_id(self) -> str | None:
        """A data dir used before keeps its cluster id (restart of `samsa cluster up`)."""
        path = self.data_dir / "cluster.id"
        return path.read_text().strip() if path.exists() else None

    @property
    def bootstrap(self) -> str:
        """Every broker's PLAINTEXT host:port, comma-separated."""
        return ",".join(n.bootstrap for n in self.nodes if n.spec.is_broker)

    @property
    def bootstrap_controller(self) -> str:
        return ",".join(n.controller_address for n in self.nodes if n.spec.is_controller)

    @property
    def brokers(self) -> list[ClusterNode]:
        return [n for n in self.nodes if n.spec.is_broker]

    @property
    def controllers(self) -> list[ClusterNode]:
        return [n for n in self.nodes if n.spec.is_controller]

    def node(self, node_id: int) -> ClusterNode:
        return self.nodes[node_id - 1]

    def format(self) -> None:
        """Write every node's config and format its storage (idempotent)."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        (self.data_dir / "cluster.id").write_text(self.cluster_id + "\n")
        for spec in self.specs:
            write_config(spec, self.voters,
                         {**self.overrides, **self.node_overrides.get(spec.node_id, {})})
            format_storage(spec, self.cluster_id)
        self._formatted = True

    def start(self, wait: bool = True) -> SamsaCluster:
        if not self._formatted:
            self.format()
        if self.proxied and self.proxy is None:
            self._start_proxy()
        try:
            for node in self.nodes:
                node.launch()
            deadline = time.monotonic() + self.startup_timeout
            for node in self.nodes:
                node.wait_listening(deadline)
            if wait:
                self.wait_for_leader(max(1.0, deadline - time.monotonic()))
                if self.brokers:
                    self.wait_brokers(len(self.brokers), max(1.0, deadline - time.monotonic()))
        except BaseException:
            self.kill()
            raise
        return self

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM to every node, brokers first (they deregister from a live controller)."""
        for node in sorted(self.nodes, key=lambda n: n.spec.is_controller):
            node.stop(timeout)

    def kill(self) -> None:
        for node in self.nodes:
            node.kill()

    def close(self) -> None:
        self.stop()
        if self.proxy is not None:
            self.proxy.close()
            self.proxy = None
        if self._tmp is not None:
            self._tmp.cleanup()

    def __enter__(self) -> SamsaCluster:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # ---- faults ----------------------------------------------------------------------------------
    def _start_proxy(self) -> None:
        """One link per ordered pair (src, dst), covering dst's CONTROLLER and PLAINTEXT (the
        inter-broker) listeners; each node's SAMSA_TEST_ROUTES sends its dials through them."""
        self.proxy = FaultProxy(self.specs[0].host).start()
        for src in self.nodes:
            routes = {}
            for dst in self.nodes:
                if dst is src:
                    continue
                targets = [(dst.spec.host, p) for p in (dst.spec.controller_port, dst.spec.port)
                           if p]
                link = self.proxy.add_link(f"{src.node_id}->{dst.node_id}", targets)
                self.links[(src.node_id, dst.node_id)] = link
                for (host, port), (lhost, lport) in link.routes.items():
                    routes[f"{host}:{port}"] = f"{lhost}:{lport}"
            src.env["SAMSA_TEST_ROUTES"] = json.dumps(routes)

    def _links_between(self, a: Iterable[int], b: Iterable[int]) -> list[Link]:
        if not self.proxied or self.proxy is None:
            raise RuntimeError("network faults need SamsaCluster(..., proxied=True), started")
        a_ids, b_ids = set(a), set(b)
        return [link for (src, dst), link in self.links.items()
                if (src in a_ids and dst in b_ids) or (src in b_ids and dst in a_ids)]

    def partition(self, a_ids: Iterable[int], b_ids: Iterable[int], mode: str = "drop") -> None:
        """No traffic between the two groups, either way. mode "drop": connections reset and
        refused; "blackhole": accepted and silent (requests time out)."""
        for link in self._links_between(a_ids, b_ids):
            if mode == "drop":
                link.drop()
            elif mode == "blackhole":
                link.blackhole("forward")
                link.blackhole("backward")
            else:
                raise ValueError(f"mode must be drop or blackhole, got {mode!r}")

    def isolate(self, node_id: int, mode: str = "drop") -> None:
        """`node_id` cut from every other node, both directions (clients still reach it)."""
        self.partition([node_id], [n.node_id for n in self.nodes if n.node_id != node_id], mode)

    def one_way(self, src: int, dst: int) -> None:
        """Bytes from src never reach dst; dst's still reach src. Black holes on both links:
        src's requests to dst (src->dst forward) and src's answers to dst (dst->src backward)."""
        self._links_between([src], [dst])  # proxied check
        self.links[(src, dst)].blackhole("forward")
        self.links[(dst, src)].blackhole("backward")

    def heal(self) -> None:
        """Every link back to pass (connections that lost bytes are closed)."""
        if self.proxy is not None:
            self.proxy.heal()

    def pause(self, node_id: int) -> None:
        """SIGSTOP node `node_id`."""
        self.node(node_id).pause()

    def resume(self, node_id: int) -> None:
        """SIGCONT node `node_id`."""
        self.node(node_id).resume()

    # ---- questions over the wire ----------------------------------------------------------------
    def _wire(self, address: str, timeout: float) -> Any:
        from samsa.cli import _cluster_wire as w

        if self.wire_security is None:
            return w.connect(address, timeout)
        from .secure_cluster import wire_connect

        return wire_connect(address, timeout, self.wire_security)

    def _live(self) -> list[ClusterNode]:
        return [n for n in self.nodes if n.running and not n.paused]

    def quorum_views(self, timeout: float = 1.0) -> dict[int, tuple[int, int]]:
        """node id -> (leader id, leader epoch) as each live, unpaused node answers DescribeQuorum
        (CONTROLLER listener of a controller, else PLAINTEXT); unreachable nodes are left out."""
        from samsa.cli import _cluster_wire as w

        views = {}
        for node in self._live():
            for address in (node.controller_address, node.bootstrap):
                if not address:
                    continue
                try:
                    with self._wire(address, timeout) as conn:
                        q = w.describe_quorum(conn)
                except w.CliError:
                    continue
                views[node.node_id] = (q.leader_id, q.leader_epoch)
                break
        return views

    def active_controller(self, timeout: float = 1.0) -> int | None:
        """The quorum leader of the highest epoch any live node reports, or None."""
        best: tuple[int, int] | None = None
        for leader, epoch in self.quorum_views(timeout).values():
            if leader >= 0 and (best is None or epoch > best[1]):
                best = (leader, epoch)
        return best[0] if best is not None else None

    def wait_for_leader(self, timeout: float = 30.0, exclude: Iterable[int] = ()) -> int:
        """Until a live node (not in `exclude`) leads the quorum; returns its id."""
        skip = set(exclude)
        deadline = time.monotonic() + timeout
        while True:
            leader = self.active_controller()
            if leader is not None and leader not in skip and self.node(leader).running \
                    and not self.node(leader).paused:
                return leader
            if time.monotonic() > deadline:
                raise TimeoutError(f"no quorum leader within {timeout}s (last seen: {leader})")
            time.sleep(0.1)

    def describe_cluster(self, timeout: float = 2.0) -> list[tuple[int, bool | None]]:
        """(broker id, fenced) pairs per DescribeCluster from the first live broker answering."""
        from samsa.cli import _cluster_wire as w

        errors = []
        for node in self._live():
            if not node.bootstrap:
                continue
            try:
                with self._wire(node.bootstrap, timeout) as conn:
                    info = w.describe_cluster(conn)
            except w.CliError as e:
                errors.append(str(e))
                continue
            return [(b.broker_id, b.fenced) for b in info.brokers]
        raise ConnectionError("no broker answered DescribeCluster: " + "; ".join(errors))

    def wait_brokers(self, n: int, timeout: float = 30.0) -> list[int]:
        """Until DescribeCluster lists at least n unfenced brokers; returns their ids."""
        deadline = time.monotonic() + timeout
        last: object = None
        while True:
            try:
                seen = self.describe_cluster()
                live = sorted(b for b, fenced in seen if not fenced)
                if len(live) >= n:
                    return live
                last = seen
            except ConnectionError as e:
                last = e
            if time.monotonic() > deadline:
                raise TimeoutError(f"DescribeCluster did not list {n} brokers within {timeout}s "
                                   f"(last: {last})")
            time.sleep(0.1)
