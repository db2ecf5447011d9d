"""The emulated slow storage (numapore.compare.slowfs): a real FUSE mount over the shared FAST5
reads.

Timing is only checked as lower bounds that follow from the sleeps (N requests served one at a
time with latency L take at least N*L), never as upper bounds, so a busy machine cannot fail them.
"""

import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import h5py
import numpy as np
import pytest
from conftest import REPO

from numapore.signal import fast5  # noqa: F401  (registers the vbz filter with h5py)
from numapore.compare import slowfs
from numapore.compare.slowfs import SlowFSError, SlowMount, mounted
from numapore.signal import convert as convert_mod
from numapore.signal import fast5_core
from numapore.signal.convert import convert

VBZ_DIR = Path(__file__).parent / "data" / "vbz"  # a multi-read FAST5 of 3 reads


@pytest.fixture(scope="module")
def fast5_files(ecoli_dir: Path) -> list[Path]:
    """The shared single-read FAST5 files, sorted."""
    files = sorted((ecoli_dir / "fast5").glob("*.fast5"))
    assert len(files) > 10
    return files


def timed_reads(path: Path, offsets: list[int], size: int = 4096) -> None:
    """pread size bytes at each offset of path (one FUSE request each under direct_io)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        for offset in offsets:
            assert len(os.pread(fd, size, offset)) == size
    finally:
        os.close(fd)


def test_serves_identical_bytes_read_only(fast5_files, tmp_path):
    folder, single = fast5_files[0].parent, fast5_files[-1]
    with mounted({"f5": folder, "one.fast5": single}, latency_ms=1, disks=2) as mnt:
        assert os.path.ismount(mnt.mountpoint)
        assert sorted(os.listdir(mnt.mountpoint)) == ["f5", "one.fast5"]
        assert sorted(os.listdir(mnt.path(folder))) == sorted(p.name for p in fast5_files)
        for original in fast5_files[:5]:
            under = mnt.path(original)
            assert under == mnt.mountpoint / "f5" / original.name
            assert under.stat().st_size == original.stat().st_size
            assert under.read_bytes() == original.read_bytes()
        assert mnt.path(single).read_bytes() == single.read_bytes()
        with pytest.raises(OSError):
            open(mnt.path(fast5_files[0]), "r+b")
        with pytest.raises(OSError):
            (mnt.path(folder) / "new.txt").write_text("x")
        with pytest.raises(ValueError, match="not inside any source"):
            mnt.path(tmp_path)
        mountpoint, to_mount = mnt  # also unpacks as (mountpoint, path function)
        assert to_mount(single) == mountpoint / "one.fast5"
    assert not mnt.mountpoint.exists()  # the temporary mount point is removed
    stats = mnt.stats
    read = sum(p.stat().st_size for p in [*fast5_files[:5], single])
    assert stats.read_bytes >= read and stats.read_requests >= 6 and stats.opens >= 6
    summary = stats.as_dict()
    assert summary["storage_latency_ms"] == 1 and summary["storage_disks"] == 2


def test_h5py_reads_fast5_signal_through_mount(fast5_files):
    original = fast5_files[0]
    with h5py.File(original, "r") as f:
        read = next(iter(f["Raw/Reads"]))
        expected = f[f"Raw/Reads/{read}/Signal"][()]
        channel = dict(f["UniqueGlobalKey/channel_id"].attrs)
    with mounted([original.parent], latency_ms=2, disks=4) as mnt:
        with h5py.File(mnt.path(original), "r") as f:
            signal_ = f[f"Raw/Reads/{read}/Signal"][()]
            assert dict(f["UniqueGlobalKey/channel_id"].attrs).keys() == channel.keys()
    np.testing.assert_array_equal(signal_, expected)
    # HDF5 reads a FAST5 in many small requests (superblock, B-trees, attributes, chunks).
    assert mnt.stats.opens == 1 and mnt.stats.read_requests > 5


def test_conversion_reads_a_file_whole_once(tmp_path, monkeypatch):
    """numapore's conversion reads a FAST5 whole, in one pass (one request a MiB), and keeps it
    for the next slice of its reads; object by object (files above CORE_MAX_BYTES) a multi-read
    file of 3 reads in slices of one read costs dozens of requests. Same bytes either way."""
    monkeypatch.setattr(convert_mod, "SLICE_READS", 1)
    # Forked readers, which see the patched CORE_MAX_BYTES: the pool spawns fresh interpreters
    # (the module's own value) when this process runs another thread, as an earlier test in
    # the same worker may leave one running (CI's run read the file whole both times).
    fork = multiprocessing.get_context("fork")
    monkeypatch.setattr(convert_mod, "_pool_context", lambda: fork)
    requests, outputs, whole = {}, set(), fast5_core.CORE_MAX_BYTES
    for core_max in (whole, 0):
        monkeypatch.setattr(fast5_core, "CORE_MAX_BYTES", core_max)
        out = tmp_path / f"{core_max}.blow5"
        with mounted([VBZ_DIR], latency_ms=1, disks=4) as mnt:
            convert([mnt.path(VBZ_DIR)], out, progress=None, write_index=False)
        requests[core_max] = mnt.stats.read_requests
        outputs.add(out.read_bytes())
    size = (VBZ_DIR / "batch_0.fast5").stat().st_size
    assert requests[whole] == -(-size // (1 << 20)) == 1
    assert requests[0] > 30 and len(outputs) == 1


def test_sequential_requests_wait_the_latency_each(fast5_files):
    latency_ms, n = 20, 8
    with mounted([fast5_files[0].parent], latency_ms=latency_ms, disks=4) as mnt:
        under = mnt.path(fast5_files[0])
        start = time.monotonic()
        timed_reads(under, [i * 8192 for i in range(n)])
        elapsed = time.monotonic() - start
    assert mnt.stats.read_requests == n  # direct_io: no page cache, no readahead
    assert mnt.stats.read_bytes == n * 4096
    assert elapsed >= n * latency_ms / 1000
    assert mnt.stats.service_s >= n * latency_ms / 1000


def concurrent_round(under: Path, readers: int, per_reader: int) -> float:
    """Wall time of readers threads each doing per_reader requests, started together."""
    barrier = threading.Barrier(readers + 1)

    def reader(k: int) -> None:
        barrier.wait()
        timed_reads(under, [(k * per_reader + i) * 4096 for i in range(per_reader)])

    threads = [threading.Thread(target=reader, args=(k,)) for k in range(readers)]
    for thread in threads:
        thread.start()
    barrier.wait()
    start = time.monotonic()
    for thread in threads:
        thread.join()
    return time.monotonic() - start


@pytest.mark.parametrize("disks", [1, 4])
def test_disks_limit_requests_in_service(fast5_files, disks):
    latency_ms, readers, per_reader = 20, 4, 4
    with mounted([fast5_files[0].parent], latency_ms=latency_ms, disks=disks) as mnt:
        elapsed = concurrent_round(mnt.path(fast5_files[0]), readers, per_reader)
    stats = mnt.stats
    assert stats.read_requests == readers * per_reader
    assert 1 <= stats.max_in_service <= disks
    if disks == 1:  # one slot: every request waits for all the others
        assert elapsed >= readers * per_reader * latency_ms / 1000
        assert stats.queue_wait_s > 0 and stats.max_waiting >= 2
    else:  # the FUSE process really serves concurrent requests concurrently
        assert stats.max_in_service >= 2


def test_unmounts_and_reaps_on_exception_even_with_open_file(fast5_files):
    fd = None
    with pytest.raises(RuntimeError, match="inside the block"):
        with mounted([fast5_files[0].parent], latency_ms=1, disks=1) as mnt:
            fd = os.open(mnt.path(fast5_files[0]), os.O_RDONLY)  # keeps the mount busy
            os.pread(fd, 16, 0)
            raise RuntimeError("inside the block")
    try:
        assert not os.path.ismount(mnt.mountpoint)
        with pytest.raises(ProcessLookupError):
            os.kill(mnt._pid, 0)
        assert mnt.stats is not None and mnt.stats.read_requests == 1
    finally:
        try:
            os.close(fd)
        except OSError:  # the connection is gone: ENOTCONN
            pass


def test_missing_source_and_bad_arguments_fail_clearly(tmp_path, fast5_files):
    missing = tmp_path / "no_such_fast5"
    with pytest.raises(FileNotFoundError, match="no_such_fast5"):
        with mounted([missing], latency_ms=1, disks=1):
            pass
    with pytest.raises(ValueError, match="two sources named"):
        with mounted([fast5_files[0], fast5_files[0]], latency_ms=1, disks=1):
            pass
    with pytest.raises(ValueError, match="disks"):
        with mounted([fast5_files[0]], latency_ms=1, disks=0):
            pass
    mount = SlowMount(tmp_path, {"a": fast5_files[0]}, 1, 1)
    with pytest.raises(ValueError, match="not inside"):
        mount.path(fast5_files[1])


def test_missing_fuse_device_is_named(monkeypatch, tmp_path, fast5_files):
    monkeypatch.setattr(slowfs, "FUSE_DEVICE", tmp_path / "fuse")
    with pytest.raises(SlowFSError, match=f"{tmp_path / 'fuse'} does not exist"):
        with mounted([fast5_files[0]], latency_ms=1, disks=1):
            pass


def run_cli(*args: str, **kwargs) -> subprocess.Popen:
    """Start python -m numapore.compare.slowfs with the repository's package on the path."""
    env = dict(os.environ, PYTHONPATH=str(REPO / "scripts"))
    return subprocess.Popen(
        [sys.executable, "-m", "numapore.compare.slowfs", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )


def test_cli_serves_until_ctrl_c(fast5_files, tmp_path):
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    source = fast5_files[0]
    cli = run_cli(
        f"reads={source.parent}", str(mountpoint), "--latency-ms", "1", "--disks", "2",
        "--stats-json", str(tmp_path / "stats.json"),
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 20
        while not os.path.ismount(mountpoint):
            assert cli.poll() is None, cli.communicate()
            assert time.monotonic() < deadline, "CLI did not mount"
            time.sleep(0.02)
        assert (mountpoint / "reads" / source.name).read_bytes() == source.read_bytes()
        cli.send_signal(signal.SIGINT)
        _, err = cli.communicate(timeout=20)
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()
            subprocess.run(["fusermount3", "-uz", str(mountpoint)], capture_output=True)
    assert cli.returncode == 0, err
    assert not os.path.ismount(mountpoint)
    assert "serving reads" in err and '"read_requests"' in err
    assert (tmp_path / "stats.json").exists()


def test_cli_names_a_missing_source(tmp_path):
    cli = run_cli(str(tmp_path / "absent"), str(tmp_path))
    _, err = cli.communicate(timeout=30)
    assert cli.returncode == 2 and f"does not exist: {tmp_path / 'absent'}" in err
