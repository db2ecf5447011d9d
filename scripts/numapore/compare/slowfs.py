"""Emulated slow storage: a read-only FUSE pass-through whose reads wait like a disk system's.

Why: on a workstation the FAST5 inputs sit in the page cache, every read returns in
microseconds, and nanopolish's raw-signal I/O modes cannot differ.  On HDD RAID or NFS each read
request costs milliseconds, and HDF5's global lock (nanopolish's T threads reading FAST5 through
one HDF5 library) lets only one request be outstanding at a time, so the threads wait in line,
while K processes (``fast5-pool``) or SLOW5 keep several requests in flight.  This module mounts
the inputs behind a filesystem that reproduces that: every read request waits ``latency_ms`` in
one of ``disks`` service slots (K disks; requests beyond K queue for a slot), so concurrency pays
off exactly as far as the storage has spindles.

Model and what is (not) cached:

* A request is one FUSE read as the kernel sends it.  Files are opened with ``direct_io``, so the
  page cache and readahead never answer a read: every ``read()``/``pread()`` of a program reaches
  this process, a large one split by the kernel into requests of up to 1 MiB (measured here,
  Linux 6.1 + libfuse 3.14).  Every request costs the same latency whatever its size (a
  seek-bound disk: no bandwidth limit is modelled).
* Data reads: wait for a free slot (the time waited is counted as queue wait), sleep
  ``latency_ms`` holding the slot, then read from the source file.
* Metadata (lookup/getattr, readdir, open) is served at once, without a slot, unless
  ``meta_latency_ms`` is given, in which case it waits that long in a slot like a read.  The
  kernel caches attributes and names for 1 s (FUSE defaults); file data is never cached.
* Sources are folders or files, each shown as one entry of the mount's root; symlinks inside
  them are followed (shown as what they point to).  Everything is read-only.

Measured through this mount (shared E. coli R9.4 reads, ~80 KB single-read FAST5): h5py reading
one read's signal takes ~26 read requests (~34 with the channel and read attributes nanopolish
also reads), ``nanopolish index -d`` ~22 per file; pyslow5 reading one BLOW5 record takes ~1
(plus ~9 once per file to open it and load the index).

API (the benchmark's cells)::

    with mounted({"fast5": Path("data/fast5")}, latency_ms=5, disks=4) as mnt:
        run_nanopolish(fast5_dir=mnt.path("data/fast5"))   # original path -> path under mnt
    mnt.stats.read_requests, mnt.stats.read_bytes, mnt.stats.queue_wait_s   # after unmount
    mnt.stats.as_dict()   # the emulation parameters and counters, for a summary row

``mounted`` also unpacks as ``(mountpoint, path_function)``.  The filesystem runs in a child
process (libfuse's multithreaded loop, so concurrent requests really are served concurrently);
the context waits until the mount is up, and on exit, exceptions included, unmounts
(``fusermount3 -u``, lazily when busy) and reaps the child, whose counters then fill ``stats``.
The child also unmounts and exits by itself when its parent process dies.

CLI (foreground until Ctrl-C or ``fusermount3 -u MOUNTPOINT``; counters printed at the end)::

    numapore slowfs [NAME=]SRC... MOUNTPOINT --latency-ms 5 \\
        --disks 4 [--meta-latency-ms 0] [--stats-json FILE]

Needs ``/dev/fuse``, libfuse 3 (Debian ``fuse3``, which brings ``fusermount3``) and ``mfusepy``.
Mounted by one user, the files are visible to that user only (no ``allow_other``).

Why one module of ~500 lines: it does one job, and its parts share the child-process protocol
(the filesystem's operations run in the child the context manager starts, waits for, unmounts
and reaps, and whose counters it reads back; the CLI is the same child in the foreground); split,
each half would need the other's internals. This description of the model is a tenth of it.
"""

from __future__ import annotations

import argparse
import errno
import json
import logging
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

FUSE_DEVICE = Path("/dev/fuse")
MOUNT_TIMEOUT_S = 20.0
CHILD_EXIT_TIMEOUT_S = 10.0
READ_ONLY_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
SCRIPTS_DIR = Path(__file__).resolve().parents[2]


class SlowFSError(RuntimeError):
    """The emulated storage could not be mounted; str() says why and what to install."""


