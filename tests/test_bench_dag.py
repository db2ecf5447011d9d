"""The DAG benchmark (benchmarks/bench_dag.py) at a small scale: it writes the project it says and
times real dry runs whose job count follows the samples and shards (no time is asserted)."""

from __future__ import annotations

import re
import subprocess
import sys
import yaml
from conftest import REPO


def bench(*args: str) -> str:
    """Run the benchmark with the given options; return what it prints."""
    run = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "bench_dag.py"), *args],
        capture_output=True,
        text=True,
        env={
            "PYTHONPATH": str(REPO / "scripts"),
            "PATH": str(REPO / ".venv/bin") + ":/usr/bin:/bin",
        },
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return run.stdout


def test_project_has_the_samples_and_shards(tmp_path, ecoli_dir):
    sys.path.insert(0, str(REPO / "benchmarks"))
    from bench_dag import dag_project

    work = dag_project(tmp_path, 3, 4, ecoli_dir)
    sheet = (work / "config/samples.tsv").read_text().splitlines()
    assert [line.split("\t")[0] for line in sheet] == ["sample", "s001", "s002", "s003"]
    config = yaml.safe_load((work / "config/config.yaml").read_text())
    assert config["scatter"] == {"alignment": 4, "methylation": 4}


def test_dry_run_jobs_follow_the_shards():
    out2 = bench("--samples", "2", "--shards", "2", "--repeats", "1")
    out3 = bench("--samples", "2", "--shards", "3", "--repeats", "1")
    assert "DAG: 2 samples x 2 shards" in out2
    assert re.search(r"median: wall \d+\.\d s, CPU \d+\.\d s", out2)
    jobs = [int(re.search(r"jobs planned: (\d+)", out).group(1)) for out in (out2, out3)]
    # One more shard: per sample one more align, index_bam (of the methylation shard's BAM)
    # and call_methylation job.
    assert jobs[1] - jobs[0] == 2 * 3
