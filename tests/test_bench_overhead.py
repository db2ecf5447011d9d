"""The overhead benchmark (benchmarks/bench_overhead.py) at a tiny size, not timed: the short
route (art_illumina pairs, bwa by hand and through the workflow) runs end to end and prints
its figures side by side, and the order of the hand and workflow runs alternates by repeat."""

from __future__ import annotations

import gzip
import re
import subprocess
import sys
from pathlib import Path

from conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))
from bench_overhead import HAND, ROUTES, run_order  # noqa: E402

LAMBDA = Path("/usr/share/doc/bowtie2/examples/reference/lambda_virus.fa.gz")


def test_run_order_alternates():
    assert run_order(0, ["wf"]) == [HAND, "wf"]
    assert run_order(1, ["wf"]) == ["wf", HAND]
    assert run_order(2, ["wf", "base"]) == [HAND, "wf", "base"]
    assert run_order(3, ["wf", "base"]) == ["base", "wf", HAND]


def test_short_route_runs_and_prints_side_by_side(tmp_path):
    """300 simulated pairs, two repeats: each repeat's order, the hand steps and the workflow's
    jobs side by side, the aligner command by hand against the align job's tool processes."""
    reference = tmp_path / "lambda.fa"
    reference.write_bytes(gzip.decompress(LAMBDA.read_bytes()))
    run = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "bench_overhead.py"), "--route", "short",
         "--simulate", "300", "--reference", str(reference), "--repeats", "2"],
        capture_output=True, text=True, timeout=600,
        env={"PYTHONPATH": str(REPO / "scripts"), "PATH": f"{REPO / '.venv/bin'}:/usr/bin:/bin"},
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.splitlines()
    assert lines[0] == "route short: 300 pairs, 2 threads, medians of 2"
    assert lines[1:3] == [
        "repeat 1 order: by hand -> this checkout",
        "repeat 2 order: this checkout -> by hand",
    ]
    hand_steps = [step for _, steps, _ in ROUTES["short"].groups for step in steps]
    assert all(f"{step} " in lines[3] for step in hand_steps), lines[3]
    text = run.stdout
    assert "fixed cost:" in text and "per repeat: " in text
    per_repeat = re.search(r"^ratio per repeat: +([\d.]+), ([\d.]+)$", text, re.M)
    assert per_repeat and all(float(x) > 0 for x in per_repeat.groups()), text
    assert re.search(r"^report rules alone: +[\d.]+ s .*; first repeat\)$", text, re.M), text
    for label, _, _ in ROUTES["short"].groups:
        assert any(line.startswith(f"  {label} ") for line in lines), label
    assert "align+fixmate+sort by hand against align's tool processes" in text
    assert "stage_paired_reads" in text  # the workflow's other jobs, named
