"""The run's plan (numapore.workflow), built without Snakemake from the shipped config and each
.test/ config as `--configfile` layers them: what the default target makes, the pileup's
settings per sample, the DMR contrasts and cohort tables, the comparison's cells, both tunings
and their lines, the wildcard patterns and the results' paths the other tests name literally;
and the one `numapore:` line of each common mistake. Pure and fast: no job runs."""

from __future__ import annotations

import itertools
import json
import math
import re
import shutil
from dataclasses import asdict, replace
from pathlib import Path

import pytest
import yaml
from project import REPO
from runs_modbam_short import as_the_clone

from numapore.base.errors import InputError
from numapore.compare import tuning
from numapore.execution import cluster
from numapore.execution.hosts import host_path
from numapore.pileup.common import Options
from numapore.workflow import build, jobs, layout, outputs, tuning_plans
from numapore.workflow.plan import RunPlan

SCHEMAS = REPO / "workflow" / "schemas"
TUNING_NAME = "testhost"  # the tuning files' name, whatever the machine's
ONE_NODE = "nothing to tune: one node (every strategy runs as none does)"
# A host of one NUMA node of its own (host_check: jobs: the file is read, not checked against
# this machine), and the shipped two-socket one: the tunings' plans whatever this machine is.
ONE_NODE_HOST = {
    "description": "one node",
    "topology": {"nodes": [{"id": 0, "cpus": "0-1", "memory_mib": 4096, "distances": [10]}]},
    "io_mode": "fast5",
}


@pytest.fixture
def clone(tmp_path, monkeypatch, dh10b):
    """A folder laid out as the clone (its sheet too), the working directory; the tuning files
    named TUNING_NAME, and the environment the plan sets restored after the test."""
    as_the_clone(tmp_path)
    shutil.copy(REPO / "config" / "samples.tsv", tmp_path / "config" / "samples.tsv")
    (tmp_path / "one-node.yaml").write_text(yaml.safe_dump(ONE_NODE_HOST))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(tuning.NAME_ENV, TUNING_NAME)
    monkeypatch.setenv(tuning.PAYBACK_ENV, "")  # recorded, so that teardown removes it
    monkeypatch.delenv(tuning.PAYBACK_ENV)
    return tmp_path


def run_plan(*configfiles: str, cores: int = 2, threads_given=(), **given) -> RunPlan:
    """The plan of config/config.yaml with these config files over it and --config given, as
    the workflow builds it in the working directory."""
    files = [Path("config/config.yaml"), *map(Path, configfiles)]
    config = build.load_config(files, given)
    return build.build(
        config,
        schemas=SCHEMAS,
        configfiles=files,
        given=given,
        cores=cores,
        threads_given=threads_given,
    )


def host_note(found: RunPlan) -> tuple[str, str]:
    return ("info", f"numapore: host file {found.host_file} (I/O mode {found.io_mode})")


# ----------------------------------------------------------------------------------------------
# What the default target makes, per config.


def signal_sample_outputs(s: str, motifs=("cpg",), aligner="minimap2") -> list[str]:
    """A simulated signal sample's files: the alignment and its QC, the read accounting, per
    motif nanopolish's calls, frequency, bedMethyl and modBAM, the CpG accuracy (its truth is
    known), and the report: four figures and the accuracy's."""
    run = f"results/{s}/methylation/{s}.{aligner}"
    per_motif = [
        f"{run}.{m}{suffix}"
        for m in motifs
        for suffix in (".calls.tsv", ".frequency.tsv", ".bedmethyl.gz.tbi", ".modbam.bam.bai")
    ]
    return [
        *alignment_outputs(s, aligner),
        f"results/{s}/{s}.{aligner}.accounting.tsv",
        *per_motif,
        f"{run}.cpg.accuracy.tsv",
        *report(s, aligner, "alignment_qc.png", "methylation.png", "accounting.png"),
        *report(s, aligner, "provenance.html", "accuracy.png"),
    ]


def modbam_sample_outputs(s: str, phased: bool = False, tracks: bool = False) -> list[str]:
    """A simulated modBAM sample's files: the alignment and its QC, the pileup's CpG bedMethyl,
    what staging counted, (phased) the bedMethyl per haplotype, the CpG accuracy, the read
    accounting, and the report (no accuracy figure: that one reads nanopolish's calls)."""
    run = f"results/{s}/methylation/{s}.minimap2.cpg"
    haplotypes = [f"{run}.{hp}.bedmethyl.gz{i}" for hp in ("hp1", "hp2") for i in ("", ".tbi")]
    return [
        *alignment_outputs(s, "minimap2"),
        f"{run}.bedmethyl.gz.tbi",
        f"results/{s}/{s}.staged.tsv",
        *(haplotypes if phased else []),
        f"{run}.accuracy.tsv",
        f"results/{s}/{s}.minimap2.accounting.tsv",
        *report(s, "minimap2", "alignment_qc.png", "methylation.png", "accounting.png"),
        *report(s, "minimap2", "provenance.html", *(["tracks.html"] if tracks else [])),
    ]


def alignment_outputs(s: str, aligner: str) -> list[str]:
    return [
        f"results/{s}/align/{s}.{aligner}{x}" for x in (".bam.bai", ".stats.txt", ".summary.tsv")
    ]


def report(s: str, aligner: str, *names: str) -> list[str]:
    return [f"results/{s}/report/{s}.{aligner}.{name}" for name in names]


