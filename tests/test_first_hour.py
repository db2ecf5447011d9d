"""The first hour of a new user (issue 28), through the real workflow: a sample none of whose
reads can be used stops the run (or, allowed, is listed in its last lines); the common mistakes
end in one `numapore:` line naming the file, line and key with the likely fix; broken reads and
references are named by the check before any heavy job; the demo, the host's I/O mode and
strategy are switched from the command line; the README's profile is the clone's own; no
`Shell command: None`."""

from __future__ import annotations

import gzip
import json
import os
import random
import subprocess
from pathlib import Path

import pytest
import forked_snakemake
import yaml
from conftest import FEW_READS, REPO, host_file, run_workflow, shortest_reads

from numapore.base.errors import InputError
from numapore.execution.hosts import HostConfig, HostConfigError, config_overrides, with_overrides
from numapore.workflow import build
from project import snakemake_command, write_project


def ecoli(ecoli_dir: Path, name: str = "ecoli") -> dict[str, str]:
    """A sheet row of the real E. coli reads against their 60 kb region."""
    return {
        "sample": name,
        "signal": str(ecoli_dir / "fast5"),
        "reads": str(ecoli_dir / "reads.fasta"),
        "reference": str(ecoli_dir / "region.fa"),
    }


def output(result) -> str:
    """What a run printed (Snakemake's log is on stdout or stderr, by version and setting)."""
    return result.stdout + result.stderr


def first_numapore_line(result) -> str:
    """The first line of a run's output that starts with `numapore:`."""
    out = result.stdout + result.stderr
    return next((line for line in out.splitlines() if line.startswith("numapore:")), "")


def numapore_lines(result) -> list[str]:
    """Every `numapore:` line of a run's output, in order."""
    out = result.stdout + result.stderr
    return [line for line in out.splitlines() if line.startswith("numapore:")]


def dry_run(work: Path, *args: str):
    """A dry run of the workflow in work (hpc-numa profile, 2 cores)."""
    return run_workflow(work, "--dry-run", *args, check=False)


def demo(dh10b: Path) -> dict:
    """The shipped config's demo sample, its reference at dh10b."""
    shipped = yaml.safe_load((REPO / "config" / "config.yaml").read_text())["simulate"]
    return {name: {**s, "reference": str(dh10b)} for name, s in shipped.items()}


def problem_lines(result) -> list[str]:
    """The `numapore:` lines after the run's opening one (the host file it read)."""
    return [line for line in numapore_lines(result) if not line.startswith("numapore: host file")]


# ----------------------------------------------------------------------------------------------
# 1. A sample none of whose reads can be used: it stops the run, or, allowed, the run's last
# lines list it.


def illumina_reads(ecoli_dir: Path, path: Path, count: int = 300) -> Path:
    """Short reads drawn from the E. coli region and named as an Illumina run names them: not
    one read id in common with the FAST5 files."""
    rng = random.Random(28)
    genome = "".join((ecoli_dir / "region.fa").read_text().split("\n")[1:])
    records = []
    for i in range(count):
        start = rng.randrange(len(genome) - 150)
        name = f"M00123:28:000000000-A1B2C:1:1101:{1000 + i}:{2000 + i}"
        records.append(f"@{name} 1:N:0:1\n{genome[start:start + 150]}\n+\n{'I' * 150}\n")
    path.write_text("".join(records))
    return path


