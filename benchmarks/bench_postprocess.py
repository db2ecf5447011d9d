"""Benchmark: the post-processing steps on a synthetic, human-like nanopolish CpG call table.
Prints wall time, CPU time and peak RSS per step, each run in a fresh process; measures, never
asserts.

    .venv/bin/python benchmarks/bench_postprocess.py \
        [--rows 50000000 --reads 5000000 --sites 20000000 --shards 4 --modbam-reads 20000]

The table has nanopolish call-methylation's columns and formats, its rows grouped by read (reads
in random order, each read's calls by position, as nanopolish writes them) on 24 chromosomes;
--sites distinct CpG sites in groups of 1 to 6 CpGs (nanopolish's groups, sequence = the group
with 5 bases either side), each site methylated with its own probability, LLRs from two normals.
Steps: frequency (the rule script's function; the bedMethyl is the pileup's: bench_pileup.py),
merge of --shards call-table shards,
the whole read accounting (read_accounting's account(): the table's reads plus 10 % basecalled
reads without calls, some unmapped, some mapped with a low MAPQ, in a FASTA, a BAM and the index
of a BLOW5 input: a table row per read held in the FAST5 census, alignments, calls), and modBAM
tagging on the first --modbam-reads reads only (a BAM at full scale would take longer to make
than the steps take to run).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

import benchpath  # noqa: F401  (scripts/ and tests/ on the path)

REPO = Path(__file__).resolve().parent.parent
CHROMOSOMES = [f"chr{i}" for i in range(1, 23)] + ["chrX", "chrY"]
FLANK = 5  # nanopolish's group sequence: 5 bases either side of the first and last CpG


def site_groups(n_sites: int, rng: np.random.Generator) -> pl.DataFrame:
    """CpG groups covering n_sites CpGs, sorted by chromosome and position."""
    sizes = rng.choice([1, 2, 3, 4, 5, 6], p=[0.5, 0.25, 0.12, 0.07, 0.04, 0.02], size=n_sites)
    sizes = sizes[np.cumsum(sizes) <= n_sites]
    if sizes.sum() < n_sites:
        sizes = np.append(sizes, n_sites - sizes.sum())
    n = len(sizes)
    # A pool of group sequences per size: filler without C (every C is a CpG's), the CpGs 2 to 8
    # bases apart (nanopolish groups CpGs closer than 10), 5 bases either side.
    filler = np.array(list("ATG"))
    pool: dict[int, list[str]] = {}
    for size in range(1, 7):
        pool[size] = []
        for _ in range(2000):
            parts = ["".join(rng.choice(filler, FLANK))]
            for k in range(size):
                parts.append("CG")
                if k < size - 1:
                    parts.append("".join(rng.choice(filler, rng.integers(0, 7))))
            parts.append("".join(rng.choice(filler, FLANK - 1)))
            pool[size].append("".join(parts))
    flat = [s for size in range(1, 7) for s in pool[size]]
    pick = (sizes - 1) * 2000 + rng.integers(0, 2000, size=n)
    sequence = pl.Series(flat).gather(pick)
    span = sequence.str.len_bytes().to_numpy().astype(np.int64) - 2 * FLANK - 1  # first C..last C
    chrom = np.minimum((np.arange(n) * len(CHROMOSOMES)) // n, len(CHROMOSOMES) - 1)
    start = np.cumsum(span + rng.integers(30, 200, size=n))  # groups > 10 bases apart
    first = np.searchsorted(chrom, np.arange(len(CHROMOSOMES)))
    start -= np.repeat(start[first], np.diff(np.append(first, n)))
    start += 10_000
    return pl.DataFrame(
        {
            "chromosome": pl.Series(np.array(CHROMOSOMES)[chrom]),
            "start": start,
            "end": start + span,
            "num_motifs": sizes,
            "sequence": sequence,
            "p_methylated": rng.beta(0.6, 0.3, size=n),
        }
    )


def write_calls(path: Path, rows: int, reads: int, sites: int, seed: int = 14) -> int:
    """Write the synthetic call table; return its number of data rows."""
    rng = np.random.default_rng(seed)
    groups = site_groups(sites, rng)
    n_groups = groups.height
    per_read = rows // reads
    starts = (np.arange(reads, dtype=np.int64) * (n_groups - per_read - 1)) // reads
    rng.shuffle(starts)  # reads come in no positional order
    written = 0
    with open(path, "w") as out:
        out.write(
            "chromosome\tstrand\tstart\tend\tread_name\tlog_lik_ratio\tlog_lik_methylated\t"
            "log_lik_unmethylated\tnum_calling_strands\tnum_motifs\tsequence\n"
        )
        for lo in range(0, reads, 250_000):
            chunk = starts[lo : lo + 250_000]
            n = len(chunk)
            k = np.full(n, per_read)
            k += np.arange(lo, lo + n) < rows - per_read * reads  # the remainder: 1 more each
            idx = np.repeat(chunk, k) + (np.arange(k.sum()) - np.repeat(np.cumsum(k) - k, k))
            g = groups[idx]
            read_ids = rng.integers(0, 2**63, size=(n, 2), dtype=np.int64)
            names = pl.Series([f"{a:016x}{b:016x}" for a, b in read_ids]).str.replace(
                r"^(.{8})(.{4})(.{4})(.{4})(.{12})$", "$1-$2-$3-$4-$5"
            )
            methylated = rng.random(len(idx)) < g["p_methylated"].to_numpy()
            mean = np.where(methylated, 3.0, -3.0) * np.sqrt(g["num_motifs"].to_numpy())
            llr = np.round(rng.normal(mean, 3.0), 2)
            llm = np.round(-rng.uniform(80, 400, size=len(idx)), 2)
            table = g.select(
                "chromosome",
                strand=pl.Series(np.where(np.repeat(rng.random(n) < 0.5, k), "+", "-")),
                start="start",
                end="end",
                read_name=names.gather(np.repeat(np.arange(n), k)),
                log_lik_ratio=pl.Series(llr),
                log_lik_methylated=pl.Series(llm),
                log_lik_unmethylated=pl.Series(np.round(llm - llr, 2)),
                num_calling_strands=pl.lit(1),
                num_motifs="num_motifs",
                sequence="sequence",
            )
            table.write_csv(out, separator="\t", include_header=False, float_precision=2)
            written += table.height
    return written


STEPS = {
    "frequency": (
        "from numapore.nanopolish.frequency import frequency_outputs;"
        "from numapore.methylation.motifs import MOTIFS;"
        "frequency_outputs(Path(a[0]), MOTIFS['cpg'], 2.0, False, Path(a[1]))"
    ),
    "merge": (
        "from numapore.execution.shards import concat_tables;"
        "concat_tables([Path(p) for p in a[2:]], Path(a[0]))"
    ),
    "accounting": (
        "from numapore.report.accounting import AccountingInputs, account;"
        "d = Path(a[1]);"
        "account(AccountingInputs('bench', 'minimap2', [d / 'reads.blow5'], d / 'reads.fa',"
        " d / 'readdb', d / 'reads.bam', Path(a[0]), 20, d / 'reads.blow5.idx', None, 'blow5'))"
    ),
    "modbam": (
        "from numapore.methylation.motifs import MOTIFS;"
        "from numapore.nanopolish.modbam import tag_alignments;"
        "tag_alignments(Path(a[0]), Path(a[1]), MOTIFS['cpg'], Path(a[2]), Path(a[3]))"
    ),
}


def run_step(name: str, *args: Path) -> tuple[float, float, float]:
    """Run one step in a fresh process: wall seconds, CPU seconds (user + system; on a shared
    machine the steadier figure) and the child's peak RSS in MiB."""
    code = "import sys; from pathlib import Path; a = sys.argv[1:];" + STEPS[name]
    env = {"PYTHONPATH": str(REPO / "scripts"), "PATH": os.environ["PATH"]}
    with tempfile.NamedTemporaryFile("r") as report:
        # GNU time: the step's own peak RSS (a forked child's would start at this process's).
        command = ["/usr/bin/time", "-f", "%e %U %S %M", "-o", report.name]
        done = subprocess.run([*command, sys.executable, "-c", code, *map(str, args)], env=env)
        if done.returncode != 0:
            sys.exit(f"numapore: benchmark step {name} failed (exit {done.returncode})")
        seconds, user, system, rss_kb = report.read().split()[-4:]
    return float(seconds), float(user) + float(system), int(rss_kb) / 1024