def calls_qc_files(s: str, aligner: str = "minimap2", motifs=("cpg",)) -> list[str]:
    """The QC of a sample's calls per motif (config calls_qc): its tables, the report's."""
    names = ("summary.txt", "summary.tsv", "thresholds.tsv", "probabilities.tsv", "pass.tsv")
    return [
        path
        for m in motifs
        for path in [f"results/{s}/qc/{s}.{aligner}.{m}.{n}" for n in names]
        + report(s, aligner, f"{m}.calls_qc.png", f"{m}.calls_qc.html")
    ]


PARTS = ("all", "hp1", "hp2")
MULTIQC = "results/multiqc/numapore_multiqc.html"
# A contrast's files: its merged tables' indexes, the report's figure and table, the score.
DMR_FILES = (".sites.tsv.gz.tbi", ".dmrs.bed.gz.tbi", ".dmrs.png", ".top_dmrs.html", ".score.tsv")


def test_default_config_runs_the_signal_demo(clone):
    """The shipped config: the sheet has no sample, the demo is a simulated FAST5 sample that
    nanopolish calls (CpG), scored against its truth; one sample: no cohort table, no DMR."""
    found = run_plan()
    assert list(found.samples) == ["demo"] and found.groups == {}
    demo = found.samples["demo"]
    assert demo.kind == "signal" and demo.signal_format == "fast5"
    assert found.references == {"ecoli_dh10b": clone / "resources" / "ecoli_dh10b.fa"}
    assert outputs.final_outputs(found) == [
        *signal_sample_outputs("demo"),
        *calls_qc_files("demo"),
        MULTIQC,
    ]
    assert (
        found.cohort_tables() == [] and found.contrasts == {} and outputs.dmr_outputs(found) == []
    )
    assert found.host_file == str(host_path("auto").absolute())
    assert found.notes == [host_note(found)]
    assert found.tune is None and found.tune_pileup is None  # tune: "off"
    assert found.sample_motifs(demo) == ["cpg"] and found.scored("demo")
    assert outputs.multiqc_inputs(found) == {
        "stats": ["results/demo/align/demo.minimap2.stats.txt"],
        "flagstat": ["results/demo/align/demo.minimap2.flagstat.txt"],
        "custom": [
            "results/multiqc/numapore_accounting_mqc.tsv",
            "results/multiqc/numapore_methylation_mqc.tsv",
            "results/multiqc/numapore_calls_qc_mqc.tsv",
            "results/multiqc/numapore_calls_qc_mqc.json",
        ],
    }
    # A second motif: its four files; the accuracy and the report stay CpG's.
    both = run_plan(methylation={"motifs": ["cpg", "gpc"]})
    assert outputs.final_outputs(both) == [
        *signal_sample_outputs("demo", ("cpg", "gpc")),
        *calls_qc_files("demo", motifs=("cpg", "gpc")),
        MULTIQC,
    ]


def test_signal_config_is_the_demos_shape(clone):
    """.test/config-signal.yaml changes the demo's size only: the same files."""
    found = run_plan(".test/config-signal.yaml")
    assert found.config["simulate"]["demo"]["reads"] == 100
    assert outputs.final_outputs(found) == [
        *signal_sample_outputs("demo"),
        *calls_qc_files("demo"),
        MULTIQC,
    ]


def test_modbam_config(clone):
    """.test/config-modbam.yaml: the demo as a modBAM, piled up (its reads' own calls), scored,
    with its staging's counts and read accounting."""
    found = run_plan(".test/config-modbam.yaml")
    assert list(found.samples) == ["demo"] and found.samples["demo"].kind == "modbam"
    assert outputs.final_outputs(found) == [
        *modbam_sample_outputs("demo"),
        *calls_qc_files("demo"),
        MULTIQC,
    ]
    assert outputs.run_output(found, "modbam", "demo", "minimap2") == (
        "results/demo/align/demo.minimap2.bam"
    )
    assert (
        jobs.pileup_bam(found, "demo", "minimap2", "cpg") == "results/demo/align/demo.minimap2.bam"
    )


def test_short_config(clone):
    """.test/config-short.yaml: the demo off, two short samples of the sheet (pairs and single
    reads) aligned by bwa; short reads get the alignment's QC and provenance only."""
    found = run_plan(".test/config-short.yaml")
    assert found.config["simulate"] == {} and found.aligner == "bwa"
    assert list(found.samples) == ["pe", "se"]
    assert [s.paired for s in found.samples.values()] == [True, False]
    expected = [
        *[
            path
            for s in ("pe", "se")
            for path in alignment_outputs(s, "bwa")
            + report(s, "bwa", "alignment_qc.png", "provenance.html")
        ],
        MULTIQC,
    ]
    assert outputs.final_outputs(found) == expected
    assert all(found.marks_duplicates(s) for s in ("pe", "se"))
    assert found.bwa_batch("pe") == 10_000_000
    assert outputs.multiqc_runs(found) == {"pe.bwa": {}, "se.bwa": {}}
    assert jobs.reads_shard(found, "pe", "1-of-1", "fast5", 2) == (
        "results/pe/reads/paired/pe.2.fastq.gz"
    )
    assert jobs.reads_shard(found, "se", "1-of-1", "fast5", 2) == []
    # The comparison benchmarks the first sample, in its alignment only: 2 aligners x 4
    # strategies x 2 thread counts x 2 repeats.
    assert found.compare_steps() == ["alignment"] and len(found.compare_cells) == 32