@dataclass
class SlowFSStats:
    """Emulation parameters and counters of one mount (filled after unmount)."""

    latency_ms: float
    disks: int
    meta_latency_ms: float = 0.0
    read_requests: int = 0
    read_bytes: int = 0
    queue_wait_s: float = 0.0
    service_s: float = 0.0
    max_in_service: int = 0
    max_waiting: int = 0
    metadata_ops: int = 0
    opens: int = 0
    mounted_s: float = 0.0

    def as_dict(self, prefix: str = "storage_") -> dict[str, Any]:
        """The fields as a flat dict with prefixed keys, for a benchmark summary row."""
        return {prefix + key: value for key, value in asdict(self).items()}


@dataclass
class SlowMount:
    """A live mount: where it is, how to map original paths into it, and (after exit) stats."""

    mountpoint: Path
    sources: dict[str, Path]
    latency_ms: float
    disks: int
    meta_latency_ms: float = 0.0
    stats: SlowFSStats | None = None
    _pid: int = field(default=0, repr=False)

    def path(self, original: str | os.PathLike[str]) -> Path:
        """The path under the mount that serves original (a source or anything inside one)."""
        wanted = Path(original).resolve()
        best = None  # the innermost source holding wanted (a source itself wins)
        for name, source in self.sources.items():
            if wanted == source:
                return self.mountpoint / name
            if wanted.is_relative_to(source) and source.is_dir():
                if best is None or source.is_relative_to(self.sources[best]):
                    best = name
        if best is None:
            raise ValueError(f"{original} is not inside any source of the mount {self.mountpoint}")
        return self.mountpoint / best / wanted.relative_to(self.sources[best])

    def __iter__(self) -> Iterator[Any]:
        """Unpack as (mountpoint, path function)."""
        return iter((self.mountpoint, self.path))


def normalize_sources(sources: Mapping[str, Any] | Sequence[Any]) -> dict[str, Path]:
    """Name -> resolved existing path; a list is named by basenames (they must be unique)."""
    if isinstance(sources, Mapping):
        named = {str(name): Path(path) for name, path in sources.items()}
    else:
        named = {}
        for path in map(Path, sources):
            name = path.resolve().name
            if name in named:
                raise ValueError(
                    f"two sources named {name!r} ({named[name]}, {path}): pass a dict of names"
                )
            named[name] = path
    if not named:
        raise ValueError("no source to serve")
    result = {}
    for name, path in named.items():
        if not name or name in (".", "..") or "/" in name or "=" in name or "\0" in name:
            raise ValueError(f"bad source name {name!r} (no '/', '=', '.' or '..')")
        if not path.exists():
            raise FileNotFoundError(f"slowfs source does not exist: {path}")
        if not (path.is_dir() or path.is_file()):
            raise ValueError(f"slowfs source is neither a folder nor a file: {path}")
        result[name] = path.resolve()
    return result


