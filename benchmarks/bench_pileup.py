"""numapore's pileup against modkit's `modkit pileup`, side by side in one run: each modkit given
(`--modkit`, its version from `modkit --version`) against numapore at the same semantics
(`--modkit-compat 0.6` for modkit 0.6.x, `0.4` for 0.4.x; numapore's other semantics is timed
too, with no modkit to compare when none of its version is given), beside the decoding floor
(`samtools view -o /dev/null` of the same BAM). At 1 and 2 threads, interleaved, each run a
fresh process under /usr/bin/time; medians of wall time and peak RSS, the ratio to modkit, and
whether the bedMethyl bytes are modkit's.

    .venv/bin/python benchmarks/bench_pileup.py --modkit /path/to/modkit061 \\
        [--modkit /path/to/modkit044] [--reads 100000] \\
        [--tile-bam demo.minimap2.cpg.modbam.bam --tile-ref ecoli_dh10b.fa --tile 100] \\
        [--repeat 3] [--threads 1,2] [--keep DIR] [--data sim,tiled]

With --tune, instead: host tuning of the pileup (numapore.compare.tune_pileup, what `tune: on`
runs in checkpoint tune_pileup) on the modBAM, at each --tune-share (5 %: the default cap; 100 %:
the cells may take half the whole pileup), then the whole pileup under every candidate (the run's
untuned setting, one job of every core, first), each as the run's pileup jobs run (each region
share a process, as many at once as cores / threads), interleaved, to see whether the choice was
right; the tuned run's cost is the tuning's seconds plus the chosen setting's wall (times
--tune-jobs: a run of that many such pileups), against the untuned setting's:

    nice -n 10 .venv/bin/python benchmarks/bench_pileup.py --tune --data sim --reads 300000 \\
        [--tune-share 0.05 --tune-share 1] [--tune-jobs 10] [--keep DIR]

Two modBAMs:
- sim: simulated (simulate()): a random reference of a few contigs, reads from both strands
  with substitutions, insertions, deletions and soft clips, and dorado-style explicit calls
  (`C+h?;C+m?`) at every CpG C of the read, with some reads marked duplicate or secondary;
- tiled: a modBAM (the demo's: nanopolish's calls, `C+m?`) with each record repeated --tile
  times under new names: high depth on a short stretch; the workflow's LLR-2 threshold.
"""

from __future__ import annotations

import argparse
import array
import hashlib
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
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


def tile(source: Path, times: int, out: Path) -> Path:
    """out: every record of source repeated `times` times in a row (names suffixed .1, .2 ...),
    so the BAM stays sorted; indexed."""
    with pysam.AlignmentFile(source, "rb") as src:
        with pysam.AlignmentFile(out, "wb", template=src) as dst:
            for rec in src:
                name = rec.query_name
                for k in range(times):
                    rec.query_name = f"{name}.{k}"
                    dst.write(rec)
    pysam.index(str(out))
    return out


def timed(command: list[str], out: Path | None = None) -> tuple[float, float]:
    """Run command under /usr/bin/time (this tree's scripts/ on the path; stdout to out, or
    dropped); (wall seconds, peak RSS in MB)."""
    return timed_cpu(command, out)[:2]


def timed_cpu(command: list[str], out: Path | None = None) -> tuple[float, float, float]:
    """timed's (wall seconds, peak RSS in MB) and the user CPU seconds (on a shared machine
    the wall time is its load's as much as the tool's)."""
    env = dict(os.environ, PYTHONPATH=str(REPO / "scripts"))
    with tempfile.NamedTemporaryFile("r") as report:
        full = ["/usr/bin/time", "-f", "%e %M %U", "-o", report.name, *command]
        with open(out or os.devnull, "wb") as stdout:
            done = subprocess.run(full, stdout=stdout, stderr=subprocess.PIPE, text=True, env=env)
        if done.returncode != 0:
            sys.exit(f"numapore: {command[0]} failed: {done.stderr[-2000:]}")
        wall, rss, user = report.read().split()[-3:]
    return float(wall), float(rss) / 1024, float(user)


def digest(path: Path) -> str:
    """MD5 of a file."""
    return hashlib.md5(path.read_bytes()).hexdigest()


def modkit_version(path: str) -> str:
    """A modkit binary's version: 0.6.1 of `mod_kit 0.6.1`."""
    out = subprocess.run([path, "--version"], capture_output=True, text=True, check=True).stdout
    return out.split()[-1]


# Per modBAM, the pileups timed: (label, numapore's --modkit-compat, options of both tools)
LLR2 = "0.8807970779778824"  # the workflow's threshold of nanopolish's calls (LLR 2)
CASES = {
    "sim": [
        ("cpg", "0.6", "--motif CG 0 --combine-strands"),
        ("modbases", "0.6", "--cpg --modified-bases 5mC 5hmC --combine-strands"),
        ("cpg", "0.4", "--cpg --combine-strands"),
    ],
    "tiled": [
        ("cpg", "0.6", f"--motif CG 0 --combine-strands --filter-threshold {LLR2}"),
        ("cpg", "0.4", f"--cpg --combine-strands --filter-threshold {LLR2}"),
    ],
}


