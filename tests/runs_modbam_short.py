"""The shared runs of the modBAM and short-read routes (tests/test_modbam_kind.py,
tests/test_short_reads.py): each made once per pytest invocation (tests/shared_runs.py), each
asking for the outputs its tests read (the report and MultiQC only where they are checked).
A new check of these routes adds its assertions to one of these runs, or its targets to one's
list, before it starts a run of its own.

- modbam_test_run: .test/config-modbam.yaml as a user runs it (the simulated demo modBAM), with
  modkit's unaligned test modBAM beside it as sample 'unmapped', aligned with bwa and bowtie2,
  and a real PacBio HiFi read as sample 'hifi' (kind hifi, minimap2), and again with the tags
  older PacBio software wrote (Mm/Ml, no mode character) as sample 'hifi_old'.
- modbam_baseline_run: modkit's test modBAMs and variants made from them (modbam_variants),
  minimap2, strategy none; their accounting, report figures and MultiQC's custom content; and
  the strategy comparison of one of them (its staged file of its own).
- short_runs: .test/config-short.yaml as a user runs it (bwa, its MultiQC), with bowtie2's,
  minimap2's and SNAP's alignments asked for in the same run.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pysam
import pytest
import yaml

from conftest import run_workflow
from project import REPO, write_project
from shared_runs import keep_output, kept_output, shared_run

MODKIT_INPUTS = REPO.parent / "shared" / "data" / "modkit_pileup" / "inputs"
LADDER = MODKIT_INPUTS / "CGI_ladder_3.6kb_ref.fa"
# The modBAMs of modkit's suite whose reference is there (the CGI ladder oligos): name -> file.
MODKIT_SUITE = {
    "unmapped": MODKIT_INPUTS / "bc_anchored_10_reads.unmapped.bam",
    "sorted": MODKIT_INPUTS / "bc_anchored_10_reads.sorted.bam",
    "duplicated": MODKIT_INPUTS / "duplicated.marked.fixed.bam",
    "dorado032": MODKIT_INPUTS
    / (
        "CG_5mC_20230207_1700_6A_PAG66026_3c0abf27_oligo_741_adapters_modcalls_0th_sort_10_reads"
        ".bam"
    ),
}
SHORT_ALIGNERS = ("bwa", "bowtie2", "minimap2")
# One real PacBio Revio HiFi read with its 5mC calls, and its reference (tests/data/pacbio_hifi)
HIFI_DATA = REPO / "tests" / "data" / "pacbio_hifi"
HIFI_BAM = HIFI_DATA / "m84011_220902_175841_s1.zmw58919191.fwd.hifi_reads.bam"
HIFI_REFERENCE = HIFI_DATA / "REF_58919191.fasta.gz"
HIFI_OUTPUTS = [
    "results/hifi/align/hifi.minimap2.bam",
    "results/hifi/methylation/hifi.minimap2.cpg.bedmethyl.gz",
    "results/hifi/hifi.minimap2.accounting.tsv",
]
HIFI_OLD_OUTPUTS = [x.replace("hifi", "hifi_old") for x in HIFI_OUTPUTS]
# bwa's -K in the short-read runs (config short_reads.bwa_batch_bases): two batches of the
# pairs' 2.2 M bases, so a split run cuts them (the default 10 M would need five times the pairs).
SHORT_TEST_BATCH = 1_500_000


def old_style_tags(source: Path, out: Path) -> Path:
    """source's records with the tags PacBio's primrose and older SMRT Link wrote: Mm/Ml, and
    no mode character (`C+m,...`: implicit, as the SAM specification reads it)."""
    with (
        pysam.AlignmentFile(str(source), check_sq=False) as src,
        pysam.AlignmentFile(str(out), "wb", template=src) as dst,
    ):
        for rec in src:
            mm, ml = rec.get_tag("MM"), rec.get_tag("ML")
            rec.set_tag("MM", None)
            rec.set_tag("ML", None)
            # '.' and '?' occur in MM as mode characters only
            rec.set_tag("Mm", mm.replace("?", "").replace(".", ""), "Z")
            rec.set_tag("Ml", ml)
            dst.write(rec)
    return out


def as_the_clone(work: Path) -> Path:
    """A folder laid out as the clone's root for `--configfile .test/...`: the shipped
    config/config.yaml, .test/ and resources/ linked (the paths the configs name)."""
    (work / "config").mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "config" / "config.yaml", work / "config" / "config.yaml")
    for name in (".test", "resources"):
        (work / name).symlink_to(REPO / name)
    return work


def modbam_sheet(work: Path, files: dict[str, Path], name: str = "samples.tsv") -> Path:
    """config/<name>: each modBAM a sample against the ladder."""
    lines = ["sample\treads\treference"] + [f"{n}\t{f}\t{LADDER}" for n, f in files.items()]
    sheet = work / "config" / name
    sheet.write_text("\n".join(lines) + "\n")
    return sheet


def modbam_outputs(sample: str, aligner: str) -> list[str]:
    """A modBAM sample's alignment and pileup (its log names the pileup command)."""
    name = f"results/{sample}/methylation/{sample}.{aligner}.cpg"
    return [f"results/{sample}/align/{sample}.{aligner}.bam.bai", f"{name}.bedmethyl.gz.tbi"]