def test_groups_config_contrasts_and_cohort(clone):
    """.test/config-groups.yaml: five simulated modBAM samples on one window, phased (HP tags);
    the demo has no group. Its DMR contrasts: case vs control (two samples a side), case1's
    haplotypes; both scored (every sample simulated with group and allele-specific regions);
    one cohort table of the five samples."""
    found = run_plan(".test/config-groups.yaml")
    # in Snakemake's order: the --configfile's keys first, then the workflow file's others
    names = ["case1", "case2", "control1", "control2", "demo"]
    assert list(found.samples) == names
    assert found.groups == {"case": ["case1", "case2"], "control": ["control1", "control2"]}
    assert list(found.contrasts) == ["case_vs_control", "case1_hp1_vs_hp2"]
    groups, haplotypes = found.contrasts.values()
    bed = "results/{0}/methylation/{0}.minimap2.cpg{1}.bedmethyl.gz"
    assert (groups.kind, groups.label1, groups.label2) == ("groups", "case", "control")
    assert (groups.group1, groups.group2) == (("case1", "case2"), ("control1", "control2"))
    assert groups.sources == {s: bed.format(s, "") for s in names[:4]}
    assert groups.reference == "ecoli_window" and groups.notes == ()
    assert (haplotypes.kind, haplotypes.group1, haplotypes.group2) == (
        "haplotypes",
        ("case1_hp1",),
        ("case1_hp2",),
    )
    assert haplotypes.sources == {
        "case1_hp1": bed.format("case1", ".hp1"),
        "case1_hp2": bed.format("case1", ".hp2"),
    }
    assert groups.settings == haplotypes.settings
    assert groups.settings["smoothing"] is True and groups.settings["delta"] == 0.1
    assert found.notes == [
        host_note(found),
        (
            "info",
            "numapore: config dmr.contrasts[1] (case1_hp1_vs_hp2): haplotype 1 vs 2 of sample "
            "'case1' (one sample per side): tested with smoothing, neighbouring CpGs standing in "
            "for replicates (its p-values say nothing of the variation between individuals)",
        ),
    ]
    assert found.contrast_pattern() == "case_vs_control|case1_hp1_vs_hp2"
    for name in found.contrasts:
        assert jobs.dmr_truth(found, name) == "results/simulated/case1/regions.bed"
    dmr = [f"results/dmr/{c}/{c}{suffix}" for c in found.contrasts for suffix in DMR_FILES]
    assert outputs.dmr_outputs(found) == dmr
    cohort = "results/cohort/ecoli_window/cohort.minimap2.cpg.bed.gz.tbi"
    assert found.cohort_samples("ecoli_window", "cpg") == names
    assert found.cohort_tables() == [cohort]
    assert jobs.cohort_inputs(found, "ecoli_window", "minimap2", "cpg") == {
        "beds": [bed.format(s, "") for s in names],
        "fai": "results/references/ecoli_window/ecoli_window.fa.fai",
    }
    per_sample = [p for s in names for p in modbam_sample_outputs(s, phased=True, tracks=True)]
    # the config's tracks: [m] of every sample and (pileup.phased) its haplotypes
    tracks = [f"results/{s}/tracks/{s}.minimap2.cpg.{part}.m.bw" for s in names for part in PARTS]
    session = "results/tracks/ecoli_window.igv_session.xml"
    qc = [p for s in names for p in calls_qc_files(s)]
    # the config's regions: (truth, tiles): per set its stats and entropy tables, its report
    regions = [
        f"results/regions/{name}/{name}.minimap2.cpg.{what}"
        for name in ("truth", "tiles")
        for what in ("stats.tsv", "entropy.tsv", "report.html", "report.png")
    ]
    expected = [*per_sample, *tracks, session, *qc, *dmr, cohort, *regions, MULTIQC]
    assert outputs.final_outputs(found) == expected
    assert len(expected) == 5 * 16 + 5 * 3 + 1 + 5 * 7 + 2 * 5 + 1 + 2 * 4 + 1
    assert outputs.multiqc_inputs(found)["custom"][-1] == "results/multiqc/numapore_dmr_mqc.tsv"
    assert jobs.dmr_counts_inputs(found, "case1_hp1_vs_hp2")["tbi"] == [
        bed.format("case1", f".{hp}") + ".tbi" for hp in ("hp1", "hp2")
    ]


def compare_cells(aligners, strategies, io_modes, threads, repeats, methylation_aligner):
    """Every cell's name: the alignment's per aligner (no I/O mode: 'na'), the methylation's
    (with the run's aligner's alignments) per I/O mode."""
    combos = itertools.product(strategies, threads, range(1, repeats + 1))
    cells = set()
    for strategy, t, r in combos:
        cells |= {f"alignment.{a}.{strategy}.na.t{t}.r{r}" for a in aligners}
        cells |= {f"methylation.{methylation_aligner}.{strategy}.{io}.t{t}.r{r}" for io in io_modes}
    return cells


