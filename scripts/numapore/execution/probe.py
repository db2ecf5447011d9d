"""The NUMA policy a process runs under (numactl --show, /proc/<pid>/status), one formatter for
it, and the command line: `numapore probe topology | policy | check HOST`."""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from numapore.execution.topology import NumaError, detect_topology, format_cpulist, parse_cpulist

# Run first inside every launched process: what the kernel says this process may use.
POLICY_PROBE = "{{ numactl --show; grep -E '^(Cpus|Mems)_allowed_list' /proc/self/status; }} > {}"

_SHOW_KEYS = (
    "preferred node",
    "interleavemask",
    "interleavenode",
    "physcpubind",
    "cpubind",
    "nodebind",
    "membind",
    "preferred",
    "policy",
)


def parse_numactl_show(text: str) -> dict[str, Any]:
    """Parse `numactl --show` into {policy, preferred_node, physcpubind, cpubind, ...}."""
    # numactl 2.0.16 omits a newline after "preferred node:" under --localalloc, so keys are
    # located anywhere in the text rather than at line starts.
    pattern = r"\b(" + "|".join(re.escape(k) for k in _SHOW_KEYS) + r"):"
    matches = list(re.finditer(pattern, text))
    out: dict[str, Any] = {}
    for m, nxt in zip(matches, [*matches[1:], None], strict=True):
        key = m.group(1).replace(" ", "_")
        value = text[m.end() : nxt.start() if nxt else len(text)].strip()
        if key in ("physcpubind", "cpubind", "nodebind", "membind", "interleavemask", "preferred"):
            out[key] = [int(x) for x in value.split()] if re.fullmatch(r"[\d\s]*", value) else value
        else:
            out[key] = value
    return out


def parse_proc_status(text: str) -> dict[str, tuple[int, ...]]:
    """Cpus_allowed_list and Mems_allowed_list from /proc/<pid>/status text."""
    out: dict[str, tuple[int, ...]] = {}
    for key in ("Cpus_allowed_list", "Mems_allowed_list"):
        m = re.search(rf"^{key}:\s*(.*)$", text, re.MULTILINE)
        if m:
            out[key] = parse_cpulist(m.group(1))
    return out


def read_policy(text: str) -> dict[str, Any]:
    """A policy record (what POLICY_PROBE writes: numactl --show, then the allowed lists) as
    {policy, membind, ..., cpus_allowed, mems_allowed}, the form policy_in_force returns."""
    status = parse_proc_status(text)
    show = "\n".join(ln for ln in text.splitlines() if not ln.startswith(("Cpus_", "Mems_")))
    return parse_numactl_show(show) | {
        "cpus_allowed": list(status.get("Cpus_allowed_list", ())),
        "mems_allowed": list(status.get("Mems_allowed_list", ())),
    }


def policy_in_force(pid: int | None = None, numactl: str = "numactl") -> dict[str, Any]:
    """The NUMA policy in force for this process (pid None) or another one, for job logs."""
    # CPUs come from /proc/<pid>/status. The memory policy is not in /proc: Mems_allowed_list
    # is the cpuset's and stays e.g. 0-1 under --membind=1. For this process `numactl --show`
    # (a child, which inherits our policy) reports it; for another pid only /proc is read.
    status_path = Path(f"/proc/{pid or 'self'}/status")
    status = parse_proc_status(status_path.read_text())
    out: dict[str, Any] = {
        "pid": pid or os.getpid(),
        "cpus_allowed": list(status.get("Cpus_allowed_list", ())),
        "mems_allowed": list(status.get("Mems_allowed_list", ())),
    }
    exe = shutil.which(numactl)
    if pid is None and exe:
        res = subprocess.run([exe, "--show"], capture_output=True, text=True, check=False)
        if res.returncode == 0:
            out.update(parse_numactl_show(res.stdout))
    return out


def format_policy(
    policy: Mapping[str, Any],
    asked_node: int | Sequence[int] | None = None,
    threads: int | None = None,
) -> str:
    """One log line for a policy (policy_in_force or read_policy): the policy, its memory
    nodes and allowed CPUs/nodes; with the node (or group of nodes) a launched process asked
    for and its threads."""

    def fmt(v: Any) -> str:
        """Lists as cpulists, other values as text."""
        return format_cpulist(v) if isinstance(v, list) and v else str(v or "-")

    parts = [] if "pid" not in policy else [f"pid {policy['pid']}:"]
    if isinstance(asked_node, int):
        parts.append(f"asked node={asked_node}")
    elif asked_node:
        parts.append(f"asked nodes={format_cpulist(list(asked_node))}")
    parts.append(f"policy={policy.get('policy', '?')}")
    for key in ("membind", "interleavemask", "preferred_node", "cpus_allowed", "mems_allowed"):
        if key in policy and policy[key] not in ("", [], None):
            parts.append(f"{key}={fmt(policy[key])}")
    if threads is not None:
        parts.append(f"threads={threads}")
    return " ".join(parts)


def main(argv: Sequence[str] | None = None, prog: str = "numapore probe") -> int:
    """CLI: `topology` prints the detected layout, `check HOST` validates, `policy` shows ours."""
    ap = argparse.ArgumentParser(prog=prog, description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p_top = sub.add_parser("topology", help="print this machine's NUMA layout")
    p_top.add_argument("--json", action="store_true", help="JSON instead of a summary line")
    p_chk = sub.add_parser("check", help="validate a host file against this machine")
    p_chk.add_argument("host", help="host name (config/hosts/NAME.yaml), path, or auto")
    p_pol = sub.add_parser("policy", help="print the NUMA policy this process runs under")
    p_pol.add_argument("--json", action="store_true", help="JSON instead of a summary line")
    args = ap.parse_args(argv)
    try:
        if args.cmd == "topology":
            topo = detect_topology()
            print(
                json.dumps(topo.to_dict() | {"source": topo.source})
                if args.json
                else topo.summary()
            )
        elif args.cmd == "check":
            # Only `check` reads host files: topology and policy stay light (the guest's probe).
            from numapore.execution.hosts import startup_check

            host, topo = startup_check(args.host)
            print(f"{host.path}: OK: {topo.summary()}")
        else:
            pol = policy_in_force()
            print(json.dumps(pol) if args.json else format_policy(pol))
    except NumaError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
