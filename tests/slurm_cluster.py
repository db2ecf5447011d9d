"""A real Slurm cluster of several nodes on this machine for the tests (Debian's slurm-wlm, munge,
slurmdbd and MariaDB, and iproute2, all installed by ./setup.sh --tests).

Each node is a network namespace and a UTS namespace of its own, with its own hostname and
address on a private subnet (10.213.N.0/24, N one that no interface or route of this machine
uses): a veth pair from the namespace to a bridge in the host's namespace, whose address is the
controller's. slurmctld, slurmdbd, MariaDB and munged run in the host's namespace; one slurmd per
node (`slurmd -N name`) runs in its namespaces, and its jobs with it (their `hostname` is the
node's). Every node sees the same filesystem, as a cluster's nodes see NFS, and the same munge
socket. Node types: one partition per type (the nodes of that size), and PARTITION with them all.

Everything lives in one folder: a munge key and socket, a MariaDB data directory, slurm.conf and
slurmdbd.conf, state, per-node spool, logs and PID files; the daemons run in the foreground as
children of this process and are stopped by their PIDs, every process left in a node's namespace
is killed, and the namespaces, veth pairs and bridge are deleted. Traffic goes to loopback and to
the addresses of this subnet only. Clients (sbatch, squeue, sacct, ... and the Snakemake Slurm
plugin) find the cluster through SLURM_CONF in `env`.

    with SlurmCluster(tmp_dir, nodes=[("small", 1), ("big", 2), ("big", 2)]) as cluster:
        subprocess.run(["sbatch", "-p", "big", "--wrap", "hostname"], env=cluster.env)
        cluster.kill_node("big1")  # its slurmd and every process of its jobs, as a node dies

`python tests/slurm_cluster.py DIR` starts one by hand and prints the SLURM_CONF to export.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

# What the harness runs; ./setup.sh --tests installs them (slurm-wlm munge slurmdbd
# mariadb-server iproute2; nsenter, unshare and hostname are in every Debian).
DAEMONS = [
    "munged",
    "mungekey",
    "mariadb-install-db",
    "mariadbd",
    "slurmdbd",
    "slurmctld",
    "slurmd",
    "ip",
    "nsenter",
    "unshare",
    "hostname",
]
CLUSTER = "numapore"
PARTITION = "numapore"
ACCOUNT = "numapore-test"
DATABASE = "slurm_acct_db"
# The nodes when none are given: three, of two types (one partition each).
DEFAULT_NODES = (("small", 1), ("big", 2), ("big", 2))
# Private subnets 10.213.N.0/24 the harness picks from (one whose N nothing uses yet).
SUBNET = "10.213"


@dataclass(frozen=True)
class Node:
    """One node of the cluster: its name (its hostname too), type (its partition), CPUs and
    address, and the network namespace and host-side veth it lives behind."""

    name: str
    type: str
    cpus: int
    address: str
    netns: str
    veth: str


class ClusterError(RuntimeError):
    """The local Slurm cluster could not be started or did not answer."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def missing_programs() -> list[str]:
    """The daemons and tools of the cluster that are not installed (empty when all are)."""
    return [p for p in DAEMONS if shutil.which(p, path=os.environ["PATH"] + ":/usr/sbin") is None]


