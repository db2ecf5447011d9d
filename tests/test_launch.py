"""The launcher: step plans, the command lines it builds, and real runs under numactl here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from numapore.base.errors import InputError
from numapore.execution.hosts import (
    HostConfigError,
    host_config_from_dict,
    host_path,
    load_host_config,
)
from numapore.execution.launch import plan_processes, run_step, write_record
from numapore.execution.plan import plan_step
from numapore.execution.topology import detect_topology
from numapore.execution.shards import concat_tables
from numapore.execution.tools import (
    align_command,
    call_methylation_command,
    nanopolish_index_command,
)

HOSTS = Path(__file__).resolve().parent.parent / "config" / "hosts"


def host(strategy: str, **extra):
    """A host config with one strategy for every step."""
    data = {
        "topology": "auto",
        "strategy": {"alignment": strategy, "methylation": strategy},
        **extra,
    }
    return host_config_from_dict(data, name=f"test-{strategy}")


def test_layouts_on_the_opteron_example():
    opteron = load_host_config(HOSTS / "opteron-6376.yaml")
    topo = opteron.topology
    inst = plan_step(opteron, topo, "alignment", 64)
    assert inst.strategy == "instances"
    assert inst.nodes == (0, 1, 2, 3, 4, 5, 6, 7) and inst.threads == (8,) * 8
    auto = host("auto")
    small = plan_step(auto, topo, "alignment", 64, index_bytes=8 << 30)
    big = plan_step(auto, topo, "alignment", 64, index_bytes=20 << 30)
    huge = plan_step(auto, topo, "alignment", 64, index_bytes=120 << 30)
    assert (small.strategy, big.strategy, huge.strategy) == ("instances",) * 2 + ("interleave",)
    # 20 GiB is > 40 % of a 32 GiB node, <= 40 % of two: one instance per pair of nodes.
    assert big.groups == ((0, 1), (2, 3), (4, 5), (6, 7)) and big.threads == (16,) * 4
    assert big.prefix(1) == ["numactl", "--cpunodebind=2-3", "--interleave=2-3"]
    assert huge.nodes == (None,) and huge.threads == (64,)


def test_process_pool_layout_splits_threads():
    plan = plan_step(host("none"), detect_topology(), "methylation", 5, pool=2)
    assert plan.nodes == (None, None) and plan.threads == (3, 2)


def test_commands_wrap_the_unchanged_tool(tmp_path):
    opteron = load_host_config(HOSTS / "opteron-6376.yaml")
    plan = plan_step(opteron, opteron.topology, "alignment", 64)
    reads = [tmp_path / f"in.{i}.fastq" for i in range(8)]
    outs = [tmp_path / f"out.{i}.bam" for i in range(8)]
    tool = lambda src, out, t: align_command("minimap2", "ref.mmi", src, out, t)  # noqa: E731
    procs = plan_processes(plan, tool, reads, outs, tmp_path)
    assert procs[3].command.startswith("numactl --cpunodebind=3 --membind=3 bash -o pipefail -c ")
    assert tool(reads[3], outs[3], 8) in procs[3].command.replace("'\"'\"'", "'")


def test_tool_commands():
    assert align_command("bwa", "idx/ref", Path("r.fq.gz"), Path("o.bam"), 4) == (
        "bwa mem -x ont2d -t 4 idx/ref r.fq.gz | samtools sort -@ 4 -o o.bam -"
    )
    assert " -f -U r.fasta " in align_command("bowtie2", "p", Path("r.fasta"), Path("o"), 1)
    assert " -q -U r.fastq " in align_command("bowtie2", "p", Path("r.fastq"), Path("o"), 1)
    cmd = call_methylation_command(Path("r.fa"), Path("a.bam"), Path("g.fa"), Path("c.tsv"), 3, 20)
    assert cmd.endswith("-r r.fa -b a.bam -g g.fa | cat > c.tsv") and " -t 3 " in cmd
    assert " -q cpg " in cmd
    dam = call_methylation_command(Path("r"), Path("a"), Path("g"), Path("c"), 1, 20, "dam")
    assert " -q dam " in dam
    with pytest.raises(InputError, match="^aligner blast cannot align signal samples; use bowt"):
        align_command("blast", "p", Path("r.fa"), Path("o"), 1)
    modbam = align_command("minimap2", "i.mmi", Path("r.fastq"), Path("o.bam"), 2, "modbam")
    assert modbam.startswith("minimap2 -ax map-ont -y -Y -t 2 i.mmi r.fastq | samtools sort")
    assert " -C -t 2 " in align_command("bwa", "i", Path("r.fastq"), Path("o"), 2, "modbam")
    bowtie2 = align_command("bowtie2", "i", Path("r.fastq"), Path("o"), 2, "modbam")
    assert "--local --sam-append-comment -p 2 -x i -q -U r.fastq" in bowtie2
    assert nanopolish_index_command(Path("r.fa"), ["a b", "c"], None) == (
        "nanopolish index -d 'a b' -d c r.fa"
    )
    blow5 = Path("s.blow5")
    assert (
        nanopolish_index_command(Path("r.fa"), [], blow5) == "nanopolish index --slow5 s.blow5 r.fa"
    )


@pytest.mark.parametrize("strategy, pool", [("none", 2), ("interleave", 1), ("instances", 1)])
def test_run_step_splits_runs_under_numactl_and_merges(tmp_path, strategy, pool):
    """A real run here: the tool (a tiny shell command) sees its shard; outputs merge in order."""
    source = tmp_path / "table.tsv"
    source.write_text("h\n" + "".join(f"{i}\n" for i in range(10)))

    def split(src: Path, shards) -> None:
        """Deal the rows of a one-column table to the shards, header on each."""
        rows = src.read_text().splitlines()
        for i, shard in enumerate(shards):
            shard.write_text("\n".join([rows[0], *rows[1 + i :: len(shards)]]) + "\n")

    topo = detect_topology()
    extra = {"instances_per_node": 2} if strategy == "instances" else {}
    plan = plan_step(host(strategy, **extra), topo, "methylation", 2, pool=pool)
    out = tmp_path / "out.tsv"
    with open(tmp_path / "log.txt", "w") as log:
        run = run_step(
            plan, lambda s, o, t: f"cat {s} > {o}", source, out, split, concat_tables,
            tmp_path / "work", (".tsv", ".tsv"), log,
        )  # fmt: skip
    assert sorted(out.read_text().splitlines()[1:]) == [str(i) for i in range(10)]
    assert len(run.processes) == (2 if (strategy == "instances" or pool == 2) else 1)
    log_text = (tmp_path / "log.txt").read_text()
    assert "policy: " in log_text and "not recorded" not in log_text
    write_record(tmp_path / "run.json", plan, run)
    record = json.loads((tmp_path / "run.json").read_text())
    assert record["strategy"] == strategy and record["wall_seconds"] > 0
    assert "Cpus_allowed_list" in record["processes"][0]["policy"]


def test_failed_process_fails_the_step(tmp_path):
    source = tmp_path / "in.txt"
    source.write_text("x\n")
    topo = detect_topology()
    plan = plan_step(host("none"), topo, "alignment", 1)
    with open(tmp_path / "log.txt", "w") as log, pytest.raises(RuntimeError, match="exited 3"):
        run_step(plan, lambda s, o, t: "exit 3", source, tmp_path / "o", None, None,
                 tmp_path / "w", (".txt", ".txt"), log)  # fmt: skip


def test_host_path(tmp_path, monkeypatch):
    (tmp_path / "single-node.yaml").write_text("topology: auto\n")
    assert host_path("auto", [tmp_path]) == tmp_path / "single-node.yaml"
    monkeypatch.setattr("socket.gethostname", lambda: "bignode.cluster")
    (tmp_path / "bignode.yaml").write_text("topology: auto\n")
    assert host_path("auto", [tmp_path]) == tmp_path / "bignode.yaml"
    assert host_path("single-node", [tmp_path]) == tmp_path / "single-node.yaml"


def test_host_files_are_found_from_the_working_directory(tmp_path, monkeypatch):
    """config/hosts/ under the working directory first (the user's own files, also for a
    shipped name), then the workflow's shipped files; auto falls back to single-node."""
    own = tmp_path / "config" / "hosts"
    own.mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("socket.gethostname", lambda: "nohostfile.cluster")
    assert host_path("xeon-2socket") == HOSTS / "xeon-2socket.yaml"
    assert host_path("auto") == HOSTS / "single-node.yaml"
    (own / "xeon-2socket.yaml").write_text("io_mode: slow5\n")
    (own / "mine.yaml").write_text("topology: auto\n")
    assert host_path("xeon-2socket") == own / "xeon-2socket.yaml"
    assert load_host_config("xeon-2socket").io_mode == "slow5"
    assert host_path("mine") == own / "mine.yaml"
    (own / "single-node.yaml").write_text("topology: auto\n")
    assert host_path("auto") == own / "single-node.yaml"
    with pytest.raises(HostConfigError, match=r"config/hosts/none\.yaml, .* not found \(known "):
        host_path("none")