def test_empty_sample_stops_the_run_or_is_listed_last(tmp_path, ecoli_dir):
    reads = illumina_reads(ecoli_dir, tmp_path / "illumina.fastq")
    illumina = {**ecoli(ecoli_dir, "illumina"), "reads": str(reads)}
    work = write_project(tmp_path / "run", [illumina])
    no_signal = (
        f"none of its 300 reads (reads file {reads}) has raw signal in {ecoli_dir / 'fast5'} "
        "(its 112 reads have other read ids): nothing to call methylation on; were these reads "
        "basecalled from that signal?"
    )
    result = run_workflow(work, check=False)
    assert result.returncode == 1
    assert problem_lines(result)[0] == (
        f"numapore: sample 'illumina': {no_signal} (to run it anyway: allow_empty_samples: true)"
    )
    assert not (work / "results/illumina/methylation").exists()  # stopped before the calling
    # Allowed: the run goes on and its last lines list the empty samples, each with its reason;
    # here also one whose reads all went unmapped (a reference they do not come from).
    rng = random.Random(7)
    wrong = tmp_path / "wrong.fa"
    wrong.write_text(">chrZ\n" + "".join(rng.choice("ACGT") for _ in range(50_000)) + "\n")
    unmapped = {**ecoli(ecoli_dir, "unmapped"), "reference": str(wrong)}
    write_project(tmp_path / "run", [illumina, unmapped])
    # Each sample's bedMethyl and accounting (the last lines judge them), not the report
    targets = [
        f"results/{s}/{out}"
        for s in ("illumina", "unmapped")
        for out in (f"methylation/{s}.minimap2.cpg.bedmethyl.gz", f"{s}.minimap2.accounting.tsv")
    ]
    result = run_workflow(work, *targets, "--config", "allow_empty_samples=True", check=False)
    assert result.returncode == 0, output(result)[-3000:]
    warnings = [
        f"numapore: warning: sample 'illumina' is empty (allow_empty_samples: true): {no_signal}",
        "numapore: warning: sample 'unmapped' is empty (allow_empty_samples: true): none of its "
        f"112 reads mapped to the reference {wrong} with minimap2 (reads file "
        f"{ecoli_dir / 'reads.fasta'}): is it the right reference (do its contigs include the "
        "sequenced genome)?",
    ]
    lines = output(result).splitlines()
    assert numapore_lines(result)[-2:] == warnings
    assert lines.index(warnings[-1]) >= len(lines) - 3  # then Snakemake's log path and time
    bed = work / "results/illumina/methylation/illumina.minimap2.cpg.bedmethyl.gz"
    assert gzip.decompress(bed.read_bytes()) == b""


# ----------------------------------------------------------------------------------------------
# 2. One line per common mistake, not a schema dump.


def test_sheet_column_typo(tmp_path, ecoli_dir):
    work = write_project(tmp_path, [ecoli(ecoli_dir)])
    sheet = work / "config" / "samples.tsv"
    sheet.write_text(sheet.read_text().replace("signal", "signl", 1))
    result = dry_run(work)
    assert result.returncode == 1
    assert first_numapore_line(result) == (
        "numapore: sample sheet config/samples.tsv, line 1: unknown column 'signl'; "
        "did you mean `signal`?"
    )
    assert "Failed validating" not in output(result) and len(output(result).splitlines()) < 8


def test_unknown_config_key_in_the_file_and_on_the_command_line(tmp_path, ecoli_dir):
    work = write_project(tmp_path, [ecoli(ecoli_dir)], {"alignr": "bwa"})
    line = (work / "config/config.yaml").read_text().splitlines().index("alignr: bwa") + 1
    result = dry_run(work)
    assert result.returncode == 1
    assert first_numapore_line(result) == (
        f"numapore: config/config.yaml, line {line}: unknown config key 'alignr'; "
        "did you mean `aligner`?"
    )
    assert "Failed validating" not in output(result) and len(output(result).splitlines()) < 8
    work = write_project(tmp_path / "cli", [ecoli(ecoli_dir)])
    result = dry_run(work, "--config", "scatter={alignmnt: 2}")
    assert result.returncode == 1
    assert first_numapore_line(result) == (
        "numapore: --config scatter=...: unknown config key 'scatter.alignmnt'; "
        "did you mean `alignment`?"
    )


def test_byte_order_mark_is_accepted(tmp_path, ecoli_dir):
    """A sheet that starts with a byte-order mark is read; the dry run also shows point 10 (no
    `Shell command: None` for script rules; shell rules' commands still printed)."""
    work = write_project(tmp_path, [ecoli(ecoli_dir)])
    sheet = work / "config" / "samples.tsv"
    sheet.write_bytes(b"\xef\xbb\xbf" + sheet.read_bytes())
    result = dry_run(work)
    assert result.returncode == 0, result.stderr
    out = result.stdout + result.stderr
    assert "wildcards: sample=ecoli" in out
    assert "rule stage_reads:" in out  # a script rule
    assert "Shell command: None" not in out
    assert "Shell command: minimap2 -x map-ont" in out  # the index, a shell rule


# The variants below build the run's plan as the workflow builds it while it is read
# (numapore.workflow.build.build, from workflow/rules/common.smk): the dry runs above show that a
# problem it finds ends the run with its one `numapore:` line, from the sheet, the config file
# and --config.

SCHEMAS = REPO / "workflow" / "schemas"


def plan_problem(work: Path, monkeypatch, **command_line) -> str:
    """The `numapore:` line of the first problem the run's plan finds in work: its
    config/config.yaml with these --config values over it, and the sheet it names."""
    monkeypatch.chdir(work)
    files = [Path("config/config.yaml")]
    config = build.load_config(files, command_line)
    with pytest.raises(InputError) as err:
        build.build(config, schemas=SCHEMAS, configfiles=files, given=command_line)
    return f"numapore: {err.value}"


