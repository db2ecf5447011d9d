"""Fuzz test of the FAST5 reader, the converter and the accounting census on damaged real files.

Random byte flips and truncations of real FAST5 files from ../shared (seeded; the seed is
printed, NUMAPORE_FUZZ_SEED=N replays a run), a bounded number of cases, each converted in a
process of its own with a timeout: the process never dies (no segfault, no abort inside HDF5),
never hangs, and every case either converts or stops with the converter's one-line error / a skip
listed with its reason, never a traceback.

Each case's process is forked from one interpreter that has imported the reader and the
converter and opened no file (FORKED_CASES): a fresh interpreter per case spent most of the
test's CPU importing h5py.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

CASES = int(os.environ.get("NUMAPORE_FUZZ_CASES", 60))  # more for a local hunt
TIMEOUT = 60  # seconds per case: far above a normal case's ~1 s, so only a hang reaches it
DRIVER = """
import sys
from numapore.signal.census import fast5_census
census = fast5_census([sys.argv[1]])
print(f"census: {census.total} reads, unreadable: {list(census.unreadable.values())}", flush=True)
from numapore.signal.convert import main
sys.exit(main(sys.argv[1:]))
"""


def mutate(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """Damage a file's bytes: flip random bytes, truncate it, or both; say what was done."""
    kind = rng.choice(["flip", "truncate", "both"])
    out = bytearray(data)
    what = []
    if kind in ("truncate", "both"):
        cut = rng.randrange(1, len(out))
        del out[cut:]
        what.append(f"truncated at {cut}")
    if kind in ("flip", "both"):
        # Mostly few flips; the HDF5 superblock and object headers sit in the first few KB.
        flips = rng.choice([1, 2, 5, 20, 200])
        front = rng.random() < 0.5
        for _ in range(flips):
            pos = rng.randrange(min(len(out), 4096) if front else len(out))
            out[pos] ^= rng.randrange(1, 256)
        what.append(f"{flips} bytes flipped{' in the first 4 KB' if front else ''}")
    return bytes(out), ", ".join(what)


def sources(ecoli_dir: Path, f2s_dir: Path) -> list[Path]:
    """Real files of each layout: single-read R9.4 reads and a multi-read file."""
    return sorted((ecoli_dir / "fast5").glob("*.fast5"))[:3] + [
        f2s_dir / "raw/single-fast5/sss1.fast5",
        f2s_dir / "raw/multi-fast5/ssm1.fast5",
    ]


# Reads cases (JSON lines: args, stdout and stderr files) and runs DRIVER's census and
# conversion for each in a forked child, as `python -c DRIVER ARGS` would with its streams in
# those files; answers each with the child's exit status (-N: killed by signal N, as
# subprocess says it; null: hung, killed after TIMEOUT s).
FORKED_CASES = """
import json, os, sys, time, traceback
from numapore.signal.census import fast5_census
from numapore.signal.convert import main

def child(case):
    for fd, name in ((1, case["stdout"]), (2, case["stderr"])):
        os.dup2(os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), fd)
    sys.argv = ["-c", *case["args"]]
    try:
        census = fast5_census([sys.argv[1]])
        print(f"census: {census.total} reads, unreadable: {list(census.unreadable.values())}")
        code = main(sys.argv[1:])
    except SystemExit as stop:
        code = stop.code
    except BaseException:
        traceback.print_exc()
        code = 1
    if not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 0 if code is None else 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)

for line in sys.stdin:
    case = json.loads(line)
    pid = os.fork()
    if pid == 0:
        child(case)
    deadline, status = time.monotonic() + TIMEOUT, None
    while time.monotonic() < deadline:
        done, wait = os.waitpid(pid, os.WNOHANG)
        if done:
            status = os.waitstatus_to_exitcode(wait)
            break
        time.sleep(0.01)
    else:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    print(json.dumps(status), flush=True)
""".replace("TIMEOUT", str(TIMEOUT))


