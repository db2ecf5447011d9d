"""numapore's tobigwig, summary, sample-probs and stats against modkit 0.6.1's `bedmethyl
tobigwig`, `modbam summary`, `modbam sample-probs` and `stats`, side by side on the same input
at the same threads: each a fresh process under /usr/bin/time, medians of wall time and peak
RSS, and whether the outputs are modkit's (tables: the same sorted lines; bigWig: the same
intervals and values).

    nice -n 10 .venv/bin/python benchmarks/bench_modbam_a.py --modkit /path/to/modkit061 \\
        [--reads 100000] [--repeat 3] [--threads 4] [--keep DIR]

Inputs: bench_pileup.py's simulated modBAM (--reads reads, kept in --keep to reuse), its
bedMethyl (modkit pileup --cpg; bgzipped and indexed for stats, with a BED of 2,000 regions),
and the suite's largest input of these commands (../shared/data/modkit061_more: the 129-read
dorado modBAM and its bedMethyl).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import benchpath  # noqa: F401  (puts scripts/ on the path)
import pysam
from bench_pileup import REPO, simulate, timed

SUITE = REPO.parent / "shared" / "data" / "modkit061_more"
NUMAPORE = [sys.executable, "-m", "numapore.cli"]


def prepare(folder: Path, modkit: str, reads: int, threads: str) -> dict[str, Path]:
    """The simulated modBAM and the files made from it (made once in folder)."""
    ref, bam = folder / "ref.fa", folder / "sim.bam"
    if not bam.exists():
        ref, bam = simulate(folder, reads)
    bed = folder / "sim.cpg.bed"
    if not bed.exists():
        subprocess.run([modkit, "pileup", str(bam), str(bed), "--ref", str(ref), "--cpg",
                        "--modified-bases", "5mC", "5hmC", "--filter-threshold", "0.7",
                        "-t", threads, "--suppress-progress"], check=True)  # fmt: skip
    gz = folder / "sim.cpg.bed.gz"
    if not gz.exists():
        pysam.tabix_compress(str(bed), str(gz), force=True)
        pysam.tabix_index(str(gz), preset="bed", force=True)
    regions = folder / "regions.bed"
    lengths = dict(line.split("\t")[:2] for line in open(f"{ref}.fai"))
    with open(regions, "w") as out:
        for k in range(2000):
            chrom = sorted(lengths)[k % len(lengths)]
            start = (k * 2999) % (int(lengths[chrom]) - 5000)
            out.write(f"{chrom}\t{start}\t{start + 5000}\tr{k}\t0\t{'+-.'[k % 3]}\n")
    return {"bam": bam, "bed": bed, "gz": gz, "regions": regions, "fai": Path(f"{ref}.fai")}


def cases(files: dict[str, Path], out: Path, threads: str):
    """(name, modkit's argv after the binary, numapore's argv after `numapore`, output)."""
    bam, bed, gz, regions, fai = (files[k] for k in ("bam", "bed", "gz", "regions", "fai"))
    t = ["-t", threads]
    return [
        ("tobigwig", ["bedmethyl", "tobigwig", str(bed), "{out}", "-m", "h,m", "--sizes",
                      str(fai), *t, "--suppress-progress"],
         ["tobigwig", str(bed), "{out}", "-m", "h,m", "--sizes", str(fai)], "bw"),
        ("summary", ["modbam", "summary", str(bam), *t, "--suppress-progress"],
         ["summary", str(bam)], "stdout"),
        ("summary --no-sampling", ["modbam", "summary", str(bam), "--no-sampling",
                                   "--filter-threshold", "0.7", *t, "--suppress-progress"],
         ["summary", str(bam), "--no-sampling", "--filter-threshold", "0.7"], "stdout"),
        ("sample-probs", ["modbam", "sample-probs", str(bam), *t, "--suppress-progress"],
         ["sample-probs", str(bam)], "stdout"),
        ("stats", ["stats", str(gz), "--regions", str(regions), "-o", "{out}", *t],
         ["stats", str(gz), "--regions", str(regions), "-o", "{out}"], "file"),
    ]  # fmt: skip


def comparable(path: Path, kind: str) -> object:
    """What must match between the two outputs."""
    if kind == "bw":
        import pybigtools

        reader = pybigtools.open(str(path))
        return [(c, list(reader.records(c))) for c in sorted(reader.chroms())]
    lines = path.read_text().splitlines()
    return sorted(line.replace("C,A", "A,C") for line in lines)


def run_one(argv: list[str], kind: str, folder: Path) -> tuple[float, float, Path]:
    """One timed run into a fresh output; (wall, peak MB, output)."""
    out = Path(tempfile.mkdtemp(dir=folder)) / ("out.bw" if kind == "bw" else "out.txt")
    argv = [str(out) if a == "{out}" else a for a in argv]
    wall, rss = timed(argv, out if kind == "stdout" else None)
    return wall, rss, out


def main() -> None:
    """Run the benchmark and print its table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--modkit", required=True, help="modkit 0.6.1's binary")
    parser.add_argument("--reads", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", default="4")
    parser.add_argument("--keep", type=Path, help="folder for the inputs (kept, reused)")
    args = parser.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="bench_modbam_a."))
    folder.mkdir(parents=True, exist_ok=True)
    inputs = {"sim": prepare(folder, args.modkit, args.reads, args.threads)}
    suite = SUITE / "inputs"
    inputs["suite"] = {"bam": SUITE.parent / "modkit_pileup/inputs/testing_all_context_calls.bam",
                       "bed": suite / "dorado_modbases.bed", "gz": suite / "dorado_modbases.bed.gz",
                       "regions": suite / "regions_dorado.bed",
                       "fai": SUITE.parent / "modkit061_pileup/inputs/"
                       "5mers_rand_ref_adapter_10.consensus.fa.fai"}  # fmt: skip
    print(f"{'input':6} {'command':22} {'modkit s':>9} {'MB':>6} {'numapore s':>10} {'MB':>6}"
          f" {'ratio':>6}  same")  # fmt: skip
    for data, files in inputs.items():
        for name, modkit_argv, ours, kind in cases(files, folder, args.threads):
            if data == "suite" and name == "tobigwig":
                modkit_argv = [a.replace("h,m", "a,h") for a in modkit_argv]
                ours = [a.replace("h,m", "a,h") for a in ours]
            runs = {"modkit": [], "numapore": []}
            outs = {}
            for _ in range(args.repeat):  # interleaved
                for tool, argv in (("modkit", [args.modkit, *modkit_argv]),
                                   ("numapore", [*NUMAPORE, *ours])):  # fmt: skip
                    wall, rss, out = run_one(argv, kind, folder)
                    runs[tool].append((wall, rss))
                    outs[tool] = out
            same = comparable(outs["modkit"], kind) == comparable(outs["numapore"], kind)
            m = [statistics.median(x) for x in zip(*runs["modkit"], strict=True)]
            n = [statistics.median(x) for x in zip(*runs["numapore"], strict=True)]
            ratio = n[0] / max(m[0], 0.01)
            print(f"{data:6} {name:22} {m[0]:9.2f} {m[1]:6.0f} {n[0]:10.2f} {n[1]:6.0f}"
                  f" {ratio:6.2f}  {'yes' if same else 'NO'}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