# ---------- modBAM ----------


@pytest.fixture(scope="session")
def modbam_test_run(tmp_path_factory) -> Path:
    """.test/config-modbam.yaml (the demo as a simulated modBAM, minimap2) with modkit's
    unaligned modBAM beside it as sample 'unmapped', which bwa and then bowtie2 align in the
    same folder, and the HiFi read as sample 'hifi' (minimap2's map-hifi), and with old-style
    tags as sample 'hifi_old'."""

    def make(work: Path) -> None:
        as_the_clone(work)
        old_tags = old_style_tags(HIFI_BAM, work / "hifi_old_tags.bam")
        (work / "config" / "samples.tsv").write_text(
            "sample\tkind\treads\treference\n"
            f"unmapped\t\t{MODKIT_SUITE['unmapped']}\t{LADDER}\n"
            f"hifi\thifi\t{HIFI_BAM}\t{HIFI_REFERENCE}\n"
            f"hifi_old\thifi\t{old_tags}\t{HIFI_REFERENCE}\n"
        )
        demo = [
            *modbam_outputs("demo", "minimap2"),
            "results/demo/methylation/demo.minimap2.cpg.accuracy.tsv",
            "results/demo/demo.minimap2.accounting.tsv",
            *HIFI_OUTPUTS,
            *HIFI_OLD_OUTPUTS,
            # the QC of the calls (its rule writes every table; test_modbam_kind checks them)
            *[f"results/{s}/qc/{s}.minimap2.cpg.pass.tsv" for s in ("demo", "hifi")],
        ]
        # Targets first: --configfile and --config take every word after them. A modBAM
        # sample's staging is a pipe into one align job: one aligner of unmapped per run.
        for targets in ([*demo, *modbam_outputs("unmapped", "bwa")],
                        modbam_outputs("unmapped", "bowtie2")):  # fmt: skip
            run_workflow(
                work, *targets, "--configfile", ".test/config-modbam.yaml",
                "--config", "samples=config/samples.tsv",
            )  # fmt: skip

    return shared_run(tmp_path_factory, "modbam_test_config", make)


def partial_tags_bam(out: Path) -> Path:
    """The unaligned modBAM with an MN tag on each read: no MM/ML on the first 4 reads, an MN of
    5 more than the length on the next 2, the length on the others."""
    with (
        pysam.AlignmentFile(str(MODKIT_SUITE["unmapped"]), check_sq=False) as src,
        pysam.AlignmentFile(str(out), "wb", template=src) as dst,
    ):
        for index, rec in enumerate(src):
            if index < 4:
                rec.set_tag("MM", None)
                rec.set_tag("ML", None)
            rec.set_tag("MN", rec.query_length + (5 if index in (4, 5) else 0), "i")
            dst.write(rec)
    return out


def other_reference_bam(out: Path) -> Path:
    """The aligned modBAM as if aligned to another reference (its sequences renamed 'old_*'),
    with a secondary and a supplementary copy of its first record."""
    with pysam.AlignmentFile(str(MODKIT_SUITE["sorted"])) as src:
        header = src.header.to_dict()
        for sq in header["SQ"]:
            sq["SN"] = f"old_{sq['SN']}"
        with pysam.AlignmentFile(str(out), "wb", header=header) as dst:
            for index, rec in enumerate(src):
                dst.write(pysam.AlignedSegment.fromstring(rec.to_string(), dst.header))
                for flag in (0x100, 0x800) if index == 0 else ():
                    copy = pysam.AlignedSegment.fromstring(rec.to_string(), dst.header)
                    copy.flag |= flag
                    dst.write(copy)
    return out


def cram_of(bam: Path, reference: Path, out: Path) -> Path:
    """bam as a CRAM written against reference (samtools view -C)."""
    subprocess.run(["samtools", "view", "-C", "-T", str(reference), "-o", str(out), str(bam)],
                   check=True)  # fmt: skip
    return out


