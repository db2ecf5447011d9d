"""The cohort at genome scale: the workflow's own scripts (rules cohort_table, dmr_counts,
dmr_test) on simulated bedMethyl files of 12 samples (6 case, 6 control), each job under
/usr/bin/time: wall, CPU and peak memory per job.

    nice -n 10 .venv/bin/python benchmarks/bench_cohort.py --sites 400000 --contigs chr21
    nice -n 10 .venv/bin/python benchmarks/bench_cohort.py --sites 2300000 --contigs chr1 \
        --max-memory-gb 3 --folder /tmp/cohort58/chr1

The cohort: --sites CpGs over --contigs (human chromosome names; their CpGs in proportion to
GRCh38's lengths), one every ~100 bases with a CpG-poor stretch (a gap of 6-30 kb) every ~3,000
CpGs, as a human genome has them. Per sample a bedMethyl as modkit pileup --cpg --combine-strands
writes it (code m, strand '.'); per site a coverage ~ Poisson(15) (a sample has no row where it
is 0, and misses 3 % of sites besides) and modified calls ~ Binomial(coverage, p), p a smooth
pattern and 1 % of 5 kb blocks where the case group differs by 0.4.

Each job runs the rule's script (scripts/cohort_table.py, scripts/dmr_counts.py,
scripts/dmr_test.R) with the inputs, params and log the rule gives it, one after the other;
dmr_test once per DMR shard (--shards, config scatter.dmr), with --max-memory-gb as config
dmr.max_memory_gb. Figures are printed; nothing is asserted. Everything is written under
--folder and deleted at the end unless --keep.
"""

from __future__ import annotations

import argparse
import atexit
import os
import pickle
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import benchpath  # noqa: F401  (puts scripts/ on the path)
import numpy as np
import polars as pl

from numapore.methylation.cohort import Filters
from numapore.methylation.dmr import DSS_KEYS, Contrast

REPO = Path(__file__).resolve().parent.parent
# GRCh38 chromosome lengths (Mb)
HUMAN_MB = dict(zip([f"chr{i}" for i in range(1, 23)] + ["chrX", "chrY"],
                    [248, 242, 198, 190, 181, 171, 159, 145, 138, 134, 135, 133, 114, 107, 102, 90,
                     83, 80, 59, 64, 47, 51, 156, 57], strict=True))  # fmt: skip
CASES = [f"case{i}" for i in range(1, 7)]
CONTROLS = [f"control{i}" for i in range(1, 7)]
SETTINGS = {"smoothing": True, "smoothing_span": 500, "delta": 0.1, "p_threshold": 1e-5,
            "minlen": 50, "min_cg": 3, "dis_merge": 100, "pct_sig": 0.5}  # fmt: skip
# A rule script run as Snakemake runs it: the snakemake object (input, output, params, log,
# threads) from a pickle.
PY_RUNNER = r"""
import pickle, runpy, sys
from types import SimpleNamespace
job = pickle.load(open(sys.argv[1], "rb"))
class Named(list):
    pass
def named(items):
    out = Named(v for value in items.values()
                for v in (value if isinstance(value, list) else [value]))
    out.__dict__.update(items)
    return out
smk = SimpleNamespace(input=named(job["input"]), output=named(job["output"]),
                      params=SimpleNamespace(**job["params"]), log=[job["log"]], threads=1,
                      wildcards=SimpleNamespace())
runpy.run_path(job["script"], init_globals={"snakemake": smk}, run_name="__main__")
"""
R_RUNNER = r"""
args <- commandArgs(trailingOnly = TRUE)
setClass("Snakemake", representation(input = "list", output = "list", params = "list",
  log = "list", threads = "numeric"))
contrast <- list(name = "case_vs_control", label1 = "case", label2 = "control",
  group1 = as.list(strsplit(args[7], ",")[[1]]), group2 = as.list(strsplit(args[8], ",")[[1]]),
  smoothing = TRUE, smoothing_span = 500, delta = 0.1, p_threshold = 1e-5, minlen = 50,
  min_cg = 3, dis_merge = 100, pct_sig = 0.5)
params <- list(contrasts = list(contrast))
snakemake <- new("Snakemake", input = list(counts = list(args[1])),
  output = list(sites = list(args[2]), dmrs = list(args[3]), summary = args[4]),
  params = params, log = list(args[5]), threads = 1)
source(args[6])
"""


