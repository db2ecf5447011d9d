"""DSS (the workflow's scripts/dmr_test.R) on a genome-sized cohort, scattered by contig: the time
and peak memory of each contig group's job, their sum, the largest, and the whole scaled up to a
human genome's 28 M CpGs x 6 samples.

    .venv/bin/python benchmarks/bench_dmr.py [--fraction 0.02] [--groups 24] [--keep DIR]

The cohort: 6 samples (3 vs 3) over 24 contigs sized as the human chromosomes 1-22, X, Y (CpGs
in proportion to their lengths), `fraction` x 28 M CpGs in all, one every ~100 bases; per
sample and site a coverage ~ Poisson(15) and modified calls ~ Binomial(coverage, p) with p a
smooth pattern and 1 % of sites in regions where the case group differs by 0.4. Each contig
group's counts table is written as rule dmr_counts writes it, then dmr_test.R runs on it in its
own Rscript under /usr/bin/time (as the workflow's dmr_test job does, with DSS's defaults of
config dmr:), one group after the other; then the merge (rule dmr_merge's functions) of all.
The jobs of a scattered run are independent: on a cluster the wall time is the largest group's.
Figures are printed; nothing is asserted.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import benchpath  # noqa: F401  (puts scripts/ on the path)
import numpy as np

from numapore.methylation.dmr import contig_groups, dmr_lines, site_lines

REPO = Path(__file__).resolve().parent.parent
HUMAN_CPGS = 28_000_000
# GRCh38 chromosome lengths (Mb), 1-22, X, Y: the contigs' relative sizes
HUMAN_MB = [248, 242, 198, 190, 181, 171, 159, 145, 138, 134, 135, 133, 114, 107, 102, 90, 83, 80,
            59, 64, 47, 51, 156, 57]  # fmt: skip
SAMPLES = ["case1", "case2", "case3", "control1", "control2", "control3"]
SETTINGS = {
    "smoothing": True,
    "smoothing_span": 500,
    "delta": 0.1,
    "p_threshold": 1e-5,
    "minlen": 50,
    "min_cg": 3,
    "dis_merge": 100,
    "pct_sig": 0.5,
}
# The Snakemake object the script reads (snakemake@input, ...), as Snakemake's R preamble makes it.
R_RUNNER = r"""
args <- commandArgs(trailingOnly = TRUE)
setClass("Snakemake", representation(input = "list", output = "list", params = "list",
  log = "list", threads = "numeric"))
contrast <- list(name = "case_vs_control", label1 = "case", label2 = "control",
  group1 = list("case1", "case2", "case3"), group2 = list("control1", "control2", "control3"),
  smoothing = TRUE, smoothing_span = 500, delta = 0.1, p_threshold = 1e-5, minlen = 50,
  min_cg = 3, dis_merge = 100, pct_sig = 0.5)
snakemake <- new("Snakemake", input = list(counts = list(args[1])),
  output = list(sites = list(args[2]), dmrs = list(args[3]), summary = args[4]),
  params = list(contrasts = list(contrast)), log = list(args[5]), threads = 1)