def test_comparison_cells(clone):
    """The shipped compare: section: 2 aligners x 4 strategies x 2 thread counts x 2 repeats
    alignment cells (32) and 4 strategies x 3 I/O modes x 2 x 2 methylation cells (48);
    .test/config-compare.yaml's: 1 x 2 x 1 x 2 (4) and 2 x 3 x 1 x 2 (12). Each repeat's cells
    all run before the next repeat's."""
    strategies = ["none", "interleave", "localalloc", "instances"]
    io_modes = ["fast5", "fast5-pool", "slow5"]
    shipped = run_plan()
    assert shipped.compare_steps() == ["alignment", "methylation"]
    expected = compare_cells(["minimap2", "bwa"], strategies, io_modes, [1, 2], 2, "minimap2")
    assert len(shipped.compare_cells) == 80 and set(shipped.compare_cells) == expected
    found = run_plan(".test/config-compare.yaml")
    assert found.compare_sample().name == "demo"
    expected = compare_cells(["minimap2"], ["none", "instances"], io_modes, [2], 2, "minimap2")
    assert len(found.compare_cells) == 16 and set(found.compare_cells) == expected
    assert all(c.endswith(".r1") for c in found.compare_cells[:8])
    assert found.compare_cells != sorted(found.compare_cells)  # a shuffle (seed 7)
    assert jobs.compare_cell_files(found, "record") == [
        f"results/compare/cells/{c}.run.json" for c in found.compare_cells
    ]
    # compare.reads 12: the cells read the demo's first reads and their alignments.
    reads = "results/demo/reads/{}/demo.fastq"
    assert jobs.compare_cell_inputs(found, "fast5") == {
        "reads": "results/compare/input/demo.fastq",
        "genome": "results/references/ecoli_dh10b/ecoli_dh10b.fa",
        "index_minimap2": ["results/references/ecoli_dh10b/minimap2/ecoli_dh10b.map-ont.mmi"],
        "bam": "results/compare/input/demo.minimap2.bam",
        "bai": "results/compare/input/demo.minimap2.bam.bai",
        **{
            f"signal_{mode}": [reads.format(folder), reads.format(folder) + ".index.readdb"]
            for mode, folder in [("fast5", "fast5"), ("fast5-pool", "fast5"), ("slow5", "blow5")]
        },
        "blow5": "results/demo/signal/demo.blow5",
    }


# ----------------------------------------------------------------------------------------------
# The pileup's options per sample: the engine's own, every setting decided in the plan.


def test_pileup_options_per_sample(clone):
    """config pileup: as the engine's options for the job's motif: `filter_threshold: auto` of
    nanopolish's calls is the probability of an LLR of methylation.call_threshold (1 / (1 +
    e^-LLR)), a modBAM's is modkit's estimate at filter_percentile, a number stays that number;
    CpG under 0.6 semantics is the motif CG 0, combined strands."""
    reference = "results/references/ecoli_dh10b/ecoli_dh10b.fa"
    base = Options(compat="0.6", reference=reference, motifs=[("CG", 0)], combine_strands=True)
    signal = run_plan()
    called = jobs.pileup_options(signal, "demo", "cpg")
    assert float(called.filter_threshold[0]) == pytest.approx(1 / (1 + math.exp(-2.0)))
    assert called == replace(base, filter_threshold=called.filter_threshold)
    gpc = jobs.pileup_options(signal, "demo", "gpc")
    assert gpc.motifs == [("GC", 1)] and gpc.filter_threshold == called.filter_threshold
    assert signal.config["pileup"]["filter_threshold"] == "auto"  # the config is left as it was
    other = run_plan(methylation={"call_threshold": 1.5})
    [threshold] = jobs.pileup_options(other, "demo", "cpg").filter_threshold
    assert float(threshold) == pytest.approx(1 / (1 + math.exp(-1.5)))
    given = run_plan(pileup={"filter_threshold": 0.7})
    assert jobs.pileup_options(given, "demo", "cpg").filter_threshold == ["0.7"]
    modbam = run_plan(".test/config-modbam.yaml")
    assert jobs.pileup_options(modbam, "demo", "cpg") == replace(base, filter_percentile=0.1)
    old = run_plan(".test/config-modbam.yaml", pileup={"modkit": "0.4", "ignore": "h"})
    assert jobs.pileup_options(old, "demo", "cpg") == replace(
        base, compat="0.4", motifs=[], cpg=True, ignore="h"
    )
    phased = run_plan(".test/config-groups.yaml")
    window = "results/references/ecoli_window/ecoli_window.fa"
    assert jobs.pileup_options(phased, "case1", "cpg") == replace(base, reference=window)


# ----------------------------------------------------------------------------------------------
# The tunings: tune on / off, an I/O mode on the command line, hosts of one and two nodes.


def pileup_note(why: str) -> tuple[str, str]:
    return ("info", f"numapore: tuning: pileup: {why}")


def tuning_note(line: str) -> tuple[str, str]:
    return ("info", f"numapore: tuning: {line}")


def test_tuning_plans_on_one_node(clone):
    """tune on, a host of one node: the demo's I/O modes are measured (its FAST5 can be read
    in each), no strategy; the pileup's three settings on 2 cores, on the demo's modBAM of
    nanopolish's calls. tune off: no plan."""
    assert run_plan(host="one-node.yaml", host_check="jobs").tune is None
    found = run_plan(host="one-node.yaml", host_check="jobs", tune="on")
    files = {
        "record": f"results/tuning/{TUNING_NAME}.json",
        "host": f"results/tuning/{TUNING_NAME}.yaml",
    }
    assert found.tune["sample"] == "demo"
    assert found.tune["candidates"] == ["fast5", "fast5-pool", "slow5"]
    assert found.tune["strategy_steps"] == [] and found.tune["strategies_why"] == ONE_NODE
    assert found.tune["files"] == files and found.tune["again"] == 0
    assert tuning_plans.tuned_step(found) == "methylation"
    pileup = found.tune_pileup
    assert pileup["sample"] == "demo" and pileup["motif"] == "cpg" and pileup["jobs"] == 1
    assert pileup["bam"] == "results/demo/methylation/demo.minimap2.cpg.modbam.bam"
    assert pileup["candidates"] == [(1, 2), (1, 1), (2, 1)]  # regions x threads
    options = jobs.pileup_options(found, "demo", "cpg")
    assert pileup["key"]["settings"] == json.loads(json.dumps(asdict(options)))
    assert pileup["key"]["modbam"] == str(clone / pileup["bam"])
    assert pileup["files"]["record"] == f"results/tuning/{TUNING_NAME}.pileup.json"
    assert tuning_plans.untuned_pileup(found) == {"regions": 1, "threads": 2}
    assert tuning_plans.tuned_pileup_base(found) == files["host"]
    assert found.notes == [
        host_note(found),
        tuning_note(f"strategies: {ONE_NODE}"),
        tuning_note(
            f"nothing measured yet: no results/tuning/{TUNING_NAME}.json; the sample's files "
            "are made by the run: measuring"
        ),
        pileup_note(f"nothing measured yet: no results/tuning/{TUNING_NAME}.pileup.json"),
    ]
    # `--config tune=on` or an unquoted on in YAML: a boolean, read as on.
    assert run_plan(host="one-node.yaml", host_check="jobs", tune=True).config["tune"] == "on"