def test_spaces_instead_of_tabs(tmp_path, ecoli_dir, monkeypatch):
    work = write_project(tmp_path, [ecoli(ecoli_dir)])
    sheet = work / "config" / "samples.tsv"
    sheet.write_text(sheet.read_text().replace("\t", "    "))
    assert plan_problem(work, monkeypatch) == (
        "numapore: sample sheet config/samples.tsv, line 1: the sheet must be tab-separated; "
        "this line has no tab, its fields are separated by spaces"
    )
    # The header tab-separated, a row with spaces: the same reason, on the row's line.
    lines = sheet.read_text().splitlines()
    sheet.write_text(lines[0].replace("    ", "\t") + "\n" + "\n".join(lines[1:]) + "\n")
    assert plan_problem(work, monkeypatch) == (
        "numapore: sample sheet config/samples.tsv, line 2: the sheet must be tab-separated; "
        "this line has no tab, its fields are separated by spaces"
    )


def test_bad_aligner_name(tmp_path, ecoli_dir, monkeypatch):
    work = write_project(tmp_path, [ecoli(ecoli_dir)], {"aligner": "minimap"})
    line = (work / "config/config.yaml").read_text().splitlines().index("aligner: minimap") + 1
    assert plan_problem(work, monkeypatch) == (
        f"numapore: config/config.yaml, line {line}: aligner: 'minimap' is not one of "
        "['minimap2', 'bwa', 'bowtie2', 'snap']; did you mean `minimap2`?"
    )
    work = write_project(tmp_path / "cli", [ecoli(ecoli_dir)])
    assert plan_problem(work, monkeypatch, aligner="bwa2") == (
        "numapore: --config aligner=bwa2: 'bwa2' is not one of ['minimap2', 'bwa', 'bowtie2', "
        "'snap']; did you mean `bwa`?"
    )


def test_snap_refuses_nanopore_reads_before_any_job(tmp_path, ecoli_dir):
    """SNAP is a short-read aligner: a nanopore sample with aligner snap stops the run before
    any job, with one line naming the sample, the reason and the aligners that can."""
    work = write_project(tmp_path, [ecoli(ecoli_dir)], {"aligner": "snap"})
    result = dry_run(work)
    assert result.returncode == 1
    assert first_numapore_line(result) == (
        "numapore: aligner: sample 'ecoli': aligner snap cannot align signal samples (it aligns "
        "short samples only); use bowtie2 or bwa or minimap2"
    )
    assert not (work / "results").exists()


# ----------------------------------------------------------------------------------------------
# 3. Reads of zero length, an empty contig, a contig name longer than minimap2's index keeps:
# named in the user's file by the reads/reference check, before any index or alignment.


def test_broken_reads_and_reference_named_before_any_heavy_job(tmp_path, ecoli_dir):
    records = (ecoli_dir / "reads.fasta").read_text().split(">")[1:]
    fastq = []
    for i, record in enumerate(records):
        name, *lines = record.split("\n")
        seq = "" if i in (3, 10, 50) else "".join(lines)
        fastq.append(f"@{name}\n{seq}\n+\n{'5' * len(seq)}\n")
    zero = tmp_path / "zero.fastq"
    zero.write_text("".join(fastq))
    region = (ecoli_dir / "region.fa").read_text()
    empty_contig = tmp_path / "empty_contig.fa"
    empty_contig.write_text(region + ">plasmid\n")
    long_name = tmp_path / "long_name.fa"
    long_name.write_text(">" + "c" * 5030 + "\n" + region.split("\n", 1)[1])
    first = records[3].split("\n")[0]
    contig_line = region.count("\n") + 1
    cases = {
        "zero": (
            {"reads": str(zero)},
            f"numapore: reads file {zero}: 3 records have an empty sequence (the first: read "
            f"'{first}', record 4, line 13); a read without bases cannot be aligned or called: "
            "remove them",
        ),
        "empty_contig": (
            {"reference": str(empty_contig)},
            f"numapore: reference file {empty_contig}: 1 record has an empty sequence (contig "
            f"'plasmid', record 2, line {contig_line}); samtools faidx cannot index an empty "
            "contig: remove it",
        ),
        "long_name": (
            {"reference": str(long_name)},
            f"numapore: reference file {long_name}, line 1 (record 1): name longer than 255 "
            "characters (minimap2's index keeps names of up to 255 characters)",
        ),
    }
    for name, (change, message) in cases.items():
        work = write_project(tmp_path / name, [{**ecoli(ecoli_dir), **change}])
        result = run_workflow(work, check=False)
        assert result.returncode == 1, name
        assert problem_lines(result)[0] == message, name
        assert "Traceback" not in output(result), name
        assert not list(work.glob("results/*/align/*.bam")), name
        if "reference" in change:
            assert not list(work.glob("results/references/*/minimap2/*.mmi")), name


