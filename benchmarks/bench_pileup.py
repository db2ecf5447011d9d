"""numapore's pileup against modkit's `modkit pileup` on a simulated modBAM: both at 1 and 2
threads, interleaved, each run in a fresh process under /usr/bin/time; medians of wall time
and peak RSS printed, and whether the bedMethyl bytes match modkit's.

    .venv/bin/python benchmarks/bench_pileup.py --modkit /path/to/modkit \\
        [--reads 100000] [--repeat 3] [--options "--cpg --combine-strands"] [--keep DIR]

The simulated modBAM (simulate()): a random reference of a few contigs, reads from both strands
with substitutions, insertions, deletions and soft clips, and dorado-style explicit calls
(`C+h?;C+m?`) at every CpG C of the read, with some reads marked duplicate or secondary.
"""

from __future__ import annotations

import argparse
import array
import hashlib
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import benchpath  # noqa: F401  (puts scripts/ on the path)
import numpy as np
import pysam

REPO = Path(__file__).resolve().parent.parent
COMPLEMENT = bytes.maketrans(b"ACGT", b"TGCA")
MEAN_LENGTH = 3000
BASE_CODE = np.zeros(256, dtype=np.int64)
BASE_CODE[np.frombuffer(b"ACGT", np.uint8)] = np.arange(4)