def test_io_mode_on_the_command_line_leaves_nothing_to_tune_on_one_node(clone):
    found = run_plan(host="one-node.yaml", host_check="jobs", tune="on", io_mode="slow5")
    assert found.io_mode == "slow5" and found.file_host.io_mode == "fast5"
    assert found.tune is None and found.tune_pileup is not None
    assert found.host_overrides("io_mode", "strategy.methylation") == {
        "overrides": {"io_mode": "slow5"}
    }
    assert found.host_overrides("strategy.alignment") == {}
    assert found.notes == [
        host_note(found),
        (
            "info",
            "numapore: the command line overrides the host file: I/O mode slow5 (the host "
            "file's: fast5)",
        ),
        tuning_note(f"nothing to tune: --config io_mode=slow5 is given; {ONE_NODE}"),
        pileup_note(f"nothing measured yet: no results/tuning/{TUNING_NAME}.pileup.json"),
    ]


def test_tuning_plans_on_two_nodes(clone):
    """The shipped two-socket host: both steps' strategies are tuned, the I/O modes too unless
    the command line gives one; with the calling's strategy given too, the tuning job is the
    alignment's."""
    two = {"host": "xeon-2socket", "host_check": "jobs", "tune": "on"}
    found = run_plan(**two)
    assert found.tune["strategy_steps"] == ["alignment", "methylation"]
    assert found.tune["candidates"] == ["fast5", "fast5-pool", "slow5"]
    assert found.notes[1:3] == [
        tuning_note("strategies: the alignment's and the methylation's measured on the first "
                    "reads of sample 'demo'"),
        tuning_note(f"nothing measured yet: no results/tuning/{TUNING_NAME}.json"),
    ]  # fmt: skip
    found = run_plan(**two, io_mode="fast5", strategy_methylation="none")
    assert found.tune["candidates"] == [] and found.tune["strategy_steps"] == ["alignment"]
    assert tuning_plans.tuned_step(found) == "alignment"
    assert found.notes[1:4] == [
        (
            "info",
            "numapore: the command line overrides the host file: I/O mode fast5 (the host "
            "file's: slow5), methylation strategy none (the host file's: interleave)",
        ),
        tuning_note("strategies: the alignment's measured on the first reads of sample 'demo'"),
        tuning_note("I/O mode: nothing to tune: --config io_mode=fast5 is given"),
    ]
    # Short reads: no raw signal, the alignment's strategies on the first sample; no pileup.
    short = run_plan(".test/config-short.yaml", **two)
    assert short.tune["sample"] == "pe" and short.tune["candidates"] == []
    assert short.tune_pileup is None
    assert short.notes[-1] == pileup_note("nothing to tune: no sample runs the pileup")


def test_pileup_tuning_with_nothing_to_tune(clone):
    one_core = run_plan(tune="on", cores=1)
    assert one_core.tune_pileup is None
    assert one_core.notes[-1] == pileup_note(
        "nothing to tune: on 1 core every setting runs as 1 region x 1 thread does"
    )
    given = run_plan(tune="on", threads_given=["pileup", "align"])
    assert given.tune_pileup is None
    assert given.notes[-1] == pileup_note(
        "nothing to tune: the pileup's threads are given (set-threads: pileup)"
    )
    modbam = run_plan(
        ".test/config-modbam.yaml", host="one-node.yaml", host_check="jobs", tune="on"
    )
    assert modbam.tune is None  # no raw signal, one node
    assert modbam.tune_pileup["bam"] == "results/demo/align/demo.minimap2.bam"
    assert modbam.notes[1] == tuning_note(f"nothing to tune: no sample has raw signal; {ONE_NODE}")


# ----------------------------------------------------------------------------------------------
# Wildcard patterns and the results' paths the other tests name literally.