def commands(tools, compat, options, bam, ref, out_dir, t):
    """(name, command, output file) of each tool for one case at t threads: numapore, and each
    modkit of the case's semantics."""
    common = [str(bam), "--ref", str(ref), "--threads", str(t), *shlex.split(options)]
    ours = [sys.executable, "-m", "numapore.pileup.cli", "--quiet"]
    out = out_dir / f"numapore.{compat}.{t}.bed"
    runs = [("numapore", [*ours, common[0], str(out), *common[1:], "--modkit-compat", compat], out)]
    for version, path in tools:
        if version.rsplit(".", 1)[0] == compat:
            out = out_dir / f"modkit{version}.{t}.bed"
            command = [path, "pileup", common[0], str(out), *common[1:], "--suppress-progress"]
            runs.append((f"modkit {version}", command, out))
    return runs


def bench(name, bam, ref, tools, args) -> None:
    """Time every case of one modBAM, interleaved; print its table."""
    threads = [int(t) for t in args.threads.split(",")]
    folder = bam.parent
    times: dict[tuple, list[tuple[float, float]]] = {}
    digests: dict[tuple, set[str]] = {}
    for _ in range(args.repeat):
        for t in threads:
            floor = ["samtools", "view", "-@", str(t - 1), "-o", "/dev/null", str(bam)]
            times.setdefault(("floor", "samtools view", t), []).append(timed_cpu(floor))
            for label, compat, options in CASES[name]:
                if label not in args.cases.split(","):
                    continue
                for tool, command, out in commands(tools, compat, options, bam, ref, folder, t):
                    key = (f"{label} {compat}", tool, t)
                    times.setdefault(key, []).append(timed_cpu(command))
                    digests.setdefault(key, set()).add(digest(out))
    reads = int(pysam.view("-c", "-F", "0x904", str(bam)).strip())
    print(f"\n{name}: {bam} ({reads} primary mapped reads), medians of {args.repeat}")
    print(f"{'case':14} {'tool':14} {'threads':>7} {'wall s':>8} {'x modkit':>8} {'peak MB':>8}"
          f" {'user s':>8}  bytes  (wall s of each repeat)")  # fmt: skip
    for key in sorted(times, key=lambda k: (k[0] != "floor", k[0], k[2], k[1])):
        case, tool, t = key
        wall = statistics.median(r[0] for r in times[key])
        rss = statistics.median(r[1] for r in times[key])
        modkits = [k for k in times if k[0] == case and k[2] == t and k[1].startswith("modkit")]
        ratio, same = "", ""
        if modkits:
            ratio = f"{wall / statistics.median(r[0] for r in times[modkits[0]]):.2f}"
            if tool == "numapore":
                theirs = digests[modkits[0]]
                same = "same" if digests[key] == theirs and len(theirs) == 1 else "DIFFER"
        if case == "floor":
            same = ""
        user = statistics.median(r[2] for r in times[key])
        each = ", ".join(f"{r[0]:.2f}" for r in times[key])
        print(f"{case:14} {tool:14} {t:>7} {wall:>8.2f} {ratio:>8} {rss:>8.0f} {user:>8.2f}  "
              f"{same}  ({each})")  # fmt: skip


