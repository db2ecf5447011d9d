"""numapore's entropy, pileup-hemi, extract-calls and localize against modkit 0.6.1's, side by
side in one run: the same input and options, at the same threads, each run a fresh process under
/usr/bin/time, the tools interleaved; medians of wall time and peak RSS, the ratio to modkit,
and whether the outputs are modkit's bytes (localize: numapore's documented offsets differ by
design, see numapore/modbam/localize.py; entropy: within 1e-6, modkit's own last digit varies).

    nice -n 10 .venv/bin/python benchmarks/bench_modkit_commands_b.py --modkit /path/to/modkit \\
        [--reads 100000] [--repeat 3] [--threads 2] [--keep DIR] [--data suite,sim]

Two inputs:
- suite: the largest case of each command in ../shared/data/modkit061_more (10-read BAMs);
- sim: bench_pileup.simulate()'s modBAM (--reads reads of ~3 kb, `C+h?;C+m?` at every CpG C),
  its bedMethyl (numapore pileup --cpg --combine-strands --bgzf) for localize, with a feature
  every 5 kb.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

import benchpath  # noqa: F401  (puts scripts/ on the path)
from bench_pileup import REPO, simulate, timed

SUITE = REPO.parent / "shared" / "data" / "modkit061_more"
OLD = SUITE.parent / "modkit_pileup" / "inputs"
THRESHOLD = ["--filter-threshold", "0.7"]


def suite_cases() -> dict[str, tuple[list[str], list[str]]]:
    """Per command: (modkit's argv after the binary, numapore's argv after `numapore`), the
    output path given as OUT."""
    bam = str(SUITE / "inputs" / "bc_anchored_10_reads.synthetic_duplex.bam")
    ref = str(OLD / "CGI_ladder_3.6kb_ref.fa")
    hp = str(SUITE.parent / "modkit061_pileup" / "inputs" / "bc_anchored_10_reads.hp.sorted.bam")
    bed = str(SUITE / "inputs" / "cpg_bc.bed.gz")
    loc = ["--regions", str(SUITE / "inputs" / "loc_sites.bed"), "--genome-sizes",
           str(OLD / "CGI_ladder_3.6kb_ref.fa.fai"), "-w", "30"]  # fmt: skip
    entropy = ["--in-bam", str(OLD / "bc_anchored_10_reads.sorted.bam"), "--ref", ref, "--cpg",
               *THRESHOLD, "--regions", str(SUITE / "inputs" / "regions_entropy.bed")]  # fmt: skip
    return {
        "entropy": (["entropy", *entropy, "-o", "OUT"], ["entropy", *entropy, "-o", "OUT"]),
        "pileup-hemi": (["pileup-hemi", bam, "--ref", ref, "--cpg", *THRESHOLD, "-o", "OUT"],
                        ["pileup-hemi", bam, "--ref", ref, "--cpg", *THRESHOLD, "-o", "OUT"]),
        "extract calls": (["extract", "calls", hp, "OUT", *THRESHOLD],
                          ["extract-calls", hp, "OUT", *THRESHOLD]),
        "localize": (["localize", bed, *loc, "-o", "OUT"], ["localize", bed, *loc, "-o", "OUT"]),
    }  # fmt: skip


def sim_cases(folder: Path, reads: int) -> dict[str, tuple[list[str], list[str]]]:
    """The same commands on the simulated modBAM (made once in folder)."""
    ref, bam = folder / "ref.fa", folder / "sim.bam"
    if not bam.exists():
        simulate(folder, reads)
    bed = folder / "sim.cpg.bed.gz"
    if not bed.exists():
        subprocess.run([sys.executable, "-m", "numapore.pileup.cli", "-q", str(bam), str(bed),
                        "--ref", str(ref), "--motif", "CG", "0", "--combine-strands", "--bgzf",
                        "--filter-threshold", "0.7", "-t", "2"], check=True,
                       env={"PYTHONPATH": str(REPO / "scripts")})  # fmt: skip
    sizes, features = folder / "ref.fa.fai", folder / "features.bed"
    if not features.exists():
        with open(sizes) as fai, open(features, "w") as out:
            for line in fai:
                name, length = line.split()[:2]
                for p in range(2500, int(length) - 2500, 5000):
                    out.write(f"{name}\t{p}\t{p + 1}\tf{p}\t0\t{'+-'[p // 5000 % 2]}\n")
    r = ["--ref", str(ref)]
    loc = ["--regions", str(features), "--genome-sizes", str(sizes), "-w", "1000"]
    return {
        "entropy": (["entropy", "--in-bam", str(bam), *r, "--cpg", *THRESHOLD, "-o", "OUT"],
                    ["entropy", "--in-bam", str(bam), *r, "--cpg", *THRESHOLD, "-o", "OUT"]),
        "pileup-hemi": (["pileup-hemi", str(bam), *r, "--cpg", *THRESHOLD, "-o", "OUT"],
                        ["pileup-hemi", str(bam), *r, "--cpg", *THRESHOLD, "-o", "OUT"]),
        "extract calls": (["extract", "calls", str(bam), "OUT", *THRESHOLD],
                          ["extract-calls", str(bam), "OUT", *THRESHOLD]),
        "localize": (["localize", str(bed), *loc, "-o", "OUT"],
                     ["localize", str(bed), *loc, "-o", "OUT"]),
    }  # fmt: skip


def same_output(ours: Path, theirs: Path, command: str) -> str:
    """Whether numapore's output is modkit's (entropy: within 1e-6; entropy --regions: the
    folders' windows)."""
    if ours.is_dir():
        ours, theirs = ours / "windows.bedgraph", theirs / "windows.bedgraph"
    a, b = ours.read_bytes(), theirs.read_bytes()
    if a == b:
        return "same"
    if command == "localize":
        return "documented"
    if command == "extract calls":  # modkit writes each interval as its worker ends
        return "sorted" if sorted(a.splitlines()) == sorted(b.splitlines()) else "DIFFER"
    if command == "entropy":
        lines = a.splitlines(), b.splitlines()
        rows = [(x.split(b"\t"), y.split(b"\t")) for x, y in zip(*lines, strict=False)]
        close = len(lines[0]) == len(lines[1]) and all(
            x[:3] + x[4:] == y[:3] + y[4:] and abs(float(x[3]) - float(y[3])) <= 1e-6
            for x, y in rows
        )
        return "1e-6" if close else "DIFFER"
    return "DIFFER"


def bench(label: str, cases: dict, args, folder: Path) -> None:
    """Time every command on one input, interleaved; print its table."""
    cases = {k: v for k, v in cases.items() if k in args.commands.split(",")}
    times: dict[tuple, list] = {}
    verdict = {}
    for _ in range(args.repeat):
        for command, (theirs, ours) in cases.items():
            outs = {}
            numapore = [sys.executable, "-m", "numapore.cli", *ours]
            for tool, argv in (("modkit", [args.modkit, *theirs]), ("numapore", numapore)):
                out = folder / f"{label}.{command.replace(' ', '_')}.{tool}"
                subprocess.run(["rm", "-rf", str(out)], check=True)
                argv = [str(out) if a == "OUT" else a for a in argv] + ["-t", str(args.threads)]
                if tool == "modkit" and command not in ("localize",):
                    argv.append("--suppress-progress")
                times.setdefault((command, tool), []).append(timed(argv))
                outs[tool] = out
            verdict[command] = same_output(outs["numapore"], outs["modkit"], command)
    print(f"\n{label}: medians of {args.repeat}, -t {args.threads}", flush=True)
    print(f"{'command':14} {'tool':9} {'wall s':>8} {'x modkit':>8} {'peak MB':>8}  output")
    for command, tool in times:
        wall = statistics.median(r[0] for r in times[command, tool])
        rss = statistics.median(r[1] for r in times[command, tool])
        base = statistics.median(r[0] for r in times[command, "modkit"])
        same = verdict[command] if tool == "numapore" else ""
        print(f"{command:14} {tool:9} {wall:>8.2f} {wall / base:>8.2f} {rss:>8.0f}  {same}")


def main() -> None:
    """Parse the options and run the benchmarks."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--modkit", required=True, help="modkit 0.6.1's binary")
    parser.add_argument("--reads", type=int, default=100_000, help="simulated reads")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--keep", type=Path, default=Path("/tmp/bench_modkit_commands_b"))
    parser.add_argument("--data", default="suite,sim")
    parser.add_argument("--commands", default="entropy,pileup-hemi,extract calls,localize",
                        help="which commands (comma-separated)")  # fmt: skip
    args = parser.parse_args()
    args.keep.mkdir(parents=True, exist_ok=True)
    if "suite" in args.data:
        bench("suite", suite_cases(), args, args.keep)
    if "sim" in args.data:
        sim = args.keep / f"sim{args.reads}"
        bench(f"sim ({args.reads} reads)", sim_cases(sim, args.reads), args, sim)


if __name__ == "__main__":
    main()