def test_wildcard_patterns(clone):
    found = run_plan(".test/config-groups.yaml")
    patterns = found.wildcard_patterns()
    assert patterns["aligner"] == "minimap2|bwa|bowtie2|snap"
    assert patterns["motif"] == "cpg|gpc|dam|dcm|any"
    assert patterns["preset"] == r"map\-hifi|map\-ont|sr"  # the kinds' minimap2 presets
    for name, matching, not_matching in [
        ("sample", ["case1", "control-2", "Demo_1"], ["_x", "a.b", "case 1"]),
        ("shard", ["1-of-1", "12-of-40"], ["1of2", "x-of-2"]),
        ("fmt", ["fasta", "fastq.gz"], ["fa", "bam"]),
        ("cell", ["alignment.minimap2.none.na.t1.r1"], ["Alignment"]),
    ]:
        assert all(re.fullmatch(patterns[name], m) for m in matching), name
        assert not any(re.fullmatch(patterns[name], m) for m in not_matching), name
    modbams = "case1|case2|control1|control2|demo"
    assert found.samples_running("pileup") == modbams == found.simulated_of_kind("modbam")
    assert found.samples_running("call_methylation") == "(?!)"  # matches nothing
    assert re.fullmatch("(?!)", "demo") is None and re.fullmatch("(?!)", "") is None
    assert found.samples_with_phased_vcf() == "(?!)"
    signal = run_plan()
    assert signal.samples_running("raw_signal") == "demo"
    assert signal.samples_with_signal_format("fast5") == "demo"
    assert signal.samples_with_signal_format("blow5") == "(?!)"
    assert signal.contrast_pattern() == "(?!)"
    assert signal.shard_ids("alignment") == ["1-of-1"]
    assert signal.shard_ids("pileup", 3) == ["1-of-3", "2-of-3", "3-of-3"]


def test_layout_paths_are_those_the_tests_name():
    """The paths of the layout against the literal ones of the other tests (a renamed output
    shows here first); called without values, Snakemake's wildcards stay in place."""
    assert layout.bam("ecoli", "minimap2") == "results/ecoli/align/ecoli.minimap2.bam"
    assert layout.bam("pe", "snap", ".summary.tsv") == "results/pe/align/pe.snap.summary.tsv"
    assert layout.methylation("ecoli", "minimap2", "cpg", ".calls.tsv") == (
        "results/ecoli/methylation/ecoli.minimap2.cpg.calls.tsv"
    )
    assert layout.accounting("x", "minimap2") == "results/x/x.minimap2.accounting.tsv"
    assert layout.staged_counts("x") == "results/x/x.staged.tsv"
    assert layout.blow5("ecoli", ".idx") == "results/ecoli/signal/ecoli.blow5.idx"
    assert layout.staged_reads("small", "fast5", "fasta") == "results/small/reads/fast5/small.fasta"
    assert layout.reference_fasta("region") == "results/references/region/region.fa"
    assert layout.report_file("ssm1", "minimap2", "methylation.png") == (
        "results/ssm1/report/ssm1.minimap2.methylation.png"
    )
    assert layout.simulated("case1", "regions.bed") == "results/simulated/case1/regions.bed"
    assert layout.dmr("case_vs_control", ".score.tsv") == (
        "results/dmr/case_vs_control/case_vs_control.score.tsv"
    )
    assert layout.cohort_table("hap1", "minimap2", "cpg", ".tbi") == (
        "results/cohort/hap1/cohort.minimap2.cpg.bed.gz.tbi"
    )
    assert layout.MULTIQC_REPORT == "results/multiqc/numapore_multiqc.html"
    assert layout.multiqc_custom("dmr") == "results/multiqc/numapore_dmr_mqc.tsv"
    assert layout.COMPARISON_REPORT == "results/compare/report.md"
    assert layout.compare_file("recommended-host.yaml") == "results/compare/recommended-host.yaml"
    assert layout.log("pileup", "clean.minimap2.cpg.log") == (
        "results/logs/pileup/clean.minimap2.cpg.log"
    )
    assert layout.bam() == "results/{sample}/align/{sample}.{aligner}.bam"
    assert layout.methylation(suffix=".bedmethyl.gz") == (
        "results/{sample}/methylation/{sample}.{aligner}.{motif}.bedmethyl.gz"
    )
    assert layout.methylation_shard(motif=None, suffix=".bam") == (
        "results/{sample}/methylation/shards/{sample}.{aligner}.{shard}.bam"
    )


# ----------------------------------------------------------------------------------------------
# The common mistakes: one line each, as the workflow prints it (`numapore: <line>`); the same
# lines the dry runs of test_first_hour.py, test_dmr.py and test_phased.py assert.

