"""Haplotypes and groups of samples (issue 43): haplotags kept through staging and realignment,
or made by WhatsHap from a phased VCF; the pileup per haplotype (pileup.phased); the group
column and the cohort table, against modkit 0.6.1's own `bedmethyl merge` (golden files).

One small run (phased_run) of its own: pileup.phased needs modkit 0.6 semantics and haplotagged
reads in every sample, which no shared run has. Its samples are made here from the modBAM
simulator on a 30 kb window of E. coli DH10B: each a mix of reads drawn from the reference
(haplotype 1) and from a copy carrying heterozygous SNVs (haplotype 2).
"""

from __future__ import annotations

import gzip
import random
from pathlib import Path

import pysam
import pytest

from conftest import REPO, run_workflow
from project import write_project
from shared_runs import keep_output, shared_run

from numapore.inputs.phasing import check_vcf_contigs
from numapore.inputs.sheet import InputError, check_phased_samples, load_samples, read_sheet
from numapore.pileup import cli as pileup_cli
from numapore.methylation.bedmethyl import read_bedmethyl
from numapore.methylation.cohort import cohort_frame, cohort_lines, header_line
from numapore.methylation.cohort import write_cohort_table
from numapore.pileup.settings import SettingsError, check_settings, numapore_arguments
from numapore.workflow.jobs import options_of
from numapore.simulate.read_model import SimConfig
from numapore.simulate.reads import simulate

DH10B = REPO / "resources" / "ecoli_dh10b.fa"
WINDOW = (1_000_000, 1_030_000)  # of DH10B, as .test/config-modbam.yaml's demo
CONTIG = "ecoli_window"
SNV_SPACING = 250  # a heterozygous SNV every ~250 bases


def window_sequence() -> str:
    """The 30 kb window of DH10B."""
    with pysam.FastaFile(str(DH10B)) as fasta:
        return fasta.fetch(fasta.references[0], *WINDOW).upper()


def snvs(sequence: str, seed: int = 43) -> list[tuple[int, str, str]]:
    """Heterozygous SNVs (0-based position, ref, alt) about SNV_SPACING apart, none touching a
    CpG of either haplotype (the methylation sites stay the same in both)."""
    rng = random.Random(seed)
    out = []
    for centre in range(SNV_SPACING, len(sequence) - SNV_SPACING, SNV_SPACING):
        pos = centre + rng.randrange(-50, 50)
        ref = sequence[pos]
        context = sequence[pos - 1 : pos + 2]
        alts = [b for b in "ACGT" if b != ref and "CG" not in context[0] + b + context[2]]
        if "CG" in context or not alts:
            continue
        out.append((pos, ref, rng.choice(alts)))
    return out


def write_fasta(path: Path, sequence: str) -> Path:
    """A one-contig FASTA of sequence, named CONTIG."""
    lines = [sequence[i : i + 80] for i in range(0, len(sequence), 80)]
    path.write_text(f">{CONTIG}\n" + "\n".join(lines) + "\n")
    return path


