"""What the inputs themselves say, checked by the plan before any job (numapore.workflow.
input_checks, numapore.inputs.bam_header): the platform of a BAM's header against the sheet's
kind, the DMR code against the codes the samples carry, a phased VCF without a phased genotype,
a haplotype contrast of reads without haplotags, a truncated BAM; and the staging's failures
said once, by the job that finds them, with nothing kept by the align job reading from it.
Pure: plans built in-process (test_plan.run_plan), small files written with pysam."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path

import pysam
import pytest
from conftest import host_file
from runs_modbam_short import HIFI_BAM, HIFI_REFERENCE, LADDER, MODKIT_SUITE
from test_plan import clone, run_plan  # noqa: F401 (clone: the fixture the tests use)

from numapore.base.errors import InputError
from numapore.execution.hosts import load_host_config
from numapore.execution.steps import run_alignment
from numapore.inputs.bam_header import mm_codes, platform_of
from numapore.inputs.modbam_reads import check_streamed_staging, stage_modbam_reads

ONT_BAM = MODKIT_SUITE["sorted"]  # @RG PL:ONT, DS basecall_model=...; C+h? and C+m? calls
UNTAGGED_BAM = MODKIT_SUITE["unmapped"]  # no @RG, no HP tag on its 10 reads
NO_DEMO = {"simulate": "none"}


def sheet(rows: list[str], columns: str = "sample\treads\treference\tkind") -> str:
    """config/mine.tsv with these rows; its path, as the config names it."""
    Path("config/mine.tsv").write_text("\n".join([columns, *rows]) + "\n")
    return "config/mine.tsv"


def plan_error(**given) -> str:
    """The one line the plan stops with."""
    with pytest.raises(InputError) as err:
        run_plan(**given)
    return f"numapore: {err.value}"


# ----------------------------------------------------------------------------------------------
# The platform from the header


def test_platform_of_a_header():
    """A read group's platform, the basecaller's @PG, an ONT read group's basecall_model; a
    header that says both, or neither, says nothing."""
    assert platform_of({"RG": [{"ID": "a", "PL": "PACBIO"}]}) == ("PacBio", "@RG PL:PACBIO")
    assert platform_of({"PG": [{"ID": "ccs-6.4.0"}]}) == ("PacBio", "@PG ID:ccs")
    assert platform_of({"PG": [{"ID": "x", "PN": "primrose"}]}) == ("PacBio", "@PG PN:primrose")
    assert platform_of({"RG": [{"ID": "r", "DS": "basecall_model=dna_r10.4.1_e8.2"}]}) == (
        "Oxford Nanopore",
        "@RG DS:basecall_model=...",
    )
    assert platform_of({"PG": [{"ID": "basecaller", "PN": "dorado"}]})[0] == "Oxford Nanopore"
    both = {"RG": [{"ID": "a", "PL": "ONT"}], "PG": [{"ID": "ccs", "PN": "ccs"}]}
    assert platform_of(both) == ("", "") == platform_of({"PG": [{"ID": "samtools"}]})


@pytest.mark.usefixtures("clone")
def test_pacbio_bam_without_kind_is_hifi():
    """A BAM whose header says PacBio, in a sheet row without kind, is a hifi sample (map-hifi);
    a nanopore one stays modbam."""
    rows = [f"pb\t{HIFI_BAM}\t{HIFI_REFERENCE}\t", f"ont\t{ONT_BAM}\t{LADDER}\t"]
    found = run_plan(samples=sheet(rows), **NO_DEMO)
    assert {n: s.kind for n, s in found.samples.items()} == {"pb": "hifi", "ont": "modbam"}
    assert found.minimap2_preset(found.samples["pb"]) == "map-hifi"


@pytest.mark.usefixtures("clone")
def test_kind_against_the_header(tmp_path):
    """PacBio reads given as modbam (the nanopore preset) and nanopore reads given as hifi (a
    CRAM's header too) stop with one line naming both; PacBio reads as modbam with a PacBio
    preset (modbam.minimap2_preset, the user's choice) run with a warning."""
    pb = sheet([f"pb\t{HIFI_BAM}\t{HIFI_REFERENCE}\tmodbam"])
    assert plan_error(samples=pb, **NO_DEMO) == (
        f"numapore: sample sheet {pb}, sample 'pb': kind modbam, but its reads file "
        f"{HIFI_BAM} has a PacBio header (@RG PL:PACBIO): it would be aligned with "
        "the nanopore preset map-ont (modbam.minimap2_preset); give kind hifi (or no kind)"
    )
    found = run_plan(samples=pb, modbam={"minimap2_preset": "map-hifi"}, **NO_DEMO)
    assert found.notes[-1] == (
        "warning",
        f"numapore: sample sheet {pb}, sample 'pb': kind modbam, but its reads file {HIFI_BAM} "
        "has a PacBio header (@RG PL:PACBIO): aligned with modbam.minimap2_preset map-hifi, as "
        "set (kind hifi is PacBio HiFi's)",
    )
    cram = tmp_path / "ont.cram"
    pysam.view("-C", "-T", str(LADDER), "-o", str(cram), str(ONT_BAM), catch_stdout=False)
    for reads in (ONT_BAM, cram):
        ont = sheet([f"ont\t{reads}\t{LADDER}\thifi"])
        assert plan_error(samples=ont, **NO_DEMO) == (
            f"numapore: sample sheet {ont}, sample 'ont': kind hifi, but its reads file {reads} "
            "has an Oxford Nanopore header (@RG PL:ONT): minimap2's map-hifi preset is for PacBio "
            "HiFi reads; give kind modbam (or no kind)"
        )


@pytest.mark.usefixtures("clone")
def test_truncated_bam_stops_before_any_job(tmp_path):
    """A BAM cut short (no end-of-file block) is named truncated by the sheet's check."""
    data = HIFI_BAM.read_bytes()
    cut = tmp_path / "cut.bam"
    cut.write_bytes(data[: len(data) // 2])
    rows = sheet([f"cut\t{cut}\t{HIFI_REFERENCE}\thifi"])
    assert plan_error(samples=rows, **NO_DEMO) == (
        f"numapore: sample sheet {rows}, line 2, sample 'cut': reads file {cut} is truncated (it "
        "lacks the end-of-file block a complete BAM/CRAM ends with): copy or download it again "
        "in full"
    )


# ----------------------------------------------------------------------------------------------
# A step that would test or write nothing


def test_mm_codes():
    """Each group's codes (letters, or one ChEBI number), a reverse-strand group on its
    complement, implicit, explicit or no mode."""
    assert mm_codes("C+mh?,0,1;A+a.,2;G-m,1;N+17596,0") == {
        ("C", "m"), ("C", "h"), ("A", "a"), ("N", "17596")
    }  # fmt: skip
    assert mm_codes("") == set()


def dmr_sheet(reads: Path) -> str:
    """Two modBAM samples of modkit's suite, one in each group."""
    return sheet(
        [f"a\t{reads}\t{LADDER}\tmodbam\tcase", f"b\t{reads}\t{LADDER}\tmodbam\tcontrol"],
        "sample\treads\treference\tkind\tgroup",
    )


@pytest.mark.usefixtures("clone")
def test_dmr_code_the_samples_do_not_carry():
    """dmr.code in modkit 0.6's long name (5mC for m), or a code of a base the motif has not:
    one line naming the contrast, the side, the codes its samples carry; the codes read from
    the first records' MM tags (C+h, C+m)."""
    rows = dmr_sheet(UNTAGGED_BAM)
    contrast = {"contrasts": [{"groups": ["case", "control"]}]}
    assert plan_error(samples=rows, dmr={**contrast, "code": "5mC"}, **NO_DEMO) == (
        "numapore: config dmr.code: contrast 'case_vs_control': no call of code '5mC' in group "
        "'case' (a carry h, m: the MM tags' codes, which bedMethyl's column 4 names); 5mC is code "
        "'m': DSS would test no site"
    )
    assert plan_error(samples=rows, dmr={**contrast, "code": "a"}, **NO_DEMO).endswith(
        "no call of code 'a' in group 'case' (a carry h, m: the MM tags' codes, which "
        "bedMethyl's column 4 names): DSS would test no site"
    )
    for code in ("m", "h"):
        assert run_plan(samples=rows, dmr={**contrast, "code": code}, **NO_DEMO).contrasts


@pytest.mark.usefixtures("clone")
def test_haplotype_contrast_of_reads_without_haplotags():
    """A haplotype contrast of a sample without a phased VCF whose reads (all read: 10) carry
    no HP tag: its haplotype files would be empty."""
    rows = sheet([f"x\t{UNTAGGED_BAM}\t{LADDER}\tmodbam"])
    settings = {
        "pileup": {"modkit": "0.6", "phased": True},
        "dmr": {"contrasts": [{"sample": "x"}]},
    }
    assert plan_error(samples=rows, **settings, **NO_DEMO) == (
        "numapore: config dmr.contrasts[0] (x_hp1_vs_hp2): sample 'x' is not phased: none of the "
        f"10 records of its reads file {UNTAGGED_BAM} carries an HP tag and it has no phased VCF "
        "(the sheet's phased_vcf): its haplotype bedMethyl files would be empty"
    )


def vcf(path: Path, genotypes: list[str]) -> Path:
    """A VCF of one sample S on the ladder's first oligo, a record per genotype."""
    lines = ["##fileformat=VCFv4.2", "#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\tFORMAT\tS"]
    contig = LADDER.with_suffix(".fa.fai").read_text().split("\t", 1)[0]
    lines += [f"{contig}\t{10 * i + 10}\t.\tA\tG\t50\tPASS\t.\tGT:PS\t{gt}:10"
              for i, gt in enumerate(genotypes)]  # fmt: skip
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.usefixtures("clone")
def test_phased_vcf_without_a_phased_genotype(tmp_path):
    """A phased_vcf whose genotypes are unphased (0/1) or homozygous, or that holds no record:
    one line before any job; one phased heterozygous genotype is enough."""
    columns = "sample\treads\treference\tkind\tphased_vcf"
    for genotypes, what in (
        (["0/1", "1|1", "0/1"], "none of its 3 records has a"),
        ([], "it has no record, hence no"),
    ):
        path = vcf(tmp_path / "s.vcf", genotypes)
        rows = sheet([f"x\t{UNTAGGED_BAM}\t{LADDER}\tmodbam\t{path}"], columns)
        assert plan_error(samples=rows, **NO_DEMO) == (
            f"numapore: sample sheet {rows}, line 2, sample 'x': phased VCF {path}: {what} "
            "phased heterozygous genotype (GT 0|1) for sample 'S' (0/1 is unphased): WhatsHap "
            "would tag no read and the haplotype bedMethyl files would be empty; give the VCF a "
            "phasing wrote (whatshap phase)"
        )
    path = vcf(tmp_path / "s.vcf", ["0/1", "1|0"])
    rows = sheet([f"x\t{UNTAGGED_BAM}\t{LADDER}\tmodbam\t{path}"], columns)
    assert run_plan(samples=rows, **NO_DEMO).samples["x"].phased_vcf


# ----------------------------------------------------------------------------------------------
# One line from the job that finds it; nothing kept by the job reading from a failed one


def damaged_bam(path: Path) -> Path:
    """modkit's unaligned modBAM 300 times over, cut at 60% and given back its end-of-file block:
    htslib opens it, samtools stops at the record it cannot read."""
    with pysam.AlignmentFile(str(UNTAGGED_BAM), check_sq=False) as source:
        header, records = source.header.to_dict(), [r.to_string() for r in source]
    whole = path.with_suffix(".whole.bam")
    with pysam.AlignmentFile(str(whole), "wb", header=header) as out:
        for i in range(300):
            for text in records:
                record = pysam.AlignedSegment.fromstring(text, out.header)
                record.query_name += f"_{i}"
                out.write(record)
    data = whole.read_bytes()
    path.write_bytes(data[: len(data) * 6 // 10] + data[-28:])  # the 28-byte BGZF EOF block
    return path


def test_damaged_bam_is_named_by_its_staging(tmp_path):
    """samtools' own last line ('Error writing to FASTx files') blames the output: the staging
    names the input, damaged."""
    bam = damaged_bam(tmp_path / "damaged.bam")
    with pytest.raises(InputError) as err:
        stage_modbam_reads(bam, tmp_path / "out.fastq", LADDER, 1)
    assert str(err.value).startswith(
        f"reads file {bam} is truncated or damaged: samtools cannot read it to its end ("
    )
    assert str(err.value).endswith("); copy or download it again in full")
    assert not (tmp_path / "out.fastq").exists()


def unblock(fifo: Path) -> None:
    """A reader waiting for a writer to open fifo let go (if one still waits: a staging that
    failed before it opened its output)."""
    for _ in range(100):
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            return
        except OSError:  # no reader yet, or none any more
            time.sleep(0.01)


def test_staging_counts_are_there_when_the_stream_ends(tmp_path):
    """Reads streamed through a named pipe: the staging's finish (the counts) runs before the
    reader sees their end, so an align job finds the counts then, or knows the staging failed;
    a finish that fails ends the stream too, without the counts."""
    fifo, counts = tmp_path / "reads.fastq", tmp_path / "staged.tsv"
    os.mkfifo(fifo)

    def read_to_the_end() -> bool:
        """What the align job sees: the stream to its end, then whether the counts are there."""
        with open(fifo, "rb") as handle:
            while handle.read(1 << 16):
                pass
        return counts.exists()

    def failing(staged) -> None:
        raise InputError("pileup.phased is true, but none of the 10 reads ...")

    def stage(finish, failed: list) -> None:
        """The staging job, writing into the pipe; failed: its InputError, if any."""
        try:
            stage_modbam_reads(UNTAGGED_BAM, fifo, LADDER, 1, finish=finish)
        except Exception as err:  # noqa: BLE001 (the test's failure, not a hang)
            failed.append(err)
            unblock(fifo)

    for finish, expected in ((lambda staged: staged.write(counts), True), (failing, False)):
        counts.unlink(missing_ok=True)
        failed: list = []
        writer = threading.Thread(target=stage, args=(finish, failed))
        writer.start()
        assert read_to_the_end() is expected
        writer.join(timeout=60)
        assert bool(failed) is not expected
    with pytest.raises(InputError) as err:
        check_streamed_staging(counts, "s", "results/logs/stage_modbam_reads/s.log")
    assert str(err.value) == (
        "sample 's': its alignment is not kept: the staging of its reads failed (its log "
        "results/logs/stage_modbam_reads/s.log says why)"
    )


def test_a_bam_whose_check_fails_is_not_kept(tmp_path):
    """run_alignment's keep check fails: nothing under the BAM's name (the align job of a
    streamed sample whose staging failed)."""
    reads = tmp_path / "reads.fastq"
    stage_modbam_reads(UNTAGGED_BAM, reads, LADDER, 1)
    mmi = tmp_path / "ladder.mmi"
    subprocess.run(["minimap2", "-x", "map-ont", "-d", str(mmi), str(LADDER)], check=True,
                   capture_output=True)  # fmt: skip
    host = load_host_config(host_file(tmp_path / "host.yaml", "none"))

    def staging_failed() -> None:
        check_streamed_staging(tmp_path / "absent.tsv", "s", "its.log")

    out = tmp_path / "s.bam"
    with pytest.raises(InputError, match="its alignment is not kept"):
        run_alignment(host, "minimap2", str(mmi), [mmi], reads, out, 1, tmp_path / "run.json",
                      kind="modbam", sample="s", keep=staging_failed)  # fmt: skip
    assert not out.exists() and not list(tmp_path.glob(".tmp.s.bam*"))