class _Operations:
    """The FUSE callbacks: a read-only pass-through with disk-slot latency on reads."""

    # mfusepy installs every attribute named like a FUSE operation (lock, read, ...) as that
    # operation's callback: the state below is therefore all underscore-prefixed.
    use_ns = True

    def __init__(self, sources: dict[str, Path], latency_ms: float, disks: int, meta_ms: float):
        """Serve sources (name -> path) with the given per-request latencies and K slots."""
        if disks < 1:
            raise ValueError(f"disks must be >= 1, not {disks}")
        if latency_ms < 0 or meta_ms < 0:
            raise ValueError("latencies must be >= 0")
        self._sources = sources
        self._latency_s = latency_ms / 1000
        self._meta_s = meta_ms / 1000
        self._slots = threading.BoundedSemaphore(disks)
        self._lock = threading.Lock()
        self._in_service = 0
        self._waiting = 0
        self._started = time.monotonic()
        self._was_mounted = False
        self._stats = SlowFSStats(latency_ms=latency_ms, disks=disks, meta_latency_ms=meta_ms)

    def _real(self, path: str) -> Path | None:
        """The source path behind a mount path; None for the mount's root."""
        parts = path.strip("/").split("/", 1)
        if not parts[0]:
            return None
        source = self._sources.get(parts[0])
        if source is None:
            raise OSError(errno.ENOENT, "no such source", path)
        if len(parts) == 1:
            return source
        if not source.is_dir():
            raise OSError(errno.ENOTDIR, "not a directory", path)
        return source / parts[1]

    def _serve(self, seconds: float) -> float:
        """Wait for a free slot, hold it for seconds; return the time waited in the queue."""
        queued = time.monotonic()
        with self._lock:
            self._waiting += 1
            self._stats.max_waiting = max(self._stats.max_waiting, self._waiting)
        self._slots.acquire()
        got = time.monotonic()
        with self._lock:
            self._waiting -= 1
            self._in_service += 1
            self._stats.max_in_service = max(self._stats.max_in_service, self._in_service)
        try:
            time.sleep(seconds)
        finally:
            with self._lock:
                self._in_service -= 1
            self._slots.release()
        return got - queued

    def _metadata(self) -> None:
        """Count one metadata operation and, with a metadata latency, serve it in a slot."""
        waited = self._serve(self._meta_s) if self._meta_s > 0 else 0.0
        with self._lock:
            self._stats.metadata_ops += 1
            self._stats.queue_wait_s += waited

    def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
        """Attributes of the source behind path (write bits cleared); the root is a folder."""
        self._metadata()
        real = self._real(path)
        if real is None:
            return {"st_mode": stat.S_IFDIR | 0o555, "st_nlink": 2 + len(self._sources)}
        st = os.stat(real)
        return {
            "st_mode": st.st_mode & ~0o222,
            "st_nlink": st.st_nlink,
            "st_size": st.st_size,
            "st_uid": st.st_uid,
            "st_gid": st.st_gid,
            "st_atime": st.st_atime_ns,
            "st_mtime": st.st_mtime_ns,
            "st_ctime": st.st_ctime_ns,
            "st_blocks": st.st_blocks,
            "st_blksize": st.st_blksize,
        }

    def readdir(self, path: str, fh: int) -> list[str]:
        """Names in the folder behind path (the source names at the root)."""
        self._metadata()
        real = self._real(path)
        names = list(self._sources) if real is None else os.listdir(real)
        return [".", "..", *names]

    def open(self, path: str, flags: int) -> int:
        """Open the source file read-only; its descriptor is the FUSE file handle."""
        if flags & READ_ONLY_FLAGS:
            raise OSError(errno.EROFS, "read-only file system", path)
        self._metadata()
        real = self._real(path)
        if real is None:
            raise OSError(errno.EISDIR, "is a directory", path)
        fd = os.open(real, os.O_RDONLY)
        with self._lock:
            self._stats.opens += 1
        return fd

    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        """One read request: queue for a disk slot, wait the latency in it, then read."""
        queued = time.monotonic()
        waited = self._serve(self._latency_s) if self._latency_s > 0 else 0.0
        data = os.pread(fh, size, offset)
        with self._lock:
            self._stats.read_requests += 1
            self._stats.read_bytes += len(data)
            self._stats.queue_wait_s += waited
            self._stats.service_s += time.monotonic() - queued - waited
        return data

    def release(self, path: str, fh: int) -> int:
        """Close the source file's descriptor."""
        os.close(fh)
        return 0

    def statfs(self, path: str) -> dict[str, int]:
        """Filesystem figures of the first source's filesystem (for df)."""
        first = next(iter(self._sources.values()))
        st = os.statvfs(first if first.is_dir() else first.parent)
        keys = ("f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail", "f_files", "f_ffree")
        return {key: getattr(st, key) for key in keys} | {"f_namemax": st.f_namemax}

    def init(self, path: str) -> None:
        """Start the timer of the mount."""
        self._started = time.monotonic()
        self._was_mounted = True

    def final_stats(self) -> SlowFSStats:
        """The counters, with the time the filesystem was up."""
        self._stats.mounted_s = time.monotonic() - self._started
        return self._stats


def _watch_parent(parent_pid: int) -> None:
    """Stop the filesystem (SIGTERM to itself) when the parent process is gone."""
    while os.getppid() == parent_pid:
        time.sleep(1.0)
    os.kill(os.getpid(), signal.SIGTERM)


