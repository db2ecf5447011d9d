"""benchmarks/bench_overhead.py's modBAM route at a tiny size: the hand run and the workflow run
on simulated basecaller reads and make the same bedMethyl (no time is asserted)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from conftest import REPO


def test_modbam_route_runs_and_matches_the_hand_run(tmp_path):
    run = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "bench_overhead.py"),
         "--route", "modbam", "--simulate", "20"],
        capture_output=True, text=True, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO / "scripts")},
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    out = run.stdout
    assert "route modbam: 20 reads, 2 threads" in out
    hand = re.search(r"direct tools: +[\d.]+ s +\(CPU [\d.]+ s; (.*)\)", out).group(1)
    assert [part.rsplit(" ", 1)[0] for part in hand.split(", ")] == [
        "fastq+align+sort", "index_bam", "pileup", "bgzip+tabix",
    ]  # fmt: skip
    assert "same output:        calls.bed.gz (by hand) = " in out
    assert re.search(r"workflow pipeline: +[\d.]+ s +ratio [\d.]+", out)
    assert re.search(r"fixed cost: +-?[\d.]+ s", out)
    assert re.search(r"^  alignment .*\|", out, re.M) and re.search(r"^  pileup .*\|", out, re.M)
    assert "fastq+align+sort by hand against align's tool processes" in out