NOT_AN_ALIGNER = "is not one of ['minimap2', 'bwa', 'bowtie2', 'snap']"
MISTAKES = {
    "unknown-key": (
        {"mine.yaml": "alignr: bwa\n"},
        {},
        "numapore: mine.yaml, line 1: unknown config key 'alignr'; did you mean `aligner`?",
    ),
    "unknown-key-on-the-command-line": (
        {},
        {"scatter": {"alignmnt": 2}},
        "numapore: --config scatter=...: unknown config key 'scatter.alignmnt'; did you mean "
        "`alignment`?",
    ),
    "aligner-minimap": (
        {"mine.yaml": "aligner: minimap\n"},
        {},
        f"numapore: mine.yaml, line 1: aligner: 'minimap' {NOT_AN_ALIGNER}; did you mean "
        "`minimap2`?",
    ),
    "aligner-on-the-command-line": (
        {},
        {"aligner": "bwa2"},
        f"numapore: --config aligner=bwa2: 'bwa2' {NOT_AN_ALIGNER}; did you mean `bwa`?",
    ),
    "dmr-group-no-sample-has": (
        {
            ".test/config-groups.yaml": None,
            "mine.yaml": "dmr:\n  contrasts: [{groups: [case, controls]}]\n",
        },
        {},
        "numapore: config dmr.contrasts[0] (case_vs_controls): no sample has group 'controls' "
        "(the sheet's group column, or simulate.<name>.group); did you mean `control`?",
    ),
    "dmr-code-in-modkit-vocabulary": (
        {".test/config-groups.yaml": None, "mine.yaml": "dmr:\n  code: 5mC\n"},
        {},
        "numapore: config dmr.code: contrast 'case_vs_control': no call of code '5mC' in group "
        "'case' (case1, case2 carry m: the MM tags' codes, which bedMethyl's column 4 names); 5mC "
        "is code 'm': DSS would test no site",
    ),
    "tuning-sample-not-a-sample": (
        {},
        {"tune": "on", "tuning": {"sample": "nope"}},
        "numapore: config tuning.sample: 'nope' is not a raw-signal sample (those: demo)",
    ),
    "tuning-sample-not-a-sample-of-the-sheet": (
        {".test/config-short.yaml": None},
        {"tune": "on", "host": "xeon-2socket", "host_check": "jobs", "tuning": {"sample": "x"}},
        "numapore: config tuning.sample: 'x' is not a sample of the sheet (those: pe, se)",
    ),
    # The schema's enum refuses it first (numapore.pileup.settings.check_settings would say it too).
    "pileup-modkit-0.5": (
        {"mine.yaml": 'pileup:\n  modkit: "0.5"\n'},
        {},
        "numapore: mine.yaml, line 2: pileup.modkit: '0.5' is not one of ['0.6', '0.4']; did "
        "you mean `0.6`?",
    ),
    "pileup-modkit-0.5-on-the-command-line": (
        {},
        {"pileup": {"modkit": "0.5"}},
        "numapore: --config pileup=...: pileup.modkit: '0.5' is not one of ['0.6', '0.4']; did "
        "you mean `0.6`?",
    ),
    "phased-under-0.4": (
        {"mine.yaml": 'pileup:\n  modkit: "0.4"\n  phased: true\n'},
        {},
        "numapore: pileup.phased: true is modkit 0.6.1's pileup --phased; set "
        "pileup.modkit: \"0.6\" (it is '0.4')",
    ),
    "0.4-setting-under-0.6": (
        {},
        {"pileup": {"ignore": "h"}},
        "numapore: pileup.ignore: 'h' is modkit 0.4's --ignore; set pileup.modkit: \"0.4\" or "
        "leave it empty",
    ),
}


@pytest.mark.parametrize("files, given, message", MISTAKES.values(), ids=MISTAKES.keys())
def test_mistake_is_one_line(clone, files, given, message):
    for name, text in files.items():
        if text is not None:
            Path(name).write_text(text)
    with pytest.raises(InputError) as err:
        run_plan(*files, **given)
    assert f"numapore: {err.value}" == message


# ----------------------------------------------------------------------------------------------
# A host file per partition (config hosts:): a heterogeneous cluster's node types.

# Partition a's nodes: this machine's layout (topology: auto always matches); b's: the shipped
# two-socket layout, which this machine is not.
PARTITIONS = {"hosts": {"a": "auto-node.yaml", "b": "xeon-2socket"}, "host_check": "jobs"}


def job_plan(main_process: bool, **given) -> RunPlan:
    """run_plan, in the run's own process or in a job's (which parses the workflow again on
    its node)."""
    config = build.load_config([Path("config/config.yaml")], given)
    return build.build(config, schemas=SCHEMAS, given=given, main_process=main_process)


@pytest.fixture
def partitions(clone, monkeypatch):
    """The clone with partition a's host file; no partition in the environment."""
    Path("auto-node.yaml").write_text(yaml.safe_dump({"topology": "auto", "io_mode": "slow5"}))
    for name in (cluster.PARTITION_ENV, cluster.JOB_PARTITION_ENV, cluster.NODE_HOST_ENV):
        monkeypatch.setenv(name, "")  # recorded, so that teardown restores it
        monkeypatch.delenv(name)
    return clone


def test_each_job_runs_with_its_partitions_host_file(partitions, monkeypatch):
    """The run's host file is its partition's (NUMAPORE_SLURM_PARTITION), the run's first
    lines say which file each partition's jobs run with; a job's plan (its process on its
    node) keeps the run's host file (the same DAG, I/O mode slow5) and hands its node's, checked
    there, to its steps."""
    monkeypatch.setenv(cluster.PARTITION_ENV, "a")
    run = job_plan(True, **PARTITIONS)
    a_file = str(Path("auto-node.yaml").absolute())
    assert run.host_file == a_file and run.io_mode == "slow5"
    assert cluster.NODE_HOST_ENV not in run.environment
    assert run.notes[1] == (
        "info",
        "numapore: config hosts: each job runs its steps with its partition's host file (a: "
        "auto-node.yaml, b: xeon-2socket), checked on its node; the run's I/O mode and pileup "
        "setting are hosts.a's",
    )
    monkeypatch.setenv(cluster.JOB_PARTITION_ENV, "a")
    job = job_plan(False, **PARTITIONS)
    assert job.host_file == a_file and job.environment[cluster.NODE_HOST_ENV] == a_file
    # no run partition (the cluster's default): the run's host file is config host's
    monkeypatch.delenv(cluster.PARTITION_ENV)
    run = job_plan(True, **PARTITIONS, host="one-node.yaml")
    assert run.host_file == str(Path("one-node.yaml").absolute()) and run.io_mode == "fast5"
    assert run.notes[1][1].endswith("the run's I/O mode and pileup setting are host's")
    job = job_plan(False, **PARTITIONS, host="one-node.yaml")
    assert job.host_file == run.host_file and job.environment[cluster.NODE_HOST_ENV] == a_file
    # without hosts: nothing changes
    assert cluster.NODE_HOST_ENV not in job_plan(False, host="auto-node.yaml").environment