def contig_sites(sites: int, contigs: list[str]) -> dict[str, int]:
    """The CpGs of each contig: sites in proportion to the chromosomes' lengths."""
    mb = np.array([HUMAN_MB[c] for c in contigs], dtype=float)
    return dict(zip(contigs, np.maximum(1, np.round(sites * mb / mb.sum())).astype(int).tolist(),
                    strict=True))  # fmt: skip


def write_cohort(folder: Path, per_contig: dict[str, int], seed: int = 5) -> tuple[list, Path]:
    """The samples' bedMethyl files and the reference's .fai: [(sample, path)], fai."""
    rng = np.random.default_rng(seed)
    samples = CASES + CONTROLS
    beds = [(s, folder / f"{s}.bed") for s in samples]
    for _, path in beds:
        path.write_bytes(b"")
    fai = folder / "genome.fa.fai"
    fai.write_text("".join(f"{c}\t{HUMAN_MB[c] * 1_000_000}\t0\t60\t61\n" for c in per_contig))
    for contig, n in per_contig.items():
        gaps = rng.integers(2, 200, n)
        gaps[rng.random(n) < 1 / 3000] += rng.integers(6000, 30000)  # CpG-poor stretches
        pos = np.cumsum(gaps)
        base = np.clip(0.5 + 0.45 * np.sin(pos / 7000.0), 0.02, 0.98)
        differs = (pos // 5000) % 100 == 0
        for sample, path in beds:
            cov = rng.poisson(15, n)
            p = np.where(differs & sample.startswith("case"), np.clip(base - 0.4, 0, 1), base)
            mod = rng.binomial(cov, np.clip(p + rng.normal(0, 0.03, n), 0, 1))
            keep = (cov > 0) & (rng.random(n) > 0.03)
            c, m, s = cov[keep], mod[keep], pos[keep]
            frame = pl.DataFrame({
                "chrom": contig, "start": s, "end": s + 1, "name": "m", "score": c, "strand": ".",
                "ts": s, "te": s + 1, "colour": "255,0,0", "valid": c,
                "percent": np.round(100.0 * m / c, 2), "n_mod": m, "n_canonical": c - m,
                **{k: np.zeros(len(s), dtype=np.int64) for k in ("o", "d", "f", "df", "nc")},
            })  # fmt: skip
            with open(path, "ab") as out:
                frame.write_csv(out, separator="\t", include_header=False, float_precision=2)
    return beds, fai


def timed(command: list[str], what: str, env: dict | None = None) -> dict:
    """A command under /usr/bin/time -v: wall s, CPU s, peak RSS GiB."""
    start = time.monotonic()
    done = subprocess.run(
        ["/usr/bin/time", "-v", *command], capture_output=True, text=True, env=env
    )
    wall = time.monotonic() - start
    if done.returncode:
        sys.exit(f"{what} failed:\n{done.stderr[-3000:]}")

    def field(name: str) -> float:
        return float(re.search(rf"{re.escape(name)}: ([0-9.:]+)", done.stderr).group(1))

    cpu = field("User time (seconds)") + field("System time (seconds)")
    return {"job": what, "wall": wall, "cpu": cpu,
            "rss_gib": field("Maximum resident set size (kbytes)") / 2**20}  # fmt: skip


def run_script(folder: Path, name: str, script: str, job: dict, scripts: Path = REPO) -> dict:
    """A rule's Python script as the rule runs it (that of the checkout scripts), timed."""
    runner = folder / "runner.py"
    runner.write_text(PY_RUNNER)
    spec = folder / f"{name}.job.pickle"
    job = {**job, "script": str(scripts / "scripts" / script), "log": str(folder / f"{name}.log")}
    spec.write_bytes(pickle.dumps(job))
    env = {**os.environ, "PYTHONPATH": str(scripts / "scripts")}
    return timed([sys.executable, str(runner), str(spec)], name, env)


def run_dss(folder: Path, counts: Path) -> dict:
    """scripts/dmr_test.R on one shard's counts, timed; with its summary line's figures."""
    runner = folder / "runner.R"
    runner.write_text(R_RUNNER)
    stem = counts.name.removesuffix(".counts.tsv")
    outs = [folder / f"{stem}.{kind}" for kind in ("sites.tsv", "dmrs.tsv", "summary.txt", "log")]
    r = timed(["Rscript", str(runner), str(counts), *map(str, outs),
               str(REPO / "scripts" / "dmr_test.R"), ",".join(CASES), ",".join(CONTROLS),
               ], f"dmr_test {stem}")  # fmt: skip
    summary = outs[2].read_text().splitlines()[1].split("\t")
    return {**r, "sites": int(summary[1]), "dmrs": int(summary[3])}


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; print its figures."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sites", type=int, default=400_000, help="CpGs in all")
    p.add_argument("--contigs", default="chr21", help="comma-separated, or 'human' (all 24)")
    p.add_argument("--shards", type=int, default=1, help="DMR shards (config scatter.dmr)")
    p.add_argument("--max-memory-gb", type=float, help="config dmr.max_memory_gb")
    p.add_argument("--folder", type=Path, default=Path("/tmp/cohort58/bench"))
    p.add_argument("--keep", action="store_true", help="keep the folder")
    p.add_argument("--skip", default="", help="comma-separated jobs not to run (cohort, dmr, dss)")
    p.add_argument(
        "--baseline", type=Path, help="another checkout: its cohort_table and dmr_counts beside"
    )
    p.add_argument("--repeats", type=int, default=1, help="of the cohort table, alternated")
    a = p.parse_args(argv)
    contigs = list(HUMAN_MB) if a.contigs == "human" else a.contigs.split(",")
    folder = a.folder
    folder.mkdir(parents=True, exist_ok=True)
    if not a.keep:  # everything it wrote is under --folder
        atexit.register(shutil.rmtree, folder, True)
    skip = set(a.skip.split(","))
    t0 = time.monotonic()
    per_contig = contig_sites(a.sites, contigs)
    beds, fai = write_cohort(folder, per_contig)
    size = sum(path.stat().st_size for _, path in beds) / 2**30
    print(f"cohort: {sum(per_contig.values()):,} CpGs x {len(beds)} samples over "
          f"{len(contigs)} contigs, {size:.2f} GiB of bedMethyl, written in "
          f"{time.monotonic() - t0:.0f} s", flush=True)  # fmt: skip
    rows = []
    checkouts = {"": REPO, " (baseline)": a.baseline} if a.baseline else {"": REPO}
    for repeat in range(a.repeats if "cohort" not in skip else 0):
        for label, checkout in list(checkouts.items())[:: 1 if repeat % 2 == 0 else -1]:
            samples = [s for s, _ in beds]
            table = folder / "cohort.bed.gz"
            rows.append(run_script(folder, "cohort_table" + label, "cohort_table.py", {
                "input": {"beds": [str(b) for _, b in beds], "fai": str(fai)},
                "output": {"table": str(table), "tbi": f"{table}.tbi",
                           "samples": str(folder / "cohort.samples.tsv")},
                "params": {"samples": samples, "filters": Filters(),
                           "groups": {s: s.rstrip("0123456789") for s in samples}},
            }, checkout))  # fmt: skip
            digest = subprocess.run(["md5sum", str(table)], capture_output=True, text=True)
            rows[-1]["md5"] = digest.stdout.split()[0]
            print(rows[-1], flush=True)
    if "dmr" not in skip:
        settings = dict(SETTINGS)
        contrast = Contrast("case_vs_control", "groups", "case", "control", tuple(CASES),
                            tuple(CONTROLS), {s: str(b) for s, b in beds}, settings,
                            "genome")  # fmt: skip
        assert set(settings) == set(DSS_KEYS)
        params = {"contrast": contrast, "code": "m", "max_memory_gb": a.max_memory_gb}
        for label, checkout in checkouts.items():
            tag = "-baseline" if label else ""
            shards = [folder / f"shard{k}-of-{a.shards}{tag}.counts.tsv"
                      for k in range(1, a.shards + 1)]  # fmt: skip
            rows.append(run_script(folder, "dmr_counts" + label, "dmr_counts.py", {
                "input": {"fai": str(fai)}, "output": {"counts": [str(s) for s in shards]},
                "params": params}, checkout))  # fmt: skip
            digest = subprocess.run(["md5sum", *map(str, shards)], capture_output=True, text=True)
            rows[-1]["md5"] = " ".join(line.split()[0] for line in digest.stdout.splitlines())
            print(rows[-1], flush=True)
            if not label:  # DSS runs on this checkout's counts
                ours = shards
        for counts in ours if "dss" not in skip else []:
            rows.append(run_dss(folder, counts))
            print(rows[-1], flush=True)
    print("job                 sites   DMRs   wall s   CPU s  peak RSS GiB")
    for r in rows:
        print(f"{r['job']:<18} {r.get('sites', 0):>8,} {r.get('dmrs', 0):>6} "
              f"{r['wall']:>8.1f} {r['cpu']:>7.1f} {r['rss_gib']:>10.2f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