def serve(
    sources: dict[str, Path],
    mountpoint: Path,
    latency_ms: float,
    disks: int,
    meta_latency_ms: float = 0.0,
    stats_json: Path | None = None,
    parent_pid: int | None = None,
) -> SlowFSStats:
    """Mount and serve in the foreground until unmounted or signalled; return the counters."""
    try:
        import mfusepy
    except (ImportError, OSError) as exc:  # OSError: mfusepy found no libfuse
        raise SlowFSError(
            f"cannot load FUSE bindings ({exc}): pip install mfusepy, "
            "apt-get install fuse3 (libfuse3-3, fusermount3)"
        ) from exc
    operations = _Operations(sources, latency_ms, disks, meta_latency_ms)
    if parent_pid is not None:
        threading.Thread(target=_watch_parent, args=(parent_pid,), daemon=True).start()
    try:
        mfusepy.FUSE(
            operations,
            str(mountpoint),
            foreground=True,
            nothreads=False,
            ro=True,
            direct_io=True,
            fsname="numapore-slowfs",
        )
    except RuntimeError as exc:  # libfuse's exit status: fatal only if it never mounted
        if not operations._was_mounted:
            raise SlowFSError(f"could not mount {mountpoint} (libfuse status {exc})") from exc
        logging.getLogger(__name__).info("libfuse ended with status %s (lazy unmount)", exc)
    stats = operations.final_stats()
    if stats_json is not None:
        tmp = stats_json.with_name(stats_json.name + ".tmp")
        tmp.write_text(json.dumps(asdict(stats)))
        tmp.replace(stats_json)
    return stats


def check_fuse() -> None:
    """Fail with a clear message when this machine cannot mount FUSE filesystems."""
    if not FUSE_DEVICE.exists():
        raise SlowFSError(
            f"{FUSE_DEVICE} does not exist: load the fuse module (modprobe fuse) or, in a "
            "container, start it with --device /dev/fuse --cap-add SYS_ADMIN"
        )
    if not os.access(FUSE_DEVICE, os.R_OK | os.W_OK):
        raise SlowFSError(f"{FUSE_DEVICE} is not readable and writable by this user")
    if os.geteuid() != 0 and shutil.which("fusermount3") is None:
        raise SlowFSError("fusermount3 not found on PATH: apt-get install fuse3")


def _unmount(mountpoint: Path, lazy: bool = False) -> bool:
    """Unmount with fusermount3 (umount as a fallback); True when it succeeded."""
    if shutil.which("fusermount3"):
        cmd = ["fusermount3", "-uz" if lazy else "-u", str(mountpoint)]
    else:
        cmd = ["umount", *(["-l"] if lazy else []), str(mountpoint)]
    result = subprocess.run(cmd, capture_output=True, text=True)
    return result.returncode == 0


def _stop(child: subprocess.Popen, mountpoint: Path) -> None:
    """Unmount (lazily if busy, then SIGTERM), reap the child, escalating to SIGKILL."""
    if os.path.ismount(mountpoint) and not _unmount(mountpoint):
        # Busy (a file still open): detach it, and stop serving the files still open.
        _unmount(mountpoint, lazy=True)
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
    for sig in (None, signal.SIGTERM, signal.SIGKILL):
        if sig is not None and child.poll() is None:
            child.send_signal(sig)
        try:
            child.wait(CHILD_EXIT_TIMEOUT_S)
            break
        except subprocess.TimeoutExpired:
            continue
    if os.path.ismount(mountpoint):
        _unmount(mountpoint, lazy=True)