def bench_tune(name: str, bam: Path, ref: Path, args) -> None:
    """The pileup's host tuning on a modBAM (the workflow's pileup: settings, motif cpg), then
    the whole pileup untuned and under each share's choice (see the module's docstring)."""
    import yaml

    from numapore.compare import tune_pileup
    from numapore.compare.measure import MIN_MEASURABLE_S
    from numapore.pileup.settings import numapore_arguments
    from numapore.workflow.jobs import options_of

    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    settings = {**config["pileup"], "motif": "cpg"}
    # each setting gives its threads
    arguments = numapore_arguments(options_of(settings, str(ref)))[:-2]
    cores = args.cores or os.cpu_count() or 1
    candidates, _ = tune_pileup.candidates(1, cores, cores)
    with pysam.AlignmentFile(str(bam)) as handle:
        contigs = list(zip(handle.references, handle.lengths, strict=True))
        records = handle.mapped
    genome = tune_pileup.window_regions(contigs, sum(n for _, n in contigs))
    work = Path(tempfile.mkdtemp(prefix="bench_tune_pileup."))
    print(f"\n## {name}: {records:,} mapped records, {len(contigs)} contigs, {cores} cores")
    chosen = {}
    for share in args.tune_share:
        start = time.monotonic()
        result = tune_pileup.tune(
            str(bam), arguments, candidates, cores, args.tune_jobs, 2, share, MIN_MEASURABLE_S,
            work / f"tune{share}", lambda line: None,
        )  # fmt: skip
        seconds = time.monotonic() - start
        choice = result["choice"] or result["candidates"][0]
        chosen[share] = (tuple(tune_pileup.setting_of(choice, candidates).values()), seconds)
        walls = "; ".join(f"{n}: " + ", ".join(f"{w:.2f}" for w in ws)
                          for n, ws in result["walls"].items())  # fmt: skip
        print(f"- share {share:.0%}: tuning {seconds:.1f} s, window "
              f"{result['slice']['bases']:,} bases ({result['slice']['records']:,} records), "
              f"whole estimated {result['whole_s']:.1f} s; choice {choice}: {result['why']}"
              + (f"; cells: {walls}" if walls else ""))  # fmt: skip
    settings_run = list(candidates)  # every candidate on the whole: was the choice right?
    walls: dict = {s: [] for s in settings_run}
    rows = {}
    for repeat in range(args.repeat):
        for setting in settings_run if repeat % 2 == 0 else settings_run[::-1]:
            folder = work / f"whole.{setting[0]}x{setting[1]}.r{repeat}"
            wall, text = tune_pileup.run_cell(str(bam), arguments, setting, genome, cores, folder)
            walls[setting].append(wall)
            rows.setdefault(setting, hashlib.md5(text).hexdigest())
    base = statistics.median(walls[candidates[0]])
    print("\n| setting | whole pileup wall (s), each repeat | median | same rows as untuned |")
    print("| --- | --- | --- | --- |")
    for setting, ws in walls.items():
        same = rows[setting] == rows[candidates[0]]
        print(f"| {tune_pileup.label(setting)} | {', '.join(f'{w:.2f}' for w in ws)} | "
              f"{statistics.median(ws):.2f} | {same} |")  # fmt: skip
    jobs = args.tune_jobs
    for share, (setting, seconds) in chosen.items():
        tuned = seconds + jobs * statistics.median(walls[setting])
        print(f"- share {share:.0%}: tuned (tuning {seconds:.1f} s + {jobs} x "
              f"{tune_pileup.label(setting)}) {tuned:.1f} s against untuned {jobs} x {base:.2f} s "
              f"= {jobs * base:.1f} s: x{tuned / (jobs * base):.3f}")  # fmt: skip
    shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    """Make (or reuse --keep's) modBAMs, time both tools on each, print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--modkit", action="append", default=[], help="a modkit binary")
    parser.add_argument("--reads", type=int, default=100_000, help="simulated reads")
    parser.add_argument("--tile-bam", type=Path, help="a modBAM to tile (the demo's)")
    parser.add_argument("--tile-ref", type=Path, help="its reference FASTA")
    parser.add_argument("--tile", type=int, default=100, help="copies of each record")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="folder for the modBAMs (kept, reused)")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--data", default="sim,tiled", help="which modBAMs: sim, tiled")
    parser.add_argument("--cases", default="cpg,modbases", help="which CASES labels")
    parser.add_argument("--tune", action="store_true", help="the pileup's host tuning instead")
    parser.add_argument("--tune-share", type=float, action="append", help="tuning.share (0.05, 1)")
    parser.add_argument("--cores", type=int, default=0, help="--tune's cores (default: all)")
    parser.add_argument(
        "--tune-jobs", type=int, default=1, help="the run's pileup jobs (samples x motifs) alike"
    )
    args = parser.parse_args()
    args.tune_share = args.tune_share or [0.05, 1.0]
    tools = [(modkit_version(path), path) for path in args.modkit]
    folder = args.keep or Path(tempfile.mkdtemp(prefix="bench_pileup."))
    data = args.data.split(",")
    if "sim" in data:
        sim = folder / f"sim{args.reads}"
        bam, ref = sim / "sim.bam", sim / "ref.fa"
        if not (bam.exists() and (sim / "sim.bam.bai").exists()):
            print(f"simulating {args.reads} reads in {sim} ...", flush=True)
            ref, bam = simulate(sim, args.reads)
        (bench_tune if args.tune else bench)("sim", bam, ref, *([] if args.tune else [tools]), args)
    if "tiled" in data and args.tile_bam:
        tiled = folder / f"tiled{args.tile}"
        tiled.mkdir(parents=True, exist_ok=True)
        bam = tiled / "tiled.bam"
        if not (tiled / "tiled.bam.bai").exists():
            tile(args.tile_bam, args.tile, bam)
        if args.tune:
            bench_tune("tiled", bam, args.tile_ref, args)
        else:
            bench("tiled", bam, args.tile_ref, tools, args)


if __name__ == "__main__":
    main()