class CaseRunner:
    """FORKED_CASES in one interpreter for the test; run() gives one case's outcome."""

    def __init__(self, folder: Path):
        self.folder = folder
        env = {**os.environ, "PYTHONPATH": str(REPO / "scripts")}
        self.proc = subprocess.Popen(
            [sys.executable, "-c", FORKED_CASES], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            text=True, env=env,
        )  # fmt: skip

    def run(self, path: Path, mode: str) -> subprocess.CompletedProcess | None:
        """Census + conversion of one damaged file in its own process; None when it hung."""
        out = path.with_suffix(".blow5")
        args = [str(path), "-o", str(out), "-q", "--on-bad-fast5", mode]
        streams = {k: str(path.with_suffix(f".{k}")) for k in ("stdout", "stderr")}
        self.proc.stdin.write(json.dumps({"args": args, **streams}) + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline()
        assert answer, f"the forking interpreter died at {path}"
        status = json.loads(answer)
        if status is None:
            return None
        text = {k: Path(v).read_text(errors="replace") for k, v in streams.items()}
        return subprocess.CompletedProcess(args, status, text["stdout"], text["stderr"])

    def close(self) -> None:
        self.proc.stdin.close()
        assert self.proc.wait(timeout=TIMEOUT) == 0


def test_damaged_fast5_never_crash_or_hang(tmp_path, ecoli_dir, f2s_dir):
    seed = int(os.environ.get("NUMAPORE_FUZZ_SEED", random.SystemRandom().randrange(1 << 30)))
    print(f"fuzz seed {seed} (replay: NUMAPORE_FUZZ_SEED={seed})")
    rng = random.Random(seed)
    files = sources(ecoli_dir, f2s_dir)
    outcomes: dict[str, int] = {}
    runner = CaseRunner(tmp_path)
    for case in range(CASES):
        src = rng.choice(files)
        data, what = mutate(src.read_bytes(), rng)
        path = tmp_path / f"case{case:03d}.fast5"
        path.write_bytes(data)
        mode = rng.choice(["fail", "skip"])
        label = f"seed {seed} case {case}: {src.name} {what}, on_bad_fast5 {mode}"
        result = runner.run(path, mode)
        assert result is not None, f"{label}: hung for {TIMEOUT} s"
        err = result.stderr
        assert result.returncode in (
            0,
            1,
        ), f"{label}: interpreter died ({result.returncode}):\n{err}"
        assert result.stdout.startswith("census: "), f"{label}: census failed:\n{err}"
        assert "Traceback" not in err, f"{label}: traceback:\n{err}"
        listing = Path(str(path.with_suffix(".blow5")) + ".rejected.tsv")
        if result.returncode == 1:
            assert err.startswith("numapore.convert: error: "), f"{label}: unclear error:\n{err}"
            assert str(path) in err or "no reads converted" in err, f"{label}: no file named"
            if mode == "skip":  # nothing convertible: the listing says why
                rows = listing.read_text().splitlines()[1:]
                assert rows and all(r.split("\t")[2] for r in rows), label
            outcome = "error" if mode == "fail" else "all skipped"
        elif listing.exists() and len(listing.read_text().splitlines()) > 1:
            rows = listing.read_text().splitlines()[1:]
            assert all(r.startswith(f"{path}\t") and r.split("\t")[2] for r in rows), label
            outcome = "partly skipped"
        else:
            assert path.with_suffix(".blow5").stat().st_size > 0, label
            outcome = "converted"
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    runner.close()
    print(f"fuzz outcomes over {CASES} cases: {outcomes}")
    # The damage must actually bite: some cases are refused.
    assert outcomes.get("error", 0) + outcomes.get("all skipped", 0) > 0, outcomes


@pytest.mark.parametrize("case", range(3))
def test_mutate_is_seeded_and_damages(case):
    """The same seed damages a file the same way; the damage changes or shortens it."""
    data = bytes(range(256)) * 64
    a, what = mutate(data, random.Random(case))
    assert (a, what) == mutate(data, random.Random(case))
    assert a != data and what


# Found by this fuzz test (seed 260166592, case 32): one flipped byte in an attribute message of
# a multi-read file makes Debian's HDF5 1.10 (the compiled reader's) read past a buffer and, after
# h5py has opened the file in the same process, segfault (on this machine, not on every clone).
# h5py's HDF5 refuses it cleanly.
CRASHER = ("raw/multi-fast5/ssm1.fast5", 3648, 74)


@pytest.mark.parametrize("processes", ["1", "2"])
def test_file_that_crashes_debians_hdf5_is_refused_cleanly(tmp_path, f2s_dir, processes):
    """The file (which kills the compiled reader's worker here, depending on the heap layout)
    is refused by name after the census, as in the workflow, and the rest is converted."""
    name, offset, value = CRASHER
    good = f2s_dir / name
    data = bytearray(good.read_bytes())
    data[offset] = value
    bad = tmp_path / "damaged.fast5"
    bad.write_bytes(data)
    env = {**os.environ, "PYTHONPATH": str(REPO / "scripts")}
    out = tmp_path / "out.blow5"
    args = [str(bad), str(good), "-o", str(out), "-p", processes, "--on-bad-fast5"]
    cmd = [sys.executable, "-c", DRIVER, *args]
    failed = subprocess.run([*cmd, "fail"], capture_output=True, text=True, env=env, timeout=60)
    assert failed.returncode == 1, failed.stderr
    assert f"numapore.convert: error: {bad}: unreadable FAST5" in failed.stderr
    skipped = subprocess.run([*cmd, "skip"], capture_output=True, text=True, env=env, timeout=60)
    assert skipped.returncode == 0, skipped.stderr
    # Whether Debian's HDF5 segfaults on it depends on the heap layout (a clean clone elsewhere
    # refused it without a crash), so either path must give this outcome. The crash path itself
    # is tested deterministically by test_convert's worker that dies of SIGSEGV.
    rows = Path(f"{out}.rejected.tsv").read_text().splitlines()[1:]
    assert len(rows) == 1 and rows[0].startswith(f"{bad}\t.\tunreadable FAST5 ("), rows
    alone = tmp_path / "alone.blow5"
    subprocess.run([*cmd[:3], str(good), "-o", str(alone), "-q"], env=env, check=True, timeout=60)
    assert out.read_bytes() == alone.read_bytes()