def test_project_layout_and_command(tmp_path):
    from project import REPO, snakemake_command, write_project

    row = {"sample": "s1", "signal": "f5", "reads": "r.fq", "reference": "g.fa"}
    write_project(tmp_path, [row], {"aligner": "bwa"})
    config = (tmp_path / "config/config.yaml").read_text()
    assert "aligner: bwa" in config and "simulate: {}" in config
    assert (tmp_path / "config/samples.tsv").read_text().splitlines() == [
        "sample\tsignal\treads\treference",
        "s1\tf5\tr.fq\tg.fa",
    ]
    cmd = snakemake_command(tmp_path, 3, "-n")
    assert cmd[0] == str(REPO / ".venv/bin/snakemake") and cmd[-3:] == ["--cores", "3", "-n"]


def test_snakemake_command_names_profile_and_cores(tmp_path):
    from project import REPO, snakemake_command

    cmd = snakemake_command(tmp_path, 2, "-n")
    assert cmd[cmd.index("--profile") + 1] == str(REPO / "profiles" / "hpc-numa")
    assert cmd[cmd.index("--cores") + 1] == "2" and cmd[-1] == "-n"
    slurm = snakemake_command(tmp_path, None, profile="slurm")
    assert slurm[slurm.index("--profile") + 1] == str(REPO / "profiles" / "slurm")
    assert "--cores" not in slurm
    bare = snakemake_command(tmp_path, 2, profile=None)
    assert "--profile" not in bare and "--workflow-profile" in bare


