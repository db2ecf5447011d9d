"""modBAM tagging (numapore.nanopolish.modbam.tag_alignments) timed on a BAM and its call table:
this tree's compiled path and Python path, and another tree's scripts/ if given (a checkout
before a change), run alternately, each run in a fresh process; medians printed, and whether the
outputs sorted as the rule sorts them (samtools sort --no-PG) are the same bytes.

    .venv/bin/python benchmarks/bench_modbam.py --bam A.bam --calls A.cpg.calls.tsv \\
        [--motif cpg] [--baseline ../main/scripts] [--repeat 3]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# One run: tag_alignments from the tree given, the Python path if asked; prints wall seconds.
RUN = """
import sys, time
from pathlib import Path
tree, bam, calls, motif, out, scratch, path = sys.argv[1:]
sys.path.insert(0, tree)
from numapore.nanopolish import modbam
from numapore.methylation.motifs import MOTIFS
if path == "python":
    modbam.COMPILED = False
start = time.perf_counter()
modbam.tag_alignments(Path(bam), Path(calls), MOTIFS[motif], Path(out), Path(scratch))
print(time.perf_counter() - start)
"""


def run_once(tree: Path, path: str, args: argparse.Namespace, out: Path) -> tuple[float, float]:
    """One tagging in a fresh process: wall seconds of tag_alignments, and the process's CPU
    seconds (user + system, its sorts included; startup too)."""
    with tempfile.TemporaryDirectory() as scratch, tempfile.NamedTemporaryFile("r") as report:
        command = ["/usr/bin/time", "-f", "%U %S", "-o", report.name, sys.executable, "-c", RUN]
        command += [str(tree), str(args.bam), str(args.calls), args.motif, str(out), scratch, path]
        done = subprocess.run(command, capture_output=True, text=True, env=dict(os.environ))
        if done.returncode != 0:
            sys.exit(f"numapore: tagging with {tree} ({path}) failed: {done.stderr[-2000:]}")
        user, system = map(float, report.read().split()[-2:])
    return float(done.stdout.split()[-1]), user + system


def sorted_digest(bam: Path) -> str:
    """The MD5 of bam sorted as the rule sorts it."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "sorted.bam"
        sort = ["samtools", "sort", "--no-PG", "-T", f"{tmp}/s", "-o", str(out), str(bam)]
        subprocess.run(sort, check=True, capture_output=True)
        return hashlib.md5(out.read_bytes()).hexdigest()


def main() -> None:
    """Time every variant --repeat times, alternately, and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bam", type=Path, required=True, help="the alignments")
    parser.add_argument("--calls", type=Path, required=True, help="nanopolish's call table")
    parser.add_argument("--motif", default="cpg", help="the motif the calls are of")
    parser.add_argument("--baseline", type=Path, help="another tree's scripts/ to time too")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each variant")
    args = parser.parse_args()
    variants = [("compiled", REPO / "scripts", "compiled"), ("python", REPO / "scripts", "python")]
    if args.baseline:
        variants.append(("baseline", args.baseline.resolve(), "compiled"))
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name, _, _ in variants}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.repeat):
            for name, tree, path in variants:
                runs[name].append(run_once(tree, path, args, Path(tmp) / f"{name}.bam"))
        digests = {name: sorted_digest(Path(tmp) / f"{name}.bam") for name, _, _ in variants}
    print(f"tag_alignments, {args.bam.name} + {args.calls.name} ({args.motif}): {args.repeat} runs")
    print("variant   wall s  CPU s  walls")
    for name, times in runs.items():
        wall = statistics.median(w for w, _ in times)
        cpu = statistics.median(c for _, c in times)
        print(f"{name:9} {wall:6.3f} {cpu:6.2f}  {' '.join(f'{w:.3f}' for w, _ in times)}")
    same = len(set(digests.values())) == 1
    print(f"sorted outputs: {'the same bytes' if same else 'DIFFERENT'} ({digests})")
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