def shards_of(calls: Path, n: int, tmp: Path) -> list[Path]:
    """Split the table into n shards by read, as the scatter does (whole reads per shard)."""
    paths = [tmp / f"shard{i}.tsv" for i in range(n)]
    command = (
        f'awk -F\'\\t\' -v n={n} -v d={tmp} \'NR==1{{for(i=0;i<n;i++) print > (d"/shard"i".tsv");'
        f' next}} $5!=last{{s=(s+1)%n; last=$5}} {{print > (d"/shard"s".tsv")}}\' {calls}'
    )
    subprocess.run(["bash", "-c", command], check=True)
    return paths


def modbam_inputs(calls: Path, reads: int, tmp: Path) -> tuple[Path, Path]:
    """The first `reads` reads' calls, and a BAM with one primary alignment per read spanning
    them: the read's sequence is the groups' sequences joined by filler, so every CpG aligns."""
    small = tmp / "modbam.calls.tsv"
    table = pl.read_csv(
        calls, separator="\t", n_rows=reads * 20, quote_char=None, infer_schema=False
    )
    names = table["read_name"].unique(maintain_order=True).head(reads)
    table = table.filter(pl.col("read_name").is_in(names.implode()))
    table.write_csv(small, separator="\t")
    header = "@HD\tVN:1.6\tSO:unsorted\n" + "".join(
        f"@SQ\tSN:{c}\tLN:300000000\n" for c in CHROMOSOMES
    )
    lines = []
    for (name,), calls_of in table.group_by("read_name", maintain_order=True):
        first = calls_of.row(0, named=True)
        chrom = first["chromosome"]
        calls_of = calls_of.filter(pl.col("chromosome") == chrom)
        pos0 = int(first["start"]) - FLANK
        seq = []
        cursor = pos0
        for start, sequence in calls_of.select("start", "sequence").iter_rows():
            begin = int(start) - FLANK
            if begin < cursor:
                continue
            seq.append("A" * (begin - cursor) + sequence)
            cursor = begin + len(sequence)
        read = "".join(seq)
        flag = 16 if calls_of["strand"][0] == "-" else 0
        lines.append(f"{name}\t{flag}\t{chrom}\t{pos0 + 1}\t60\t{len(read)}M\t*\t0\t0\t{read}\t*\n")
    sam = tmp / "modbam.sam"
    sam.write_text(header + "".join(lines))
    bam = tmp / "modbam.bam"
    subprocess.run(["samtools", "view", "-b", "-o", str(bam), str(sam)], check=True)
    return bam, small