def simulate(
    folder: Path, n_reads: int, seed: int = 7, contigs: int = 3, contig_length: int = 2_000_000
) -> tuple[Path, Path]:
    """Write folder/ref.fa (+ .fai) and folder/sim.bam (+ .bai); their paths."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    ref_path, bam_path = folder / "ref.fa", folder / "sim.bam"
    seqs = {}
    with open(ref_path, "w") as fa:
        for c in range(contigs):
            seq = rng.choice(
                np.frombuffer(b"ACGT", np.uint8), contig_length, p=[0.29, 0.21, 0.21, 0.29]
            )
            seqs[f"chr{c + 1}"] = seq.tobytes()
            text = seqs[f"chr{c + 1}"].decode()
            fa.write(f">chr{c + 1}\n")
            fa.writelines(text[i : i + 80] + "\n" for i in range(0, len(text), 80))
    pysam.faidx(str(ref_path))
    header = {"HD": {"VN": "1.6", "SO": "coordinate"},
              "SQ": [{"SN": n, "LN": len(s)} for n, s in seqs.items()]}  # fmt: skip
    names = list(seqs)
    records = []
    for i in range(n_reads):
        tid = int(rng.integers(contigs))
        ref = seqs[names[tid]]
        length = int(min(max(rng.exponential(MEAN_LENGTH), 300), 20_000))
        start = int(rng.integers(0, len(ref) - length - 1))
        records.append(make_read(rng, i, tid, start, ref[start : start + length]))
    records.sort(key=lambda r: (r[0], r[1]))
    unsorted = folder / "unsorted.bam"
    with pysam.AlignmentFile(unsorted, "wb", header=header) as out:
        for tid, start, fields in records:
            rec = pysam.AlignedSegment(out.header)
            rec.query_name, rec.flag, cigar, seq, mm, ml = fields
            rec.reference_id, rec.reference_start, rec.mapping_quality = tid, start, 60
            rec.cigartuples, rec.query_sequence = cigar, seq
            rec.set_tag("MM", mm, "Z")
            rec.set_tag("ML", array.array("B", ml))
            out.write(rec)
    unsorted.rename(bam_path)
    pysam.index(str(bam_path))
    return ref_path, bam_path


def make_read(rng, i: int, tid: int, start: int, ref: bytes):
    """One aligned read of ref (reference orientation) with errors and its MM/ML tags."""
    arr = np.frombuffer(ref, np.uint8)
    n = len(arr)
    ops = rng.choice(4, n, p=[0.92, 0.03, 0.03, 0.02])  # match, substitution, deletion, insert
    ops[0] = ops[-1] = 0  # aligned bases at both ends
    acgt = np.frombuffer(b"ACGT", np.uint8)
    bases = arr.copy()
    sub = ops == 1
    bases[sub] = acgt[(BASE_CODE[arr[sub]] + rng.integers(1, 4, int(sub.sum()))) % 4]
    # per reference base: M (or D), and an I after it for insertions
    per = np.where(ops == 3, 2, 1)
    tokens = np.repeat(np.where(ops == 2, 2, 0), per)
    tokens[np.cumsum(per)[ops == 3] - 1] = 1
    seq_parts = np.repeat(bases, per)
    seq_parts[np.cumsum(per)[ops == 3] - 1] = acgt[rng.integers(0, 4, int((ops == 3).sum()))]
    seq = seq_parts[tokens != 2]
    change = np.flatnonzero(np.diff(tokens)) + 1
    starts = np.concatenate(([0], change))
    lengths = np.diff(np.concatenate((starts, [len(tokens)])))
    cigar = [(int(tokens[a]), int(ln)) for a, ln in zip(starts, lengths, strict=True)]
    clip = int(rng.integers(0, 40))
    if clip:
        seq = np.concatenate((acgt[rng.integers(0, 4, clip)], seq))
        cigar.insert(0, (4, clip))
    reverse = bool(rng.random() < 0.5)
    fwd_bytes = seq.tobytes().translate(COMPLEMENT)[::-1] if reverse else seq.tobytes()
    fwd = np.frombuffer(fwd_bytes, np.uint8)
    cs = np.flatnonzero(fwd == 67)
    cpg = np.flatnonzero((fwd[:-1] == 67) & (fwd[1:] == 71))
    rank = np.searchsorted(cs, cpg)
    deltas = np.diff(np.concatenate(([-1], rank))) - 1
    m = np.clip(rng.beta(5, 2, len(cpg)) * 256, 0, 255).astype(int)
    h = np.clip(rng.beta(1, 8, len(cpg)) * 256, 0, 255 - m).astype(int)
    dl = "".join(f",{d}" for d in deltas)
    mm = f"C+h?{dl};C+m?{dl};"
    ml = np.concatenate([h, m]).astype(np.uint8)
    flag = 16 if reverse else 0
    roll = rng.random()
    if roll < 0.01:
        flag |= 1024  # duplicate
    elif roll < 0.02:
        flag |= 256  # secondary
    return tid, start, (f"read{i:07d}", flag, cigar, seq.tobytes().decode(), mm, ml.tobytes())


def timed(command: list[str]) -> tuple[float, float]:
    """Run command under /usr/bin/time (this tree's scripts/ on the path); (wall seconds, peak
    RSS in MB)."""
    env = dict(os.environ, PYTHONPATH=str(REPO / "scripts"))
    with tempfile.NamedTemporaryFile("r") as report:
        full = ["/usr/bin/time", "-f", "%e %M", "-o", report.name, *command]
        done = subprocess.run(full, capture_output=True, text=True, env=env)
        if done.returncode != 0:
            sys.exit(f"numapore: {command[0]} failed: {done.stderr[-2000:]}")
        wall, rss = report.read().split()[-2:]
    return float(wall), float(rss) / 1024


def digest(path: Path) -> str:
    """MD5 of a file."""
    return hashlib.md5(path.read_bytes()).hexdigest()


def main() -> None:
    """Simulate (or reuse --keep's data), time both tools interleaved, print the medians."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--modkit", required=True, help="modkit 0.4.4 binary")
    parser.add_argument("--reads", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--options", default="", help="pileup options for both tools")
    parser.add_argument("--keep", type=Path, help="folder for the simulated data (kept)")
    parser.add_argument("--threads", default="1,2")
    args = parser.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="bench_pileup."))
    bam, ref = folder / "sim.bam", folder / "ref.fa"
    if not (bam.exists() and (folder / "sim.bam.bai").exists()):
        print(f"simulating {args.reads} reads in {folder} ...", flush=True)
        ref, bam = simulate(folder, args.reads)
    options = shlex.split(args.options)
    ours = [sys.executable, "-m", "numapore.methylation.pileup_cli", "--quiet"]
    results: dict[tuple[str, int], list[tuple[float, float]]] = {}
    digests: dict[tuple[str, int], set[str]] = {}
    threads = [int(t) for t in args.threads.split(",")]
    for _ in range(args.repeat):
        for t in threads:
            for tool in ("modkit", "numapore"):
                out = folder / f"{tool}.{t}.bed"
                common = [str(bam), str(out), "--ref", str(ref), "--threads", str(t), *options]
                if tool == "modkit":
                    command = [args.modkit, "pileup", *common, "--suppress-progress"]
                else:
                    command = [*ours, *common]
                results.setdefault((tool, t), []).append(timed(command))
                digests.setdefault((tool, t), set()).add(digest(out))
    print(f"{'tool':10} {'threads':>7} {'wall s':>8} {'peak MB':>8}  (medians of {args.repeat})")
    for (tool, t), runs in sorted(results.items()):
        wall = statistics.median(r[0] for r in runs)
        rss = statistics.median(r[1] for r in runs)
        print(f"{tool:10} {t:>7} {wall:>8.2f} {rss:>8.0f}")
    reference = digests[("modkit", threads[0])]
    for key, seen in sorted(digests.items()):
        print(f"{key[0]} {key[1]} thread(s): bytes {'match' if seen == reference else 'DIFFER'}")


if __name__ == "__main__":
    main()