def test_forked_snakemake_runs_as_a_fresh_process(tmp_path, ecoli_dir):
    """The suite's forked Snakemake (tests/forked_snakemake.py) gives what a new `snakemake`
    process gives: the same exit status and messages, for a run that stops on a config key and
    for one that lists the rules; a job's output on the run's stdout; and a run's own CPU counts
    as a child's. The same for a forked `numapore pileup`."""
    import re
    import resource
    import subprocess

    import forked_snakemake
    from project import snakemake_command, write_project

    row = {"sample": "ecoli", "signal": ecoli_dir / "fast5", "reads": ecoli_dir / "reads.fasta"}
    work = write_project(tmp_path, [{**row, "reference": ecoli_dir / "region.fa"}])
    moment = re.compile(r"\[.*\d\d:\d\d:\d\d.*\]")
    from conftest import SHARED

    for args in (["-n", "--config", "aligner_x=1"], ["--list-rules"]):
        cmd = snakemake_command(work, 1, *args)
        assert forked_snakemake.forkable(cmd, {"capture_output": True, "text": True})
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime
        forked = forked_snakemake.run(cmd, capture_output=True, text=True)
        assert resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime > before
        fresh = subprocess.run(cmd, capture_output=True, text=True)
        assert forked.returncode == fresh.returncode == (1 if "--config" in args else 0)
        for got, want in ((forked.stdout, fresh.stdout), (forked.stderr, fresh.stderr)):
            assert moment.sub("", got) == moment.sub("", want), args
        if "--config" in args:  # the workflow's own message, not a harness error
            assert "numapore: " in forked.stdout + forked.stderr
    # A job's own output reaches the run's stdout, as a job of a fresh process's does.
    (tmp_path / "Snakefile").write_text('rule a:\n    output: "a.txt"\n    script: "a.py"\n')
    (tmp_path / "a.py").write_text('print("from the job")\nopen(snakemake.output[0], "w")\n')
    cmd = [forked_snakemake.SNAKEMAKE, "-s", str(tmp_path / "Snakefile"), "-c1", "-F"]
    for run in (forked_snakemake.run, subprocess.run):
        done = run([*cmd, "-d", str(tmp_path / run.__module__)], capture_output=True, text=True)
        assert done.returncode == 0 and "from the job" in done.stdout, done.stderr[-2000:]
    # numapore's own command line, forked the same way: a pileup with worker processes gives
    # the bytes and messages of a fresh `numapore pileup`; a missing input the same one line.
    bam = SHARED / "data/modkit_pileup/inputs/bc_anchored_10_reads.sorted.bam"
    for source in (bam, tmp_path / "missing.bam"):
        outputs = {}
        for run in (forked_snakemake.run, subprocess.run):
            out = tmp_path / f"{source.stem}.{run.__module__}.bed"
            cmd = [forked_snakemake.NUMAPORE, "pileup", str(source), str(out), "--threads", "2"]
            assert forked_snakemake.forkable(cmd, {"capture_output": True, "text": True})
            done = run(cmd, capture_output=True, text=True)
            outputs[run] = (done.returncode, done.stdout, moment.sub("", done.stderr),
                            out.read_bytes() if out.exists() else None)  # fmt: skip
        assert outputs[forked_snakemake.run] == outputs[subprocess.run]
        code, _, err, bed = outputs[subprocess.run]
        assert (code, bool(bed)) == ((0, True) if source == bam else (1, False)), err
    assert err == f"numapore: {source}: no such file\n"  # one line, before htslib's own