PARTITION_MISTAKES = {
    "run-partition-unknown": (
        True,
        {"NUMAPORE_SLURM_PARTITION": "gpu"},
        PARTITIONS,
        "numapore: config hosts: no host file for partition 'gpu' (NUMAPORE_SLURM_PARTITION, "
        "the partition of every job); the partitions given: a, b",
    ),
    "job-partition-unknown": (
        False,
        {"SLURM_JOB_PARTITION": "gpu"},
        PARTITIONS,
        "numapore: config hosts: this job runs on partition 'gpu' (SLURM_JOB_PARTITION), which "
        "has no host file there; the partitions given: a, b",
    ),
    "host-file-missing": (
        True,
        {},
        {**PARTITIONS, "hosts": {"a": "auto-node.yaml", "b": "xeon-2sockt"}},
        "numapore: config hosts.b: host 'xeon-2sockt': {cwd}/config/hosts/xeon-2sockt.yaml, "
        "{shipped}/xeon-2sockt.yaml not found (known hosts: opteron-6376, shared-node, "
        "single-node, xeon-2socket)",
    ),
    "host-file-invalid": (
        True,
        {},
        {**PARTITIONS, "hosts": {"a": "bad.yaml"}},
        "numapore: config hosts.a: {cwd}/bad.yaml: invalid host file: io_mode: 'slow' is not "
        "one of ['fast5', 'fast5-pool', 'slow5']",
    ),
    "auto-names-no-partition": (
        True,
        {},
        {**PARTITIONS, "hosts": {"a": "auto"}},
        "numapore: config hosts.a: auto is the submitting host's own file; name the host file "
        "of the partition's nodes (a name in config/hosts/ or a path)",
    ),
    "without-host-check-jobs": (
        True,
        {},
        {"hosts": PARTITIONS["hosts"]},
        "numapore: config hosts: a host file per partition is for cluster runs, whose jobs "
        "check their partition's on their node: set host_check: jobs (profiles/slurm does)",
    ),
    "not-a-host-file-name": (
        True,
        {},
        {**PARTITIONS, "hosts": {"a": 3}},
        "numapore: --config hosts=...: hosts.a: 3 is not of type 'string'",
    ),
    "not-a-mapping": (
        True,
        {},
        {**PARTITIONS, "hosts": ["xeon-2socket"]},
        "numapore: --config hosts=['xeon-2socket']: ['xeon-2socket'] is not of type 'object'",
    ),
}


@pytest.mark.parametrize(
    "main_process, env, given, message", PARTITION_MISTAKES.values(), ids=PARTITION_MISTAKES
)
def test_partition_mistake_is_one_line(partitions, monkeypatch, main_process, env, given, message):
    Path("bad.yaml").write_text("topology: auto\nio_mode: slow\n")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(InputError) as err:
        job_plan(main_process, **given)
    shipped = host_path("single-node").parent
    assert f"numapore: {err.value}" == message.format(cwd=Path.cwd(), shipped=shipped)


def test_a_host_file_not_of_the_node_the_job_runs_on(partitions, monkeypatch):
    """host_check: jobs with hosts: a job on partition b checks b's host file (two sockets, 64
    CPUs) on its node, this machine: one line naming the setting, then the check's reasons."""
    monkeypatch.setenv(cluster.JOB_PARTITION_ENV, "b")
    with pytest.raises(InputError) as err:
        job_plan(False, **PARTITIONS)
    text = f"numapore: {err.value}"
    assert text.startswith(f"numapore: config hosts.b: {host_path('xeon-2socket')} does not ")
    assert "does not match this machine (" in text and text.count("numapore:") == 1
    # the same file in the run's own process: read, not checked (the submitting host)
    monkeypatch.setenv(cluster.PARTITION_ENV, "b")
    assert job_plan(True, **PARTITIONS).host_file == str(host_path("xeon-2socket"))


def test_tuning_records_kept_per_node_type(partitions, monkeypatch, tmp_path):
    """A job's tuned strategy (tune_strategy.node_tuning): the run's on the partition its
    tuning measured, or in a run without hosts:; on another partition, that partition's own
    record when a run measured one, else none (its host file's strategy)."""
    from numapore.compare import tune_strategy

    folder = tmp_path / "tuning"
    folder.mkdir()
    run_record = str(folder / "partition-a.json")
    monkeypatch.setenv(tuning.NAME_ENV, "partition-a")
    monkeypatch.setenv(cluster.JOB_PARTITION_ENV, "b")
    # no hosts: (no node host file in the environment): the run's tuning, wherever the job is
    assert tune_strategy.node_tuning("instances", run_record, "alignment", folder) == (
        "instances",
        run_record,
    )
    monkeypatch.setenv(cluster.NODE_HOST_ENV, "b.yaml")
    assert tune_strategy.node_tuning("instances", run_record, "alignment", folder) == (None, None)
    own = folder / "partition-b.json"
    own.write_text(json.dumps({"strategy": {"strategy": "interleave"}}))
    assert tune_strategy.node_tuning("instances", run_record, "alignment", folder) == (
        "interleave",
        str(own),
    )
    assert tune_strategy.node_tuning("none", run_record, "methylation", folder) == ("", str(own))
    assert tune_strategy.node_tuning(None, None, "alignment", folder) == (None, None)  # untuned
    monkeypatch.setenv(cluster.JOB_PARTITION_ENV, "a")  # the tuned partition
    assert tune_strategy.node_tuning("instances", run_record, "alignment", folder) == (
        "instances",
        run_record,
    )
