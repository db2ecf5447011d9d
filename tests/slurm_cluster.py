"""A real one-node Slurm cluster on localhost for the tests (Debian's slurm-wlm, munge, slurmdbd
and MariaDB, all installed by ./setup.sh --tests).

Everything lives in one folder: a munge key and socket, a MariaDB data directory, slurm.conf and
slurmdbd.conf, state, spool, logs and PID files; the daemons run in the foreground as children of
this process, on free localhost ports, and are stopped by their PIDs. Clients (sbatch, squeue,
sacct, ... and the Snakemake Slurm plugin) find the cluster through SLURM_CONF in `env`.

    with SlurmCluster(tmp_dir) as cluster:
        subprocess.run(["sbatch", "--wrap", "true"], env=cluster.env)

`python tests/slurm_cluster.py DIR` starts one by hand and prints the SLURM_CONF to export.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

# What the harness runs; ./setup.sh --tests installs them (slurm-wlm munge slurmdbd mariadb-server).
DAEMONS = [
    "munged",
    "mungekey",
    "mariadb-install-db",
    "mariadbd",
    "slurmdbd",
    "slurmctld",
    "slurmd",
]
CLUSTER = "numapore"
PARTITION = "numapore"
ACCOUNT = "numapore-test"
DATABASE = "slurm_acct_db"


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


def slurm_conf(root: Path, ports: dict[str, int], node: str) -> str:
    """slurm.conf for one node (this machine) and one default partition, all state under root."""
    host = node.split()[0].removeprefix("NodeName=")
    return f"""\