@contextmanager
def mounted(
    sources: Mapping[str, Any] | Sequence[Any],
    latency_ms: float,
    disks: int,
    meta_latency_ms: float = 0.0,
    mountpoint: str | os.PathLike[str] | None = None,
    timeout_s: float = MOUNT_TIMEOUT_S,
) -> Iterator[SlowMount]:
    """Serve sources through an emulated slow storage for the with-block; stats after it."""
    named = normalize_sources(sources)
    if disks < 1 or latency_ms < 0 or meta_latency_ms < 0:
        raise ValueError(f"need disks >= 1 and latencies >= 0 (disks={disks})")
    check_fuse()
    own_dir = mountpoint is None
    mp = Path(tempfile.mkdtemp(prefix="numapore-slowfs-")) if own_dir else Path(mountpoint)
    if not mp.is_dir():
        raise FileNotFoundError(f"mount point is not a folder: {mp}")
    mp = mp.resolve()
    if os.path.ismount(mp):
        raise SlowFSError(f"{mp} is already a mount point")
    work = Path(tempfile.mkdtemp(prefix="numapore-slowfs-run-"))
    stats_json, log = work / "stats.json", work / "stderr.log"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SCRIPTS_DIR), env.get("PYTHONPATH")]))
    cmd = [sys.executable, "-m", "numapore.compare.slowfs", *(f"{n}={p}" for n, p in named.items())]
    cmd += [str(mp), "--latency-ms", str(latency_ms), "--disks", str(disks)]
    cmd += ["--meta-latency-ms", str(meta_latency_ms), "--stats-json", str(stats_json)]
    cmd += ["--parent-pid", str(os.getpid()), "--quiet"]
    mount = SlowMount(mp, named, latency_ms, disks, meta_latency_ms)
    with open(log, "wb") as err:
        child = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=err, stderr=err, env=env, start_new_session=True
        )
    mount._pid = child.pid
    try:
        deadline = time.monotonic() + timeout_s
        while not os.path.ismount(mp):
            if child.poll() is not None:
                raise SlowFSError(
                    f"slowfs exited ({child.returncode}) before {mp} was mounted:\n"
                    + log.read_text(errors="replace")[-3000:]
                )
            if time.monotonic() > deadline:
                raise SlowFSError(
                    f"{mp} not mounted after {timeout_s:.0f} s (is {FUSE_DEVICE} usable and "
                    "fusermount3 installed?):\n" + log.read_text(errors="replace")[-3000:]
                )
            time.sleep(0.02)
        yield mount
    finally:
        _stop(child, mp)
        if stats_json.exists():
            mount.stats = SlowFSStats(**json.loads(stats_json.read_text()))
        else:
            logging.getLogger(__name__).warning(
                "slowfs at %s left no statistics:\n%s", mp, log.read_text(errors="replace")[-2000:]
            )
        shutil.rmtree(work, ignore_errors=True)
        if own_dir and not os.path.ismount(mp):
            os.rmdir(mp)


def _parse_source(text: str) -> tuple[str, Path]:
    """A CLI source: NAME=PATH, or PATH named by its basename."""
    name, sep, rest = text.partition("=")
    if sep and "/" not in name and name and not Path(text).exists():
        return name, Path(rest)
    return Path(text).resolve().name, Path(text)


def main(argv: Sequence[str] | None = None, prog: str = "numapore slowfs") -> int:
    """Command line: serve sources at a mount point until Ctrl-C or fusermount3 -u."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Serve folders/files read-only through an emulated slow storage (FUSE): "
        "every read request waits --latency-ms with at most --disks requests in service.",
    )
    parser.add_argument("sources", nargs="+", metavar="[NAME=]SRC", help="folders or files")
    parser.add_argument("mountpoint", type=Path, help="an existing empty folder")
    parser.add_argument("--latency-ms", type=float, default=5.0, help="per read request (5)")
    parser.add_argument("--disks", type=int, default=4, help="requests in service at once (4)")
    parser.add_argument(
        "--meta-latency-ms", type=float, default=0.0, help="per getattr/readdir/open (0: none)"
    )
    parser.add_argument("--stats-json", type=Path, help="write the counters here at the end")
    parser.add_argument("--parent-pid", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--quiet", action="store_true", help="no start/end lines on stderr")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="slowfs: %(message)s")
    pairs = [_parse_source(text) for text in args.sources]
    names = [name for name, _ in pairs]
    if len(set(names)) != len(names):
        parser.error(f"duplicate source names {names}: use NAME=SRC")
    try:
        sources = normalize_sources(dict(pairs))
        check_fuse()
    except (OSError, ValueError, SlowFSError) as exc:
        parser.error(str(exc))
    if not args.quiet:
        print(
            f"slowfs: serving {', '.join(sources)} at {args.mountpoint} ({args.latency_ms} ms "
            f"per read, {args.disks} disks); Ctrl-C or fusermount3 -u {args.mountpoint} stops",
            file=sys.stderr,
        )
    stats = serve(
        sources,
        args.mountpoint,
        args.latency_ms,
        args.disks,
        args.meta_latency_ms,
        args.stats_json,
        args.parent_pid,
    )
    if not args.quiet:
        print(f"slowfs: {json.dumps(asdict(stats))}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
