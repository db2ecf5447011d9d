"""Run shell commands inside a small emulated multi-node NUMA guest (virtme-ng + QEMU).

The guest boots the Debian kernel from /boot on a read-only view of this machine's own files,
so the repository, .venv and numactl are there as-is (writes go to a throw-away overlay). With
software emulation (no /dev/kvm) a boot plus a short command takes roughly 1.5-2 minutes.

Needs Debian's qemu-system-x86, linux-image-amd64 and busybox-static, and PyPI's virtme-ng in
the venv. Manual use:  .venv/bin/python tests/numa_guest.py 'numactl --hardware'
Set NUMAPORE_GUEST_KVM=1 to use KVM where it works (see kvm_wanted).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEBIAN_PACKAGES = ("qemu-system-x86", "linux-image-amd64", "busybox-static")
PYPI_PACKAGES = ("virtme-ng==1.42",)
INSTALL_HINT = (
    f"apt-get install --no-install-recommends {' '.join(DEBIAN_PACKAGES)} && "
    f".venv/bin/pip install {' '.join(PYPI_PACKAGES)}"
)


class GuestToolsMissing(RuntimeError):
    """QEMU, virtme-ng, busybox or a readable kernel image is not installed."""


# vng hands the guest its command on the kernel command line (COMMAND_LINE_SIZE 2048 on x86,
# shared with vng's own options): a longer command never starts and the guest idles forever.
MAX_COMMAND_BYTES = 1500


def find_vng() -> Path | None:
    """The virtme-ng launcher: beside this Python (the venv) first, then on PATH."""
    beside = Path(sys.executable).parent / "vng"
    if beside.exists():
        return beside
    found = shutil.which("vng")
    return Path(found) if found else None


def _version_key(path: Path) -> list[tuple[int, object]]:
    """Sort key comparing kernel file names by their numeric parts (6.1.0-10 > 6.1.0-9)."""
    return [(0, int(p)) if p.isdigit() else (1, p) for p in re.split(r"(\d+)", path.name)]


def find_kernel() -> Path | None:
    """The guest kernel: $NUMAPORE_GUEST_KERNEL, else the newest readable /boot/vmlinuz-*."""
    override = os.environ.get("NUMAPORE_GUEST_KERNEL")
    if override:
        return Path(override)
    images = sorted(Path("/boot").glob("vmlinuz-*"), key=_version_key, reverse=True)
    readable = [p for p in images if os.access(p, os.R_OK)]
    return readable[0] if readable else None


def missing_tools() -> list[str]:
    """Human-readable list of what the guest needs and this machine lacks (empty = ready)."""
    missing = []
    if not shutil.which("qemu-system-x86_64"):
        missing.append("qemu-system-x86_64 (Debian package qemu-system-x86)")
    if not (shutil.which("busybox") or Path("/bin/busybox").exists()):
        missing.append("busybox (Debian package busybox-static), used for the guest initramfs")
    if find_vng() is None:
        missing.append(f"vng (PyPI package {PYPI_PACKAGES[0]} in {Path(sys.executable).parent})")
    kernel = find_kernel()
    if kernel is None:
        missing.append("a readable /boot/vmlinuz-* (Debian package linux-image-amd64; run as root)")
    elif not os.access(kernel, os.R_OK):
        missing.append(f"read access to {kernel}")
    if not shutil.which("numactl"):
        missing.append("numactl (Debian package numactl)")
    return missing


def require_guest_tools() -> tuple[Path, Path]:
    """Return (vng, kernel) or raise GuestToolsMissing saying what to install."""
    missing = missing_tools()
    if missing:
        raise GuestToolsMissing(
            "NUMA guest unavailable, missing: " + "; ".join(missing) + f". Install: {INSTALL_HINT}"
        )
    vng, kernel = find_vng(), find_kernel()
    assert vng is not None and kernel is not None  # guaranteed by missing_tools()
    return vng, kernel


def kvm_wanted() -> bool:
    """Use KVM only when NUMAPORE_GUEST_KVM=1 and /dev/kvm is usable."""
    # Not automatic: on the development machines /dev/kvm exists but a KVM guest hangs in
    # early boot (nested virtualisation), while software emulation works everywhere.
    return os.environ.get("NUMAPORE_GUEST_KVM") == "1" and os.access("/dev/kvm", os.R_OK | os.W_OK)


def vng_command(
    cmd: str,
    nodes: int = 2,
    cpus_per_node: int = 1,
    node_memory_mib: int = 1024,
    cwd: Path = REPO,
    kvm: bool | None = None,
    rwdirs: tuple[Path, ...] = (),
) -> list[str]:
    """The vng argv booting a guest of `nodes` NUMA nodes and running shell command cmd
    (rwdirs: host folders the guest writes to for real, e.g. to hand results back)."""
    vng, kernel = require_guest_tools()
    argv = [str(vng), "--run", str(kernel)]
    if not (kvm_wanted() if kvm is None else kvm):
        argv.append("--disable-kvm")
    argv += ["-m", f"{nodes * node_memory_mib}M", "--cpus", str(nodes * cpus_per_node)]
    for n in range(nodes):
        first, last = n * cpus_per_node, (n + 1) * cpus_per_node - 1
        cpus = str(first) if first == last else f"{first}-{last}"
        argv += ["--numa", f"{node_memory_mib}M,cpus={cpus}"]
    for path in rwdirs:
        argv += ["--rwdir", str(path)]
    argv += ["--cwd", str(cwd), "--", cmd]
    return argv


def run_in_numa_guest(
    cmd: str,
    timeout: float = 600.0,
    nodes: int = 2,
    cpus_per_node: int = 1,
    node_memory_mib: int = 1024,
    env: Mapping[str, str] | None = None,
    cwd: Path = REPO,
    kvm: bool | None = None,
    rwdirs: tuple[Path, ...] = (),
) -> subprocess.CompletedProcess[str]:
    """Boot a NUMA guest, run shell command cmd in it, return its exit code and output."""
    # Node n gets CPUs n*cpus_per_node.. and node_memory_mib MiB; env is exported before cmd.
    # Raises GuestToolsMissing if the tools are absent, subprocess.TimeoutExpired on timeout.
    exports = "".join(f"export {k}={shlex.quote(v)}; " for k, v in (env or {}).items())
    if len(exports + cmd) > MAX_COMMAND_BYTES:
        raise ValueError(
            f"guest command of {len(exports + cmd)} bytes: vng passes it on the kernel command "
            f"line (2 KiB with its own options; longer ones hang the guest at boot). Keep it "
            f"under {MAX_COMMAND_BYTES} bytes: write the script to a file and run `sh FILE`."
        )
    argv = vng_command(exports + cmd, nodes, cpus_per_node, node_memory_mib, cwd, kvm, rwdirs)
    host_env = dict(os.environ)
    # vng starts its helper `virtme-run` through PATH, so the venv's bin must be on it.
    host_env["PATH"] = f"{Path(argv[0]).parent}{os.pathsep}{host_env.get('PATH', '')}"
    # Own process group: on timeout QEMU (a grandchild) is killed along with vng.
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=host_env,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise subprocess.TimeoutExpired(argv, timeout, out, err) from None
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


if __name__ == "__main__":
    start = time.monotonic()
    res = run_in_numa_guest(" ".join(sys.argv[1:]) or "numactl --hardware")
    sys.stdout.write(res.stdout)
    sys.stderr.write(res.stderr)
    print(f"[guest exit {res.returncode} after {time.monotonic() - start:.1f} s]", file=sys.stderr)
    sys.exit(res.returncode)