# ----------------------------------------------------------------------------------------------
# 4. --set-threads: Snakemake parses it before the workflow is read; the documented form works.


def test_set_threads_documented_form(tmp_path, ecoli_dir):
    work = write_project(tmp_path, [ecoli(ecoli_dir)])
    cmd = snakemake_command(work, 4, "--dry-run", "--set-threads", "call_methylation=3")
    result = forked_snakemake.run(cmd, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    out = result.stdout + result.stderr
    block = out[out.index("rule call_methylation:") :].split("\n\n")[0]
    assert "    threads: 3\n" in block + "\n"
    # What profiles/README.md says the other forms get: Snakemake's own error, before the
    # workflow (and any numapore check) runs.
    cmd = snakemake_command(work, 4, "--dry-run", "--set-threads", "call_methylation=-2")
    result = forked_snakemake.run(cmd, capture_output=True, text=True)
    assert result.returncode == 1
    assert "Invalid threads definition" in output(result)
    assert "numapore:" not in output(result)
    # A rule name with a typo, which Snakemake would ignore: one line.
    cmd = snakemake_command(work, 4, "--dry-run", "--set-threads", "call_methylaton=3")
    result = forked_snakemake.run(cmd, capture_output=True, text=True)
    assert result.returncode == 1
    assert [line for line in numapore_lines(result) if "set-threads" in line] == [
        "numapore: --set-threads (or a profile's set-threads): no rule 'call_methylaton' in "
        "this workflow; did you mean `call_methylation`?"
    ]


# ----------------------------------------------------------------------------------------------
# 5. The demo: beside the sheet's samples (said in the run's first lines), off from the command
# line.

DEMO_LINE = (
    "numapore: also running the demo sample 'demo' (config simulate:); "
    "--config simulate=none turns it off"
)


def test_demo_beside_the_sheet_and_turned_off(tmp_path, ecoli_dir, dh10b):
    work = write_project(tmp_path, [ecoli(ecoli_dir)], {"simulate": demo(dh10b)})
    result = dry_run(work)
    assert result.returncode == 0, result.stderr
    assert numapore_lines(result)[:2] == [
        f"numapore: host file {REPO / 'config/hosts/single-node.yaml'} (I/O mode fast5)",
        DEMO_LINE,
    ]
    assert "wildcards: sample=demo" in output(result)
    for off in ("simulate=none", "simulate={}"):
        result = dry_run(work, "--config", off)
        assert result.returncode == 0, result.stderr
        assert DEMO_LINE not in numapore_lines(result), off
        assert "simulate_reads" not in output(result) and "sample=demo" not in output(result), off
        assert "wildcards: sample=ecoli" in output(result), off
    # Only the demo, turned off: no samples at all, one line saying so.
    alone = write_project(tmp_path / "alone", [], {"simulate": demo(dh10b)})
    result = dry_run(alone, "--config", "simulate=none")
    assert result.returncode == 1
    assert first_numapore_line(result) == (
        "numapore: no samples: config/samples.tsv has no rows and config simulate: has none "
        "(the demo is off)"
    )


# ----------------------------------------------------------------------------------------------
# 6. The host's I/O mode and strategy from the command line: said, recorded, replaced results
# named.


def test_io_mode_and_strategy_overrides(tmp_path, ecoli_dir):
    host = host_file(tmp_path / "plain.yaml", strategy="none", io_mode="fast5")
    # the shortest reads: what is checked is the settings each job ran with, not its calls
    short = shortest_reads(ecoli_dir / "reads.fasta", tmp_path / "short.fasta", FEW_READS)
    work = write_project(tmp_path / "run", [{**ecoli(ecoli_dir), "reads": str(short)}])
    target = "results/ecoli/report/ecoli.minimap2.provenance.html"
    given = ("--config", f"host={host}", "io_mode=slow5", "strategy=interleave")
    result = run_workflow(work, target, *given)
    assert numapore_lines(result)[:2] == [
        f"numapore: host file {host} (I/O mode slow5)",
        "numapore: the command line overrides the host file: I/O mode slow5 (the host file's: "
        "fast5), alignment strategy interleave (the host file's: none), methylation strategy "
        "interleave (the host file's: none)",
    ]
    assert "Shell command: None" not in output(result)  # a real run too (point 10)
    logs = work / "results/logs"
    align = json.loads((logs / "align/ecoli.minimap2.1-of-1.run.json").read_text())
    assert align["strategy"] == "interleave"
    assert align["overrides"] == {"strategy.alignment": "interleave"}
    calls = json.loads((logs / "call_methylation/ecoli.minimap2.cpg.1-of-1.run.json").read_text())
    assert calls["io_mode"] == "slow5" and calls["strategy"] == "interleave"
    assert calls["overrides"] == {"io_mode": "slow5", "strategy.methylation": "interleave"}
    assert calls["processes"][0]["command"].startswith("numactl --interleave=")
    provenance = work / "results/ecoli/report/ecoli.minimap2.provenance"
    assert json.loads(Path(f"{provenance}.data.json").read_text())["overrides"] == {
        "io_mode": "slow5",
        "strategy.alignment": "interleave",
        "strategy.methylation": "interleave",
    }
    page = Path(f"{provenance}.html").read_text()
    assert "io_mode=slow5 strategy.alignment=interleave strategy.methylation=interleave" in page
    # The host file's own settings next time: the run says which results it replaces (their
    # run records say how they were made).
    result = run_workflow(work, target, "--dry-run", "--config", f"host={host}")
    assert [line for line in numapore_lines(result) if "other settings" in line] == [
        "numapore: the alignments of ecoli (results/ecoli/align/) were made with other "
        "settings (now alignment strategy none, was interleave): this run replaces them and "
        "what is made from them; to keep them, copy results/ or run in another folder first",
        "numapore: the methylation calls of ecoli (results/ecoli/methylation/) were made with "
        "other settings (now I/O mode fast5, was slow5; now methylation strategy none, was "
        "interleave): this run replaces them and what is made from them; to keep them, copy "
        "results/ or run in another folder first",
    ]
    assert "rule align:" in output(result) and "rule call_methylation:" in output(result)
    # The same settings again: nothing replaced, nothing to do.
    result = run_workflow(work, target, "--dry-run", *given)
    assert not [line for line in numapore_lines(result) if "other settings" in line]
    assert "Nothing to be done" in output(result)


# ----------------------------------------------------------------------------------------------
# 7. `--profile profiles/hpc-numa` is the profile of the clone it runs in.


def test_profile_path_is_the_clones_own(tmp_path):
    clone = tmp_path / "second-clone"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True)
    (clone / "resources").symlink_to(REPO / "resources")  # the demo's genome (git-ignored)
    profile = clone / "profiles" / "hpc-numa" / "config.yaml"
    profile.write_text(
        profile.read_text().replace("  - host=auto", "  - host=auto\n  - aligner=bwa")
    )
    # What an earlier ./setup.sh left: ~/.config/snakemake/hpc-numa pointing at another clone.
    xdg = tmp_path / "xdg"
    (xdg / "snakemake").mkdir(parents=True)
    (xdg / "snakemake" / "hpc-numa").symlink_to(REPO / "profiles" / "hpc-numa")
    env = {**os.environ, "XDG_CONFIG_HOME": str(xdg)}
    snakemake = str(REPO / ".venv" / "bin" / "snakemake")

    def dry(profile: str) -> str:
        """The README's command, dry, from the clone's root; what it printed."""
        run = subprocess.run(
            [snakemake, "--profile", profile, "--dry-run"],
            cwd=clone, env=env, capture_output=True, text=True,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr
        return run.stdout + run.stderr

    own = dry("profiles/hpc-numa")
    assert "Using profiles profiles/hpc-numa and workflow specific profile profiles/default" in own
    assert "rule bwa_index:" in own and "minimap2" not in own
    # The name finds the other clone's profile (what the README's command no longer uses).
    assert "rule minimap2_index:" in dry("hpc-numa")


# ----------------------------------------------------------------------------------------------
# 10. No `Shell command: None` for script rules, shell rules' commands still printed: checked on
# test_byte_order_mark_is_accepted's dry run and test_io_mode_and_strategy_overrides' real run.


def test_override_keys_precedence():
    """strategy sets both steps, strategy_<step> one step over it; equal settings are no
    override; a value the host file's schema lacks is refused."""
    given = config_overrides({"strategy": "interleave", "strategy_methylation": "none"})
    assert given == {"strategy.alignment": "interleave", "strategy.methylation": "none"}
    host = HostConfig("h", None, None, {"alignment": "none", "methylation": "none"})
    assert with_overrides(host, given).overrides == {"strategy.alignment": "interleave"}
    assert with_overrides(host, config_overrides({"io_mode": "fast5"})).overrides == {}
    with pytest.raises(HostConfigError, match="'spread' is not one of"):
        with_overrides(host, {"strategy.alignment": "spread"})