def node_line() -> str:
    """This machine as a Slurm node: `slurmd -C`'s NodeName line (CPUs, sockets, memory)."""
    out = subprocess.run(["slurmd", "-C"], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        if line.startswith("NodeName="):
            return line.strip()
    raise ClusterError(f"slurmd -C printed no NodeName line:\n{out}")


def memory_mb() -> int:
    """This machine's memory as slurmd counts it (its RealMemory): what each node declares."""
    found = re.search(r"RealMemory=(\d+)", node_line())
    if not found:
        raise ClusterError(f"slurmd -C gave no RealMemory: {node_line()}")
    return int(found.group(1))


def slurm_conf(root: Path, ports: dict[str, int], controller: str, nodes: list[Node]) -> str:
    """slurm.conf: the controller at the bridge's address, each node at its namespace's, a
    partition per node type and a default one of every node, all state under root."""
    memory = memory_mb()
    node_lines = "\n".join(
        f"NodeName={n.name} NodeHostname={n.name} NodeAddr={n.address} CPUs={n.cpus} "
        f"Boards=1 SocketsPerBoard=1 CoresPerSocket={n.cpus} ThreadsPerCore=1 "
        f"RealMemory={memory} State=UNKNOWN"
        for n in nodes
    )
    types = dict.fromkeys(n.type for n in nodes)
    partitions = "\n".join(
        f"PartitionName={t} Nodes={','.join(n.name for n in nodes if n.type == t)} "
        "MaxTime=INFINITE State=UP"
        for t in types
    )
    host = socket.gethostname().split(".")[0]
    return f"""\
ClusterName={CLUSTER}
SlurmctldHost={host}({controller})
SlurmUser=root
SlurmctldPort={ports['slurmctld']}
SlurmdPort={ports['slurmd']}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={root}/munge/munge.socket
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool/%n
SlurmctldPidFile={root}/run/slurmctld.pid
SlurmdPidFile={root}/run/slurmd-%n.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd-%n.log
# The nodes share this machine: each has the CPUs and memory slurm.conf gives it, not the
# machine's (which slurmd would detect and report).
SlurmdParameters=config_overrides
# No cgroups in this container: Linux process tracking, no task binding.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=5
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
MpiDefault=none
ReturnToService=2
# Accounting in slurmdbd (MariaDB), so that sacct lists every job.
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort={ports['slurmdbd']}
# The munge socket for the connection to slurmdbd (AuthInfo covers only the other messages).
AccountingStoragePass={root}/munge/munge.socket
# The plugin names each job's rule and wildcards in its comment: keep it for sacct.
AccountingStoreFlags=job_comment
JobCompType=jobcomp/none
# Quick turnaround for tests: cancelled jobs are killed 2 s after SIGTERM.
KillWait=2
# Finished jobs stay in squeue this long (s): profiles/slurm reads job states from squeue, and
# on a machine busy with other tests (the emulated guest) a poll can come minutes late.
MinJobAge=3600
# A node whose slurmd stops answering is DOWN after this long (s), its jobs NODE_FAIL; a job
# lost with its node is not requeued by Slurm (the workflow submits it again).
SlurmdTimeout=10
JobRequeue=0
InactiveLimit=0
{node_lines}
PartitionName={PARTITION} Nodes=ALL Default=YES MaxTime=INFINITE State=UP
{partitions}
"""


def slurmdbd_conf(root: Path, ports: dict[str, int]) -> str:
    """slurmdbd.conf: the accounting daemon on localhost, storing in the harness's MariaDB."""
    return f"""\
AuthType=auth/munge
AuthInfo=socket={root}/munge/munge.socket
DbdHost=localhost
DbdPort={ports['slurmdbd']}
SlurmUser=root
PidFile={root}/run/slurmdbd.pid
LogFile={root}/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort={ports['mariadb']}
StorageUser=root
StorageLoc={DATABASE}
"""


class SlurmCluster:
    """Start munge, MariaDB, slurmdbd, slurmctld and one slurmd per node (each in namespaces of
    its own) under root; stop them all and remove the namespaces on exit."""

    def __init__(self, root: Path, nodes: list[tuple[str, int]] | tuple = DEFAULT_NODES):
        """A cluster to live under root with nodes as (type, CPUs), named <type><i> (small1,
        big1, big2, ...); nothing starts before start() or `with`."""
        self.root = Path(root)
        self.node_types = list(nodes)
        self.nodes: dict[str, Node] = {}
        self.bridge: str | None = None
        self.controller = ""
        self.procs: list[tuple[str, subprocess.Popen]] = []
        self.slurmds: dict[str, subprocess.Popen] = {}
        self.env = dict(os.environ, SLURM_CONF=str(self.root / "slurm.conf"))
        self.env["PATH"] = f"{self.root / 'bin'}:{self.env['PATH']}:/usr/sbin"

    def __enter__(self) -> SlurmCluster:
        """Start the cluster; on any failure stop what did start, then raise."""
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        """Stop the cluster."""
        self.stop()

    @property
    def partitions(self) -> dict[str, list[str]]:
        """Each node type's partition and its nodes' names (PARTITION, of them all, not named)."""
        found: dict[str, list[str]] = {}
        for node in self.nodes.values():
            found.setdefault(node.type, []).append(node.name)
        return found

    def run(self, *cmd: str, check: bool = True) -> subprocess.CompletedProcess:
        """Run a Slurm client command against this cluster; ClusterError with its output."""
        result = subprocess.run(cmd, capture_output=True, text=True, env=self.env)
        if check and result.returncode != 0:
            raise ClusterError(
                f"{' '.join(cmd)} failed ({result.returncode}):\n{result.stdout}{result.stderr}"
            )
        return result

    def _daemon(self, name: str, *cmd: str) -> subprocess.Popen:
        """Start a daemon in the foreground, its output in log/<name>.out."""
        out = open(self.root / "log" / f"{name}.out", "a")
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, env=self.env, start_new_session=True
        )
        out.close()
        return proc

    def _wait(self, what: str, ready, timeout: float = 60) -> None:
        """Poll ready() until true; ClusterError naming what and the daemons' logs if not."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, proc in [*self.procs, *self.slurmds.items()]:
                if proc.poll() is not None:
                    raise ClusterError(f"{name} exited ({proc.returncode}) {self.logs()}")
            if ready():
                return
            time.sleep(0.2)
        raise ClusterError(f"timed out after {timeout:.0f} s waiting for {what} {self.logs()}")

    def logs(self) -> str:
        """The tail of every daemon log, for error messages."""
        text = ""
        for path in sorted((self.root / "log").glob("*")):
            lines = path.read_text(errors="replace").splitlines()[-15:]
            text += f"\n--- {path.name}\n" + "\n".join(lines)
        return text

    def _make_network(self) -> None:
        """A bridge on a free 10.213.N.0/24 (its .1 the controller's address) and per node a
        network namespace behind a veth pair on it (its address .11, .12, ...)."""
        used = (
            subprocess.run(["ip", "-o", "addr"], capture_output=True, text=True, check=True).stdout
            + subprocess.run(["ip", "route"], capture_output=True, text=True).stdout
        )
        free = [n for n in range(1, 255) if f"{SUBNET}.{n}." not in used]
        random.shuffle(free)
        for net in free:
            # Creating the bridge claims the subnet: another cluster starting at once fails here.
            made = subprocess.run(
                ["ip", "link", "add", f"npbr{net}", "type", "bridge"], capture_output=True
            )
            if made.returncode == 0:
                break
        else:
            raise ClusterError(f"no free subnet {SUBNET}.N.0/24 for the cluster's bridge")
        self.bridge = f"npbr{net}"
        self.controller = f"{SUBNET}.{net}.1"
        ip("addr", "add", f"{self.controller}/24", "dev", self.bridge)
        ip("link", "set", self.bridge, "up")
        counts: dict[str, int] = {}
        for i, (kind, cpus) in enumerate(self.node_types):
            counts[kind] = counts.get(kind, 0) + 1
            node = Node(
                name=f"{kind}{counts[kind]}", type=kind, cpus=int(cpus),
                address=f"{SUBNET}.{net}.{11 + i}", netns=f"numapore{net}-{kind}{counts[kind]}",
                veth=f"np{net}v{i}",
            )  # fmt: skip
            self.nodes[node.name] = node
            ip("netns", "add", node.netns)
            ip(
                "link",
                "add",
                node.veth,
                "type",
                "veth",
                "peer",
                "name",
                "eth0",
                "netns",
                node.netns,
            )
            ip("link", "set", node.veth, "master", self.bridge, "up")
            ip("-n", node.netns, "addr", "add", f"{node.address}/24", "dev", "eth0")
            ip("-n", node.netns, "link", "set", "eth0", "up")
            ip("-n", node.netns, "link", "set", "lo", "up")

    def start_node(self, name: str) -> None:
        """Start the node's slurmd in its network namespace and a UTS namespace of its own
        (hostname: the node's name), as its machine boots."""
        node = self.nodes[name]
        self.slurmds[name] = self._daemon(
            f"slurmd-{name}", "nsenter", f"--net=/run/netns/{node.netns}", "unshare", "--uts",
            "sh", "-c", 'hostname "$1" && exec slurmd -D -N "$1"', "sh", name,
        )  # fmt: skip

    def kill_node(self, name: str) -> None:
        """The node dies: SIGKILL to its slurmd and every process in its namespace (its jobs'
        slurmstepd and tools); Slurm finds out by itself (SlurmdTimeout)."""
        node = self.nodes[name]
        kill_namespace(node.netns)
        proc = self.slurmds.pop(name, None)
        if proc is not None:
            proc.kill()
            proc.wait()

    def node_state(self, name: str) -> str:
        """The node's state as sinfo says it (idle, mixed, alloc, down*, ...)."""
        return self.run("sinfo", "-h", "-n", name, "-o", "%t").stdout.split("\n")[0].strip()

    def wait_node_state(self, name: str, states: set[str], timeout: float = 120) -> None:
        """Wait until the node's state is one of states."""
        self._wait(f"{name} in {states}", lambda: self.node_state(name) in states, timeout)

    def start(self) -> None:
        """Write the configuration, make the network, start every daemon, wait until every
        node is idle."""
        missing = missing_programs()
        if missing:
            raise ClusterError(f"not installed: {', '.join(missing)} (run ./setup.sh --tests)")
        for sub in ["bin", "munge", "db", "state", "spool", "run", "log"]:
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        # Inside each job the Snakemake plugin runs the rule under srun with every SLURM_*
        # variable dropped, SLURM_CONF too; a site has slurm.conf where srun looks by default
        # (/etc/slurm), this cluster has it under root: an srun that names it comes first on PATH.
        srun = self.root / "bin" / "srun"
        srun.write_text(
            f"#!/bin/sh\nexport SLURM_CONF={self.root / 'slurm.conf'}\n"
            f'exec {shutil.which("srun", path=os.environ["PATH"])} "$@"\n'
        )
        srun.chmod(0o755)
        os.chmod(self.root / "munge", 0o755)  # munged: clients must reach the socket
        ports = {name: free_port() for name in ["slurmctld", "slurmd", "slurmdbd", "mariadb"]}
        self._make_network()
        nodes = list(self.nodes.values())
        (self.root / "slurm.conf").write_text(slurm_conf(self.root, ports, self.controller, nodes))
        dbd_conf = self.root / "slurmdbd.conf"
        dbd_conf.write_text(slurmdbd_conf(self.root, ports))
        os.chmod(
            dbd_conf, 0o600
        )  # slurmdbd refuses a readable configuration (it may hold a password)

        key = self.root / "munge" / "munge.key"
        subprocess.run(["mungekey", "--create", f"--keyfile={key}"], check=True)
        self.procs.append(("munged", self._daemon(
            "munged", "munged", "--foreground", "--force",
            f"--socket={self.root}/munge/munge.socket", f"--key-file={key}",
            f"--pid-file={self.root}/run/munged.pid", f"--log-file={self.root}/log/munged.log",
            f"--seed-file={self.root}/munge/munged.seed",
        )))  # fmt: skip
        self._wait("munged", (self.root / "munge" / "munge.socket").exists)

        datadir = self.root / "db" / "data"
        subprocess.run(
            [
                "mariadb-install-db", "--no-defaults", f"--datadir={datadir}", "--user=root",
                "--auth-root-authentication-method=normal", "--skip-test-db",
            ],
            capture_output=True, check=True,
        )  # fmt: skip
        self.procs.append(("mariadbd", self._daemon(
            "mariadbd", "mariadbd", "--no-defaults", f"--datadir={datadir}", "--user=root",
            f"--socket={self.root}/db/mysqld.sock", f"--port={ports['mariadb']}",
            "--bind-address=127.0.0.1", "--skip-name-resolve",
            f"--pid-file={self.root}/run/mariadbd.pid", f"--log-error={self.root}/log/mariadbd.log",
            "--innodb-buffer-pool-size=64M",
        )))  # fmt: skip
        self._wait("MariaDB", lambda: port_open(ports["mariadb"]))

        self.procs.append(("slurmdbd", self._daemon("slurmdbd", "slurmdbd", "-D")))
        self._wait("slurmdbd", lambda: port_open(ports["slurmdbd"]))
        self.procs.append(("slurmctld", self._daemon("slurmctld", "slurmctld", "-D", "-i")))
        self._wait("slurmctld", lambda: self.run("scontrol", "ping", check=False).returncode == 0)
        for name in self.nodes:
            self.start_node(name)
        self._wait("every node to be idle", self._nodes_idle)
        # An account for the submitting user, as a site would have (the plugin validates it).
        self._wait("the cluster in slurmdbd", self._cluster_registered)
        self.run("sacctmgr", "-i", "add", "account", ACCOUNT, f"cluster={CLUSTER}")
        self.run("sacctmgr", "-i", "add", "user", current_user(), f"account={ACCOUNT}")

    def _nodes_idle(self) -> bool:
        """True when sinfo reports every node idle."""
        result = self.run("sinfo", "-h", "-N", "-o", "%N|%t", check=False)
        states = dict(line.split("|") for line in result.stdout.split())
        return result.returncode == 0 and states == dict.fromkeys(self.nodes, "idle")

    def _cluster_registered(self) -> bool:
        """True when slurmctld has registered the cluster in the accounting database."""
        result = self.run("sacctmgr", "-n", "-P", "list", "cluster", "format=cluster", check=False)
        return CLUSTER in result.stdout.split()

    def jobs(self) -> list[dict[str, str]]:
        """Every job sacct knows (allocations, not steps): id, name, state, comment, CPUs,
        account, partition and node."""
        fields = [
            "JobID", "JobName", "State", "Comment", "AllocCPUS", "Account", "Partition", "NodeList",
        ]  # fmt: skip
        out = self.run(
            "sacct", "-X", "-a", "-n", "-P", "--starttime", "now-1days",
            f"--format={','.join(f + '%300' for f in fields)}",
        ).stdout  # fmt: skip
        return [
            dict(zip(fields, line.split("|"), strict=True)) for line in out.splitlines() if line
        ]

    def stop(self) -> None:
        """Cancel every job, stop the daemons in reverse order (SIGTERM, then SIGKILL), kill
        whatever is left in the nodes' namespaces, delete the namespaces and the bridge."""
        if any(name == "slurmctld" and p.poll() is None for name, p in self.procs):
            self.run("scancel", "--full", "--user", current_user(), check=False)
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                result = self.run("squeue", "-h", check=False)
                if result.returncode != 0 or not result.stdout.strip():
                    break
                time.sleep(0.2)
        for _name, proc in [*self.slurmds.items(), *reversed(self.procs)]:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        self.slurmds.clear()
        self.procs.clear()
        for node in self.nodes.values():
            kill_namespace(node.netns)
            subprocess.run(["ip", "netns", "del", node.netns], capture_output=True)
            subprocess.run(["ip", "link", "del", node.veth], capture_output=True)
        if self.bridge:
            subprocess.run(["ip", "link", "del", self.bridge], capture_output=True)
            self.bridge = None


def ip(*args: str) -> None:
    """Run `ip ARGS`; ClusterError with its message when it fails."""
    result = subprocess.run(["ip", *args], capture_output=True, text=True)
    if result.returncode != 0:
        raise ClusterError(f"ip {' '.join(args)} failed: {result.stderr.strip()}")


def kill_namespace(netns: str) -> None:
    """SIGKILL every process in a network namespace (none when it does not exist)."""
    listed = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True)
    for pid in listed.stdout.split():
        try:
            os.kill(int(pid), signal.SIGKILL)
        except ProcessLookupError:
            pass


def port_open(port: int) -> bool:
    """True when something accepts TCP connections on 127.0.0.1:port."""
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def current_user() -> str:
    """The user that submits jobs (and owns the daemons: the harness runs as root)."""
    import pwd

    return pwd.getpwuid(os.getuid()).pw_name


if __name__ == "__main__":
    # Ctrl-C or SIGTERM stops the cluster, namespaces included (a shell's background job
    # inherits SIGINT ignored).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    root = Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else Path.cwd() / "slurm-cluster"
    with SlurmCluster(root) as cluster:
        for node in cluster.nodes.values():
            print(f"# {node.name}: {node.type}, {node.cpus} CPUs, {node.address} ({node.netns})")
        print(f"export SLURM_CONF={cluster.env['SLURM_CONF']}   # Ctrl-C or kill stops it")
        sys.stdout.flush()
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