MODBAM_VARIANTS = ("partial", "cram", "other")


@pytest.fixture(scope="session")
def modbam_variants(tmp_path_factory) -> dict[str, Path]:
    """Inputs made from modkit's: tags on some reads only and MN tags not all fitting, a CRAM
    (against the ladder) of the aligned modBAM, and that modBAM as if aligned to another
    reference."""

    def make(folder: Path) -> None:
        partial_tags_bam(folder / "partial.bam")
        cram_of(MODKIT_SUITE["sorted"], LADDER, folder / "sorted.cram")
        other_reference_bam(folder / "other_reference.bam")

    folder = shared_run(tmp_path_factory, "modbam_variants", make)
    files = ("partial.bam", "sorted.cram", "other_reference.bam")
    return {name: folder / file for name, file in zip(MODBAM_VARIANTS, files, strict=True)}


# The strategy comparison of the baseline run: one cell kind, on sample unmapped's 5 reads.
BASELINE_COMPARE = {
    "sample": "unmapped", "steps": ["alignment"], "reads": 5, "aligners": ["minimap2"],
    "threads": [1], "strategies": ["none"], "repeats": 1,
}  # fmt: skip


@pytest.fixture(scope="session")
def modbam_baseline_run(
    tmp_path_factory, modbam_variants
) -> tuple[Path, subprocess.CompletedProcess]:
    """modkit's modBAMs and the variants through the workflow (minimap2, strategy none): their
    alignments, bedMethyl and accounting, the report's accounting figures of partial and other,
    MultiQC's read fates (its custom content), and the strategy comparison of unmapped; the
    folder and the run's output."""
    files = MODKIT_SUITE | modbam_variants

    def make(work: Path) -> None:
        write_project(work, [], {"compare": BASELINE_COMPARE})
        modbam_sheet(work, files)
        # MultiQC's custom content (the read fates it shows), not MultiQC itself: its report
        # is checked on report_run and short_runs.
        targets = ["compare", "results/multiqc/numapore_accounting_mqc.tsv"]
        for name in files:
            targets += [
                *modbam_outputs(name, "minimap2"),
                f"results/{name}/{name}.staged.tsv",
                f"results/{name}/{name}.minimap2.accounting.tsv",
            ]
        for name in ("partial", "other"):
            targets.append(f"results/{name}/report/{name}.minimap2.accounting.png")
        keep_output(work, run_workflow(work, *targets))

    work = shared_run(tmp_path_factory, "modbam_baseline", make)
    return work, kept_output(work)


@pytest.fixture(scope="session")
def modbam_baseline(modbam_baseline_run) -> Path:
    """The folder of the modBAM baseline run."""
    return modbam_baseline_run[0]


# ---------- short reads ----------


def short_outputs(sample: str, aligner: str) -> list[str]:
    """A short sample's alignment, its QC and accounting."""
    name = f"results/{sample}/align/{sample}.{aligner}"
    return [f"{name}.bam.bai", f"{name}.stats.txt", f"{name}.summary.tsv", f"{name}.flagstat.json"]


@pytest.fixture(scope="session")
def short_runs(tmp_path_factory) -> Path:
    """.test/config-short.yaml's samples (pe, se) in one run with every aligner: the config's
    (bwa) with the report's QC figures and MultiQC, as a user runs it; bowtie2's and minimap2's
    alignments asked for by their paths (one Snakemake start, the staging and the reference made
    once; MultiQC and the figures read samtools' reports, the same for every aligner); SNAP on
    the pairs (its index built by the workflow's rule; the single-end reads are longer than SNAP
    takes). bwa's batches are SHORT_TEST_BATCH bases (short_reads.bwa_batch_bases)."""

    def make(work: Path) -> None:
        as_the_clone(work)
        batch = {"short_reads": {"bwa_batch_bases": SHORT_TEST_BATCH}}
        (work / "config" / "test-batch.yaml").write_text(yaml.safe_dump(batch))
        targets = [out for a in SHORT_ALIGNERS for s in ("pe", "se") for out in short_outputs(s, a)]
        targets += [f"results/{s}/report/{s}.bwa.alignment_qc.png" for s in ("pe", "se")]
        run_workflow(
            work, *targets, "results/pe/align/pe.snap.summary.tsv",
            "results/multiqc/numapore_multiqc.html",
            "--configfile", ".test/config-short.yaml", str(work / "config/test-batch.yaml"),
        )  # fmt: skip

    return shared_run(tmp_path_factory, "short_runs", make)