def accounting_inputs(calls: Path, folder: Path) -> int:
    """Write the whole accounting's inputs for the table's reads (reads.fa, reads.bam, the
    BLOW5 index) into folder, or reuse them; return the number of basecalled reads."""
    from numapore.report.accounting import called_read_names
    from numapore.signal.slow5 import encode_index, index_entry

    fasta = folder / "reads.fa"
    if not fasta.exists():
        folder.mkdir(parents=True, exist_ok=True)
        called = called_read_names(calls).to_list()
        extra = [f"00000000-0000-0000-0000-{i:012d}" for i in range(len(called) // 10)]
        names = np.array(called + extra, dtype=object)
        np.random.default_rng(14).shuffle(names)  # basecaller order: unrelated to the calls
        unmapped = set(extra[::3])
        low_mapq = set(extra[1::3])
        sam = folder / "reads.sam"
        with open(sam, "w") as out:
            out.write("@HD\tVN:1.6\tSO:unsorted\n@SQ\tSN:chr1\tLN:300000000\n")
            for name in names:
                if name not in unmapped:
                    mapq = 5 if name in low_mapq else 60
                    out.write(f"{name}\t0\tchr1\t1\t{mapq}\t4M\t*\t0\t0\tACGT\t*\n")
        subprocess.run(
            ["samtools", "view", "-b", "-o", str(folder / "reads.bam"), str(sam)], check=True
        )
        sam.unlink()
        entries = b"".join(index_entry(n, 64 + 100 * i, 100) for i, n in enumerate(names))
        (folder / "reads.blow5.idx").write_bytes(encode_index(entries))
        (folder / "reads.blow5").touch()  # the census reads the index only
        (folder / "readdb").touch()  # I/O mode slow5: the BLOW5's index stands for it
        with open(folder / "reads.fa.tmp", "w") as out:
            out.writelines(f">{name}\nACGT\n" for name in names)
        (folder / "reads.fa.tmp").rename(fasta)
    return sum(1 for line in open(fasta) if line.startswith(">"))


def main() -> None:
    """Generate the table, run each step, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=50_000_000, help="call rows")
    parser.add_argument("--reads", type=int, default=5_000_000, help="reads")
    parser.add_argument("--sites", type=int, default=20_000_000, help="distinct CpG sites")
    parser.add_argument("--shards", type=int, default=4, help="call-table shards to merge")
    parser.add_argument("--modbam-reads", type=int, default=20_000, help="reads to tag")
    parser.add_argument("--steps", default="frequency,merge,accounting,modbam")
    parser.add_argument("--calls", type=Path, help="keep the table here, reuse it if it exists")
    parser.add_argument("--tmp", default=tempfile.gettempdir(), help="scratch directory")
    args = parser.parse_args()
    steps = args.steps.split(",")
    with tempfile.TemporaryDirectory(dir=args.tmp, prefix="bench_postprocess.") as scratch:
        tmp = Path(scratch)
        calls = args.calls or tmp / "calls.tsv"
        start = time.perf_counter()
        reused = bool(args.calls and args.calls.exists())
        if reused:
            rows = sum(1 for _ in open(calls, "rb")) - 1
        else:
            rows = write_calls(calls, args.rows, args.reads, args.sites)
        size = calls.stat().st_size / 1e9
        print(
            f"call table: {rows} rows, {args.reads} reads, {args.sites} CpG sites, {size:.2f} GB"
            f" ({'reused' if reused else 'generated'} in {time.perf_counter() - start:.0f} s)"
        )
        print(
            f"{'step':12} {'rows':>11} {'wall s':>8} {'rows/s':>11} {'CPU s':>8}"
            f" {'peak RSS MiB':>13}"
        )

        def show(step: str, n: int, seconds: float, cpu: float, rss: float) -> None:
            print(
                f"{step:12} {n:11d} {seconds:8.1f} {n / seconds:11.0f} {cpu:8.1f} {rss:13.0f}",
                flush=True,
            )

        subprocess.run(["cat", str(calls)], stdout=subprocess.DEVNULL, check=True)  # warm cache
        if "frequency" in steps:
            show("frequency", rows, *run_step("frequency", calls, tmp / "frequency.tsv"))
        if "merge" in steps:
            shards = shards_of(calls, args.shards, tmp)
            show("merge", rows, *run_step("merge", tmp / "merged.tsv", calls, *shards))
            for path in [*shards, tmp / "merged.tsv"]:
                path.unlink()
        if "accounting" in steps:
            # Kept beside a kept table (made once: minutes), else in the scratch folder.
            folder = calls.parent / f"{calls.name}.accounting" if args.calls else tmp / "acc"
            reads = accounting_inputs(calls, folder)
            print(f"accounting inputs: {reads} basecalled reads in {folder}", file=sys.stderr)
            show("accounting", rows, *run_step("accounting", calls, folder))
        if "modbam" in steps:
            bam, small = modbam_inputs(calls, args.modbam_reads, tmp)
            n = sum(1 for _ in open(small)) - 1
            work = tmp / "modbam"
            work.mkdir()
            show("modbam", n, *run_step("modbam", bam, small, tmp / "tagged.bam", work))
        shutil.rmtree(tmp / "modbam", ignore_errors=True)


if __name__ == "__main__":
    main()