ClusterName={CLUSTER}
SlurmctldHost={host}(127.0.0.1)
SlurmUser=root
SlurmctldPort={ports['slurmctld']}
SlurmdPort={ports['slurmd']}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={root}/munge/munge.socket
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/run/slurmctld.pid
SlurmdPidFile={root}/run/slurmd.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd.log
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
SlurmdTimeout=60
InactiveLimit=0
{node} NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName={PARTITION} Nodes=ALL Default=YES MaxTime=INFINITE State=UP
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
    """Start munge, MariaDB, slurmdbd, slurmctld and slurmd under root; stop them on exit."""

    def __init__(self, root: Path):
        """A cluster to live under root (nothing starts before start() or `with`)."""
        self.root = Path(root)
        self.procs: list[tuple[str, subprocess.Popen]] = []
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

    def run(self, *cmd: str, check: bool = True) -> subprocess.CompletedProcess:
        """Run a Slurm client command against this cluster; ClusterError with its output."""
        result = subprocess.run(cmd, capture_output=True, text=True, env=self.env)
        if check and result.returncode != 0:
            raise ClusterError(
                f"{' '.join(cmd)} failed ({result.returncode}):\n{result.stdout}{result.stderr}"
            )
        return result

    def _daemon(self, name: str, *cmd: str) -> None:
        """Start a daemon in the foreground, its output in log/<name>.out."""
        out = open(self.root / "log" / f"{name}.out", "w")
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, env=self.env, start_new_session=True
        )
        out.close()
        self.procs.append((name, proc))

    def _wait(self, what: str, ready, timeout: float = 60) -> None:
        """Poll ready() until true; ClusterError naming what and the daemons' logs if not."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, proc in self.procs:
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

    def start(self) -> None:
        """Write the configuration, start every daemon, wait until the node is idle."""
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
        node = node_line()
        (self.root / "slurm.conf").write_text(slurm_conf(self.root, ports, node))
        dbd_conf = self.root / "slurmdbd.conf"
        dbd_conf.write_text(slurmdbd_conf(self.root, ports))
        os.chmod(
            dbd_conf, 0o600
        )  # slurmdbd refuses a readable configuration (it may hold a password)

        key = self.root / "munge" / "munge.key"
        subprocess.run(["mungekey", "--create", f"--keyfile={key}"], check=True)
        self._daemon(
            "munged", "munged", "--foreground", "--force",
            f"--socket={self.root}/munge/munge.socket", f"--key-file={key}",
            f"--pid-file={self.root}/run/munged.pid", f"--log-file={self.root}/log/munged.log",
            f"--seed-file={self.root}/munge/munged.seed",
        )  # fmt: skip
        self._wait("munged", (self.root / "munge" / "munge.socket").exists)

        datadir = self.root / "db" / "data"
        subprocess.run(
            [
                "mariadb-install-db", "--no-defaults", f"--datadir={datadir}", "--user=root",
                "--auth-root-authentication-method=normal", "--skip-test-db",
            ],
            capture_output=True, check=True,
        )  # fmt: skip
        self._daemon(
            "mariadbd", "mariadbd", "--no-defaults", f"--datadir={datadir}", "--user=root",
            f"--socket={self.root}/db/mysqld.sock", f"--port={ports['mariadb']}",
            "--bind-address=127.0.0.1", "--skip-name-resolve",
            f"--pid-file={self.root}/run/mariadbd.pid", f"--log-error={self.root}/log/mariadbd.log",
            "--innodb-buffer-pool-size=64M",
        )  # fmt: skip
        self._wait("MariaDB", lambda: port_open(ports["mariadb"]))

        self._daemon("slurmdbd", "slurmdbd", "-D")
        self._wait("slurmdbd", lambda: port_open(ports["slurmdbd"]))
        self._daemon("slurmctld", "slurmctld", "-D", "-i")
        self._wait("slurmctld", lambda: self.run("scontrol", "ping", check=False).returncode == 0)
        self._daemon("slurmd", "slurmd", "-D")
        self._wait("the node to be idle", self._node_idle)
        # An account for the submitting user, as a site would have (the plugin validates it).
        self._wait("the cluster in slurmdbd", self._cluster_registered)
        self.run("sacctmgr", "-i", "add", "account", ACCOUNT, f"cluster={CLUSTER}")
        self.run("sacctmgr", "-i", "add", "user", current_user(), f"account={ACCOUNT}")

    def _node_idle(self) -> bool:
        """True when sinfo reports the node idle."""
        result = self.run("sinfo", "-h", "-N", "-o", "%t", check=False)
        return result.returncode == 0 and result.stdout.strip() == "idle"

    def _cluster_registered(self) -> bool:
        """True when slurmctld has registered the cluster in the accounting database."""
        result = self.run("sacctmgr", "-n", "-P", "list", "cluster", "format=cluster", check=False)
        return CLUSTER in result.stdout.split()

    def jobs(self) -> list[dict[str, str]]:
        """Every job sacct knows (allocations, not steps): id, name, state, comment, CPUs."""
        fields = ["JobID", "JobName", "State", "Comment", "AllocCPUS", "Account", "Partition"]
        out = self.run(
            "sacct", "-X", "-a", "-n", "-P", "--starttime", "now-1days",
            f"--format={','.join(f + '%300' for f in fields)}",
        ).stdout  # fmt: skip
        return [
            dict(zip(fields, line.split("|"), strict=True)) for line in out.splitlines() if line
        ]

    def stop(self) -> None:
        """Cancel every job, then stop the daemons in reverse order (SIGTERM, then SIGKILL)."""
        if any(name == "slurmctld" and p.poll() is None for name, p in self.procs):
            self.run("scancel", "--full", "--user", current_user(), check=False)
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                result = self.run("squeue", "-h", check=False)
                if result.returncode != 0 or not result.stdout.strip():
                    break
                time.sleep(0.2)
        for _name, proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        self.procs.clear()


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
    root = Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else Path.cwd() / "slurm-cluster"
    with SlurmCluster(root) as cluster:
        print(f"export SLURM_CONF={cluster.env['SLURM_CONF']}   # Ctrl-C stops the cluster")
        sys.stdout.flush()
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