source(args[6])
"""


def write_cohort(folder: Path, fraction: float, groups: int, seed: int = 5) -> list[Path]:
    """The counts tables of the contig groups (as rule dmr_counts writes them); their paths."""
    rng = np.random.default_rng(seed)
    total = int(HUMAN_CPGS * fraction)
    sizes = np.array(HUMAN_MB, dtype=float)
    per_contig = np.maximum(1, np.round(total * sizes / sizes.sum()).astype(int))
    names = [f"chr{i}" for i in range(1, 23)] + ["chrX", "chrY"]
    members = contig_groups(dict(zip(names, per_contig.tolist(), strict=True)), groups)
    paths = []
    header = "chrom\tpos\t" + "\t".join(f"N.{s}\tX.{s}" for s in SAMPLES) + "\n"
    for k, contigs in enumerate(members, 1):
        path = folder / f"group{k}.counts.tsv"
        with open(path, "w") as out:
            out.write(header)
            for contig in contigs:
                n = int(per_contig[names.index(contig)])
                pos = np.cumsum(rng.integers(2, 200, n))
                base = np.clip(0.5 + 0.45 * np.sin(pos / 7000.0), 0.02, 0.98)
                differs = (pos // 5000) % 100 == 0  # 1 % of 5 kb blocks
                columns = [pos.astype(str)]
                for s in SAMPLES:
                    cov = rng.poisson(15, n)
                    p = np.where(differs & s.startswith("case"), np.clip(base - 0.4, 0, 1), base)
                    p = np.clip(p + rng.normal(0, 0.03, n), 0, 1)  # replicates vary a little
                    columns += [cov.astype(str), rng.binomial(cov, p).astype(str)]
                rows = np.column_stack([np.full(n, contig), *columns])
                out.writelines("\t".join(r) + "\n" for r in rows)
        paths.append(path)
    return paths


def run_group(folder: Path, counts: Path) -> dict:
    """dmr_test.R on one group's counts under /usr/bin/time: seconds, CPU, peak RSS, sites."""
    runner = folder / "runner.R"
    runner.write_text(R_RUNNER)
    stem = counts.name.removesuffix(".counts.tsv")
    outs = [folder / f"{stem}.{kind}" for kind in ("sites.tsv", "dmrs.tsv", "summary.txt", "log")]
    command = ["/usr/bin/time", "-v", "Rscript", str(runner), str(counts), *map(str, outs),
               str(REPO / "scripts" / "dmr_test.R")]  # fmt: skip
    start = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True)
    wall = time.monotonic() - start
    if done.returncode:
        sys.exit(f"dmr_test.R failed on {counts}:\n{done.stderr[-3000:]}\n{outs[3].read_text()}")

    def field(name: str) -> float:
        return float(re.search(rf"{re.escape(name)}: ([0-9.:]+)", done.stderr).group(1))

    summary = outs[2].read_text().splitlines()[1].split("\t")
    return {
        "group": stem,
        "sites": int(summary[1]),
        "dmrs": int(summary[3]),
        "wall": wall,
        "cpu": field("User time (seconds)") + field("System time (seconds)"),
        "rss_gib": field("Maximum resident set size (kbytes)") / 2**20,
        "outputs": outs[:2],
    }


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; print its figures."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--fraction", type=float, default=0.02, help="share of 28 M CpGs")
    p.add_argument("--groups", type=int, default=24, help="contig groups (scatter.dmr)")
    p.add_argument("--keep", type=Path, help="keep the files in this folder")
    a = p.parse_args(argv)
    folder = a.keep or Path(tempfile.mkdtemp(prefix="bench_dmr."))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        t0 = time.monotonic()
        tables = write_cohort(folder, a.fraction, a.groups)
        print(f"cohort: {int(HUMAN_CPGS * a.fraction):,} CpGs x {len(SAMPLES)} samples "
              f"({a.fraction:g} of 28 M) in {len(tables)} contig groups, written in "
              f"{time.monotonic() - t0:.0f} s", flush=True)  # fmt: skip
        rows = []
        print("group     sites    DMRs   wall s   CPU s  peak RSS GiB", flush=True)
        for table in tables:
            if table.stat().st_size < 200:  # an empty group (fewer contigs than groups)
                continue
            r = run_group(folder, table)
            rows.append(r)
            print(f"{r['group']:<8} {r['sites']:>8,} {r['dmrs']:>6} {r['wall']:>8.1f} "
                  f"{r['cpu']:>7.1f} {r['rss_gib']:>10.2f}", flush=True)  # fmt: skip
        t0 = time.monotonic()
        sites = site_lines([str(r["outputs"][0]) for r in rows])
        dmrs = dmr_lines([str(r["outputs"][1]) for r in rows], "case", "control")
        merge = time.monotonic() - t0
        n = sum(r["sites"] for r in rows)
        cpu = sum(r["cpu"] for r in rows)
        largest = max(rows, key=lambda r: r["sites"])
        scale = HUMAN_CPGS / n
        print(f"all groups: {n:,} sites, {len(dmrs) - 1} DMRs, {len(sites) - 1:,} sites tested; "
              f"CPU {cpu:.0f} s, the largest group {largest['wall']:.0f} s wall "
              f"{largest['rss_gib']:.2f} GiB; merge (text) {merge:.1f} s")  # fmt: skip
        # Each job: a fixed cost (R, loading DSS) plus a cost per site: the line through a tiny
        # table (the first 2,000 sites of the first group) and the largest group, extrapolated
        # to each group at full size.
        tiny = folder / "tiny.counts.tsv"
        with open(tables[0]) as source, open(tiny, "w") as out:
            out.writelines(line for _, line in zip(range(2001), source, strict=False))
        small = run_group(folder, tiny)
        print(f"tiny table: {small['sites']:,} sites {small['cpu']:.1f} CPU s "
              f"{small['rss_gib']:.2f} GiB")  # fmt: skip
        span = max(largest["sites"] - small["sites"], 1)
        cpu_per_site = (largest["cpu"] - small["cpu"]) / span
        rss_per_site = (largest["rss_gib"] - small["rss_gib"]) / span
        cpu_fixed = small["cpu"] - cpu_per_site * small["sites"]
        rss_fixed = small["rss_gib"] - rss_per_site * small["sites"]
        full = [r["sites"] * scale for r in rows]
        total = sum(cpu_fixed + cpu_per_site * f for f in full)
        big = largest["sites"] * scale
        print(f"per job: {cpu_fixed:.1f} CPU s + {cpu_per_site * 1e6:.1f} s per M sites; "
              f"{rss_fixed:.2f} GiB + {rss_per_site * 1e6:.2f} GiB per M sites")  # fmt: skip
        print(f"scaled to 28 M CpGs x 6 samples ({scale:.0f} x): {len(rows)} jobs, CPU "
              f"{total / 3600:.1f} h in all; the largest job (chr1, {big / 1e6:.1f} M sites) "
              f"{(cpu_fixed + cpu_per_site * big) / 60:.0f} min and "
              f"{rss_fixed + rss_per_site * big:.1f} GiB peak")  # fmt: skip
        # One job per chromosome (scatter.dmr 24): the largest is chr1's share of 28 M.
        chr1 = HUMAN_CPGS * HUMAN_MB[0] / sum(HUMAN_MB)
        per_chromosome = len(HUMAN_MB) * cpu_fixed + cpu_per_site * HUMAN_CPGS
        print(f"one job per chromosome (scatter.dmr: 24): CPU {per_chromosome / 3600:.1f} h in "
              f"all; chr1 ({chr1 / 1e6:.2f} M sites) {(cpu_fixed + cpu_per_site * chr1) / 60:.0f} "
              f"min and {rss_fixed + rss_per_site * chr1:.1f} GiB peak")  # fmt: skip
    finally:
        if not a.keep:
            shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