def write_phased_vcf(path: Path, variants: list[tuple[int, str, str]], sample: str,
                     contig_length: int) -> Path:  # fmt: skip
    """The SNVs as a phased VCF of one sample: 0|1 (haplotype 1 the reference's), one phase set."""
    ps = variants[0][0] + 1
    lines = [
        "##fileformat=VCFv4.2",
        f"##contig=<ID={CONTIG},length={contig_length}>",
        '##FORMAT=<ID=GT,Number=1,Type=String,Description="Genotype">',
        '##FORMAT=<ID=PS,Number=1,Type=Integer,Description="Phase set">',
        f"#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\tFORMAT\t{sample}",
    ]
    lines += [
        f"{CONTIG}\t{p + 1}\t.\t{r}\t{a}\t50\tPASS\t.\tGT:PS\t0|1:{ps}" for p, r, a in variants
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def two_haplotype_modbam(folder: Path, out: Path, seed: int, reads: int, tag: bool) -> dict:
    """An unaligned modBAM of reads simulated from haplotype 1 (the window) and haplotype 2
    (with the SNVs), interleaved; with tag, each read carries HP (its haplotype) and PS as an
    upstream phasing would leave them. Returns read id -> haplotype."""
    truth, records = {}, []
    for hp in (1, 2):
        sub = folder / f"sim_{seed}_{hp}"
        cfg = SimConfig(n_reads=reads, seed=seed * 10 + hp, mean_length=3000, sd_length=1500,
                        error_rate=0.02, formats=("modbam", "truth"))  # fmt: skip
        simulate(folder / f"hap{hp}.fa", sub, cfg, progress=False)
        with pysam.AlignmentFile(str(sub / "reads.modbam.bam"), check_sq=False) as bam:
            header = bam.header.to_dict()
            for rec in bam:
                name = f"hp{hp}_{rec.query_name}"
                truth[name] = hp
                records.append(
                    (len(records) % 2, hp, rec.to_string().replace(rec.query_name, name, 1))
                )
    with pysam.AlignmentFile(str(out), "wb", header=header) as dst:
        for _, hp, text in sorted(records, key=lambda r: (r[0], r[1])):
            rec = pysam.AlignedSegment.fromstring(text, dst.header)
            if tag:
                rec.set_tag("HP", hp, "i")
                rec.set_tag("PS", 1001, "i")
            dst.write(rec)
    return truth


def make_inputs(folder: Path) -> dict:
    """The run's inputs in folder: the window (reference), the haplotypes, the phased VCF, and
    two samples' unaligned modBAMs (one haplotagged upstream, one to be tagged from the VCF)."""
    folder.mkdir(parents=True, exist_ok=True)
    sequence = window_sequence()
    variants = snvs(sequence)
    hap2 = list(sequence)
    for pos, _, alt in variants:
        hap2[pos] = alt
    reference = write_fasta(folder / "hap1.fa", sequence)
    write_fasta(folder / "hap2.fa", "".join(hap2))
    vcf = write_phased_vcf(folder / "vcftagged.phased.vcf", variants, "HG_sim", len(sequence))
    tagged = two_haplotype_modbam(folder, folder / "tagged.bam", 1, 40, tag=True)
    untagged = two_haplotype_modbam(folder, folder / "vcftagged.bam", 2, 40, tag=False)
    return {"reference": reference, "vcf": vcf, "variants": variants,
            "truth": {"tagged": tagged, "vcftagged": untagged}}  # fmt: skip


SAMPLES = ("tagged", "vcftagged")
GROUPS = {"tagged": "case", "vcftagged": "control"}
PILEUP = {"modkit": "0.6", "motif": "cpg", "combine_strands": True, "filter_threshold": "auto",
          "filter_percentile": 0.1, "ignore": "", "edge_filter": "", "phased": True}  # fmt: skip


def methylation(sample: str) -> str:
    """The prefix of a sample's bedMethyl files in the run."""
    return f"results/{sample}/methylation/{sample}.minimap2.cpg"


@pytest.fixture(scope="session")
def phased_run(tmp_path_factory) -> Path:
    """Two samples on the window, groups case and control, pileup.phased with modkit 0.6
    semantics: 'tagged' (reads haplotagged upstream: HP/PS must survive staging and the
    realignment) and 'vcftagged' (untagged reads and a phased VCF: WhatsHap tags them). Asks
    for the bedMethyl (combined and per haplotype), the accounting and the cohort table."""

    def make(work: Path) -> None:
        inputs = make_inputs(work / "inputs")
        rows = [
            {"sample": s, "reads": work / "inputs" / f"{s}.bam", "reference": inputs["reference"],
             "group": GROUPS[s], "phased_vcf": inputs["vcf"] if s == "vcftagged" else ""}
            for s in SAMPLES
        ]  # fmt: skip
        write_project(work, rows, {"pileup": PILEUP})
        targets = ["results/cohort/hap1/cohort.minimap2.cpg.bed.gz.tbi"]
        for s in SAMPLES:
            targets += [f"{methylation(s)}.{hp}bedmethyl.gz.tbi" for hp in ("", "hp1.", "hp2.")]
            targets.append(f"results/{s}/{s}.minimap2.accounting.tsv")
        keep_output(work, run_workflow(work, *targets))

    return shared_run(tmp_path_factory, "phased_run", make)


def origin(name: str) -> int:
    """The haplotype a simulated read was drawn from (its name says: hp1_..., hp2_...)."""
    return int(name[2])


def primary_records(bam: Path) -> dict[str, pysam.AlignedSegment]:
    """Each read's mapped primary record."""
    with pysam.AlignmentFile(str(bam)) as handle:
        return {r.query_name: r for r in handle
                if not (r.is_unmapped or r.is_secondary or r.is_supplementary)}  # fmt: skip


def test_hp_tags_survive_staging_and_realignment(phased_run):
    """Read for read, the realigned BAM carries the HP and PS tags the input's reads had (and
    their MM/ML), as the staging keeps them beside MM/ML."""
    with pysam.AlignmentFile(str(phased_run / "inputs/tagged.bam"), check_sq=False) as src:
        given = {r.query_name: (r.get_tag("HP"), r.get_tag("PS"), r.get_tag("MM")) for r in src}
    aligned = primary_records(phased_run / "results/tagged/align/tagged.minimap2.bam")
    assert len(given) == 80 and set(aligned) == set(given)
    for name, record in aligned.items():
        assert (record.get_tag("HP"), record.get_tag("PS"), record.get_tag("MM")) == given[name]
        assert origin(name) == given[name][0]


def test_whatshap_haplotags_the_reads_of_a_phased_vcf(phased_run):
    """The sample with a phased VCF: the real WhatsHap's tags on the haplotagged BAM (which the
    pileup reads), each read's HP its haplotype of origin, PS the VCF's phase set; the aligned
    BAM itself untagged; MM/ML kept."""
    prefix = phased_run / "results/vcftagged/align/vcftagged.minimap2"
    untagged = primary_records(Path(f"{prefix}.bam"))
    tagged = primary_records(Path(f"{prefix}.haplotagged.bam"))
    assert set(tagged) == set(untagged) and len(tagged) == 80
    assert not any(r.has_tag("HP") for r in untagged.values())
    ps = int((phased_run / "inputs/vcftagged.phased.vcf").read_text().split("\t0|1:")[1].split()[0])
    with_hp = {n: r for n, r in tagged.items() if r.has_tag("HP")}
    assert len(with_hp) >= 76  # 3 kb reads, a SNV every 250 bases: nearly all are tagged
    assert {n: r.get_tag("HP") for n, r in with_hp.items()} == {n: origin(n) for n in with_hp}
    assert {r.get_tag("PS") for r in with_hp.values()} == {ps}
    assert all(r.get_tag("MM") == untagged[n].get_tag("MM") for n, r in tagged.items())
    log = (phased_run / "results/logs/haplotag/vcftagged.minimap2.log").read_text()
    assert "Alignments that could be tagged:" in log


def test_accounting_counts_reads_per_haplotag(phased_run):
    """The accounting's haplotype rows: primary aligned reads with HP 1, HP 2 and none, as the
    piled-up BAM has them, adding up to the primary aligned reads."""
    for sample, bam in (("tagged", "tagged.minimap2.bam"),
                        ("vcftagged", "vcftagged.minimap2.haplotagged.bam")):  # fmt: skip
        rows = [line.split("\t") for line in
                (phased_run / f"results/{sample}/{sample}.minimap2.accounting.tsv")
                .read_text().splitlines()[1:]]  # fmt: skip
        counts = {what: int(n) for stage, what, n, _ in rows if stage == "haplotype"}
        records = primary_records(phased_run / f"results/{sample}/align/{bam}")
        expected = {hp: sum(1 for r in records.values()
                            if (r.get_tag("HP") if r.has_tag("HP") else 0) == hp)
                    for hp in (0, 1, 2)}  # fmt: skip
        assert counts == {
            "primary aligned with HP 1": expected[1],
            "primary aligned with HP 2": expected[2],
            "primary aligned without an HP tag": expected[0],
        }
        aligned = next(int(n) for stage, what, n, _ in rows if what == "primary aligned")
        assert sum(counts.values()) == aligned == len(records)


def test_haplotype_bedmethyl_equal_the_pileups_phased_output(phased_run, tmp_path):
    """pileup.phased's files are, byte for byte, `numapore pileup --phased --bgzf` of the same
    BAM with the run's options (modkit 0.6.1's hp1/hp2; the combined one is rule pileup's)."""
    reference = phased_run / "results/references/hap1/hap1.fa"
    for sample, bam in (("tagged", "tagged.minimap2.bam"),
                        ("vcftagged", "vcftagged.minimap2.haplotagged.bam")):  # fmt: skip
        arguments = numapore_arguments(options_of({**PILEUP}, str(reference), 2))
        out = tmp_path / sample
        bam_path = phased_run / f"results/{sample}/align/{bam}"
        assert pileup_cli.main([str(bam_path), str(out), *arguments, "--phased", "--bgzf"]) == 0
        for theirs, ours in (("hp1", "hp1."), ("hp2", "hp2."), ("combined", "")):
            run_file = phased_run / f"{methylation(sample)}.{ours}bedmethyl.gz"
            expected = gzip.decompress((out / f"{theirs}.bed.gz").read_bytes())
            assert gzip.decompress(run_file.read_bytes()) == expected, (sample, theirs)
            assert expected.count(b"\n") > 1000
            assert Path(f"{run_file}.tbi").stat().st_size
        one = gzip.decompress((out / "hp1.bed.gz").read_bytes())
        assert one != gzip.decompress((out / "hp2.bed.gz").read_bytes())


def test_cohort_table_of_the_run(phased_run):
    """The run's cohort table: the samples' header columns, and per site each sample's valid
    coverage and modified count as its own bedMethyl has them (0 where it has no row), the
    first 18 columns summing them as modkit's merge does (numapore.methylation.cohort)."""
    table = phased_run / "results/cohort/hap1/cohort.minimap2.cpg.bed.gz"
    assert Path(f"{table}.tbi").stat().st_size
    lines = gzip.decompress(table.read_bytes()).decode().splitlines()
    assert lines[0] + "\n" == header_line(SAMPLES)
    assert lines[0].endswith("valid_tagged\tmod_tagged\tvalid_vcftagged\tmod_vcftagged")
    own = {}
    for s in SAMPLES:
        for r in read_bedmethyl(phased_run / f"{methylation(s)}.bedmethyl.gz"):
            own[(s, r.chrom, str(r.start), r.name, r.strand)] = (r.valid_cov, r.n_mod)
    assert len(lines) - 1 == len({k[1:] for k in own})
    for line in lines[1:]:
        f = line.split("\t")
        key = (f[0], f[1], f[3], f[5])
        per_sample = [own.get((s, *key), (0, 0)) for s in SAMPLES]
        assert [int(x) for x in f[18:]] == [n for pair in per_sample for n in pair]
        assert (int(f[9]), int(f[11])) == tuple(map(sum, zip(*per_sample, strict=True)))
    log = (phased_run / "results/logs/cohort_table/hap1.minimap2.cpg.log").read_text()
    assert "samples: tagged (case), vcftagged (control)" in log


# ----------------------------------------------------------------------------------------------
# Bad input: one numapore: line each, before the alignment (or before any job).

MODKIT_INPUTS = REPO.parent / "shared" / "data" / "modkit_pileup" / "inputs"
LADDER = MODKIT_INPUTS / "CGI_ladder_3.6kb_ref.fa"
UNTAGGED_BAM = MODKIT_INPUTS / "bc_anchored_10_reads.unmapped.bam"  # no HP tag on any read


def test_phased_vcf_of_other_contigs_and_reads_without_hp_stop_before_alignment(tmp_path):
    """With pileup.phased: a sample whose phased VCF names contigs the reference lacks, and one
    whose reads carry no HP tag and that has no VCF, each stop in their staging job (before the
    alignment, which reads the staged reads) with one line naming the sample and the file. (The
    plan cannot see either: the contigs need the prepared reference, and it reads only the first
    records of a reads file for HP tags when no haplotype contrast asks for them.)"""
    vcf = tmp_path / "other.vcf"
    vcf.write_text("##fileformat=VCFv4.2\n##contig=<ID=chr1,length=248956422>\n"
                   "#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\tFORMAT\tS\n"
                   "chr1\t100\t.\tA\tG\t50\tPASS\t.\tGT\t0|1\n")  # fmt: skip
    rows = [{"sample": "wrongvcf", "reads": UNTAGGED_BAM, "reference": LADDER, "phased_vcf": vcf},
            {"sample": "nohp", "reads": UNTAGGED_BAM, "reference": LADDER}]  # fmt: skip
    work = write_project(tmp_path / "run", rows, {"pileup": PILEUP})
    bams = [f"results/{s}/align/{s}.minimap2.bam" for s in ("wrongvcf", "nohp")]
    result = run_workflow(work, *bams, "--keep-going", check=False)
    # Snakemake shows a failed job's log (indented in a failed group's block)
    out = (result.stdout + result.stderr).splitlines()
    lines = {x.strip() for x in out if x.strip().startswith("numapore:")}
    assert result.returncode == 1
    assert (
        f"numapore: sample 'wrongvcf': phased_vcf: phased VCF {vcf}: none of its contigs (chr1) "
        f"is in the reference {LADDER} (oligo_1512_adapters, oligo_741_adapters, "
        "oligo_677_adapters, ...): the VCF names the contigs otherwise (chr1 against 1?) or "
        "comes from another genome"
    ) in lines
    assert (
        "numapore: sample 'nohp': pileup.phased is true, but none of the 10 reads of "
        f"{UNTAGGED_BAM} carries an HP tag (haplotag); haplotag them first (whatshap haplotag), "
        "or give the sample a phased VCF in the sheet's phased_vcf column"
    ) in lines
    # Their align jobs, reading the staged reads through a pipe, keep nothing and point at the
    # staging's line, without a numapore: line of their own (one per failure) or a traceback.
    everything = {x.strip() for x in out}
    for sample in ("wrongvcf", "nohp"):
        assert (
            f"sample '{sample}': its alignment is not kept: the staging of its reads "
            f"failed (its log results/logs/stage_modbam_reads/{sample}.log says why)"
        ) in everything
        assert len([x for x in lines if f"sample '{sample}'" in x]) == 1
    assert "Traceback" not in result.stdout + result.stderr
    assert not any((work / bam).exists() for bam in bams)
    assert not list((work / "results").glob("*/align/*.bam*"))


def test_vcf_contigs_of_another_assembly_are_named(tmp_path):
    """A contig the VCF and the reference share but with other lengths (another assembly): the
    VCF, the contig and both lengths; a VCF whose contigs match passes."""
    fai = tmp_path / "ref.fa.fai"
    fai.write_text("chr1\t1000\t6\t60\t61\nchr2\t500\t1030\t60\t61\n")
    vcf = tmp_path / "s.vcf"
    vcf.write_text("##fileformat=VCFv4.2\n##contig=<ID=chr1,length=1200>\n#CHROM\tPOS\n")
    with pytest.raises(InputError) as err:
        check_vcf_contigs(vcf, fai, Path("ref.fa"), "sample 's'")
    assert str(err.value) == (
        f"sample 's': phased VCF {vcf}: contig 'chr1' has length 1200 in the VCF but 1000 in the "
        "reference ref.fa: the VCF was called on another assembly; give one called on this "
        "reference"
    )
    vcf.write_text("##fileformat=VCFv4.2\n#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\n"
                   "chr2\t10\t.\tA\tG\t.\t.\t.\n")  # fmt: skip
    check_vcf_contigs(vcf, fai, Path("ref.fa"), "sample 's'")  # no ##contig: the records'


def test_phased_settings_refused_at_config_load(tmp_path, ecoli_dir):
    """pileup.phased under modkit 0.4 semantics, a signal sample in a phased run, a phased VCF
    on a signal sample or naming other samples: one line each, before any job."""
    with pytest.raises(SettingsError) as err:
        check_settings({**PILEUP, "modkit": "0.4"})
    assert str(err.value) == (
        'pileup.phased: true is modkit 0.6.1\'s pileup --phased; set pileup.modkit: "0.6" '
        "(it is '0.4')"
    )
    vcf = tmp_path / "two.vcf"
    vcf.write_text("##fileformat=VCFv4.2\n#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\tFORMAT"
                   "\tA\tB\n")  # fmt: skip
    sheet = tmp_path / "samples.tsv"
    signal = f"sig\t{ecoli_dir / 'fast5'}\t{ecoli_dir / 'reads.fasta'}\t{ecoli_dir / 'region.fa'}"
    sheet.write_text(f"sample\tsignal\treads\treference\tphased_vcf\n{signal}\t\n"
                     f"mb\t\t{UNTAGGED_BAM}\t{LADDER}\t{vcf}\n")  # fmt: skip
    with pytest.raises(InputError) as err:
        load_samples(read_sheet(sheet), sheet, tmp_path)
    assert str(err.value) == (
        f"sample sheet {sheet}, line 3, sample 'mb': phased VCF {vcf} has 2 samples (A, B), "
        "none named 'mb': give a VCF of this sample alone, or name the sheet's sample as the "
        "VCF names it"
    )
    sheet.write_text(f"sample\tsignal\treads\treference\tphased_vcf\n{signal}\t{vcf}\n")
    with pytest.raises(InputError, match="a signal sample's pileup reads nanopolish's calls"):
        load_samples(read_sheet(sheet), sheet, tmp_path)
    sheet.write_text(f"sample\tsignal\treads\treference\n{signal}\n")
    with pytest.raises(InputError) as err:
        check_phased_samples(load_samples(read_sheet(sheet), sheet, tmp_path).values())
    assert str(err.value).startswith(
        "pileup.phased: sample 'sig' is a signal sample: its pileup reads nanopolish's calls"
    )


# ----------------------------------------------------------------------------------------------
# The cohort table against modkit 0.6.1's own `bedmethyl merge` (tests/data/modkit/merge061).

MERGE_GOLDEN = REPO / "tests" / "data" / "modkit" / "merge061"
PILEUP_SUITE = REPO.parent / "shared" / "data" / "modkit061_pileup"


def merge_cases() -> list[tuple[str, list[str], str]]:
    """The golden cases: name, the suite's bedMethyl files, the genome sizes."""
    rows = [line.split("\t") for line in (MERGE_GOLDEN / "cases.tsv").read_text().splitlines()]
    return [(case, inputs.split(), sizes) for case, inputs, sizes in rows[1:]]


@pytest.mark.parametrize("case, inputs, sizes", merge_cases(), ids=lambda v: str(v)[:20])
def test_cohort_table_equals_modkit_bedmethyl_merge(case, inputs, sizes, tmp_path, capsys):
    """Columns 1-18 of the cohort table (header included) are, line for line, what modkit 0.6.1's
    `bedmethyl merge --header` wrote from the same files: sites of any file (outer join), counts
    summed, percent recomputed, modkit's row order (contig order of the sizes, start, strand,
    code), the code alone in the name column. The samples' own columns follow."""
    golden = gzip.decompress((MERGE_GOLDEN / f"{case}.bed.gz").read_bytes()).decode()
    beds = [(f"s{i}", PILEUP_SUITE / path) for i, path in enumerate(inputs)]
    contigs = [line.split("\t")[0] for line in (PILEUP_SUITE / sizes).read_text().splitlines()]
    samples = [name for name, _ in beds]
    ours = [header_line(samples), *cohort_lines(cohort_frame(beds, contigs), samples)]
    first_18 = ["\t".join(line.split("\t")[:18]).rstrip("\n") + "\n" for line in ours]
    assert "".join(first_18) == golden
    # The job's table, streamed (a k-way merge of the sorted files, read a few lines at a
    # time): the same text (nothing said: no file fell back to the table in memory).
    streamed = tmp_path / "cohort.bed.gz"
    write_cohort_table(streamed, beds, contigs, batch_bytes=400)
    assert gzip.decompress(streamed.read_bytes()).decode() == "".join(ours)
    assert capsys.readouterr().out == ""
    assert len(ours) > 40
    # Each sample's valid and mod columns are its own file's (0 0 where it has no row).
    own = {}
    for name, path in beds:
        for r in read_bedmethyl(path):
            own[(name, r.chrom, str(r.start), r.name.split(",")[0], r.strand)] = [
                r.valid_cov,
                r.n_mod,
            ]
    for line in ours[1:]:
        f = line.rstrip("\n").split("\t")
        expected = [n for s in samples for n in own.get((s, f[0], f[1], f[3], f[5]), [0, 0])]
        assert [int(x) for x in f[18:]] == expected
