"""The results' layout: every path a run writes, as a function of the names that place it
(sample, aligner, motif, reference, contrast, shard, cell). The rules' `output:` call these with
no argument, which leaves Snakemake's wildcards in place ("{sample}"); the input functions and
the plan call them with the values. One place for each path, so a renamed output is one change.
"""

from __future__ import annotations

RESULTS = "results"
S, A, M = "{sample}", "{aligner}", "{motif}"


# ---- references


def reference_fasta(ref: str = "{ref}") -> str:
    """A sample's reference as prepared (checked, uncompressed)."""
    return f"{RESULTS}/references/{ref}/{ref}.fa"


def reference_index_prefix(ref: str = "{ref}", aligner: str = A) -> str:
    """The prefix of an aligner's index files of a reference."""
    return f"{RESULTS}/references/{ref}/{aligner}/{ref}"


# ---- reads


def staged_reads_of(staging: str, sample: str, fmt: str, paired: bool, signal: str) -> str:
    """A sample's staged reads (R1 of pairs) as its kind's staging (numapore.inputs.kinds
    STAGINGS) writes them: basecalls once per signal format nanopolish reads ('fast5',
    'blow5'), a modBAM's records as tagged FASTQ, short reads single or paired."""
    if staging == "basecalls":
        return staged_reads(sample, signal, fmt)
    if staging == "tagged":
        return modbam_staging(sample, "fastq")
    return paired_reads(sample, 1, fmt) if paired else staged_reads(sample, "single", fmt)


def staged_reads(sample: str = S, kind: str = "{signal}", fmt: str = "{fmt}") -> str:
    """A sample's reads as staged: kind 'fast5' or 'blow5' (nanopolish's read index beside them
    points at that signal), 'modbam' (FASTQ with the tags in the headers), 'single'; 'paired'
    gives R1's (paired_reads for both)."""
    if kind == "paired":
        return paired_reads(sample, 1, fmt)
    return f"{RESULTS}/{sample}/reads/{kind}/{sample}.{fmt}"


def paired_reads(sample: str = S, mate: int | str = 1, fmt: str = "{fmt}") -> str:
    """One mate of a paired sample's staged reads."""
    return f"{RESULTS}/{sample}/reads/paired/{sample}.{mate}.{fmt}"


def reads_shard(sample: str = S, shard: str = "{shard}", mate: str = "", fmt: str = "{fmt}"):
    """One scatter shard of the staged reads (mate '.1' / '.2' for pairs, '' else)."""
    return f"{RESULTS}/{sample}/reads/shards/{sample}.{shard}{mate}.{fmt}"


def modbam_staging(sample: str = S, what: str = "fastq") -> str:
    """A modBAM sample's staging outputs: 'fastq' (its reads), 'untagged' (reads without usable
    tags), 'ids' (the read id table)."""
    suffix = {"fastq": "fastq", "untagged": "untagged.tsv", "ids": "ids.parquet"}[what]
    return f"{RESULTS}/{sample}/reads/modbam/{sample}.{suffix}"


def staged_counts(sample: str = S) -> str:
    """What a modBAM sample's staging counted."""
    return f"{RESULTS}/{sample}/{sample}.staged.tsv"


def fast5_links(sample: str = S) -> str:
    """The folder linking the FAST5 files nanopolish index would not find in the sample's."""
    return f"{RESULTS}/{sample}/fast5_files"


def blow5(sample: str = S, suffix: str = "") -> str:
    """The sample's BLOW5 (suffix '.idx', '.rejected.tsv' for its index and rejections)."""
    return f"{RESULTS}/{sample}/signal/{sample}.blow5{suffix}"


def census(sample: str = S, suffix: str = ".parquet") -> str:
    """The census of the sample's FAST5/POD5 reads ('.parquet') and files ('.files.tsv')."""
    return f"{RESULTS}/{sample}/signal/{sample}.census{suffix}"


# ---- alignments


def bam(sample: str = S, aligner: str = A, suffix: str = ".bam") -> str:
    """The sample's sorted BAM and what its job writes beside it by suffix ('.bam.bai',
    '.flagstat.json', '.summary.tsv', '.stats.txt', '.flagstat.txt', '.haplotagged.bam')."""
    return f"{RESULTS}/{sample}/align/{sample}.{aligner}{suffix}"


def sample_bam_outputs(sample: str = S, aligner: str = A) -> dict[str, str]:
    """The sample's sorted BAM and what its job makes with it, by output name: index, flagstat
    (JSON) and the alignment check (summary)."""
    suffixes = {"bam": ".bam", "bai": ".bam.bai", "flagstat": ".flagstat.json"}
    return {k: bam(sample, aligner, v) for k, v in (suffixes | {"summary": ".summary.tsv"}).items()}


def bam_shard(sample: str = S, aligner: str = A, shard: str = "{shard}") -> str:
    """One scatter shard's alignments."""
    return f"{RESULTS}/{sample}/align/shards/{sample}.{aligner}.{shard}.bam"


def accounting(sample: str = S, aligner: str = A) -> str:
    """Where each of the sample's reads went (the read accounting)."""
    return f"{RESULTS}/{sample}/{sample}.{aligner}.accounting.tsv"


# ---- methylation


def methylation(sample: str = S, aligner: str = A, motif: str = M, suffix: str = "") -> str:
    """A motif's methylation output of a sample by suffix: '.calls.tsv', '.frequency.tsv',
    '.bedmethyl.gz' (+ '.tbi'), '.hp1.bedmethyl.gz', '.modbam.bam', '.pileup_reads.tsv',
    '.accuracy.tsv' (motif cpg)."""
    return f"{RESULTS}/{sample}/methylation/{sample}.{aligner}.{motif}{suffix}"


def methylation_shard(
    sample: str = S, aligner: str = A, motif: str | None = M, shard: str = "{shard}", suffix=""
) -> str:
    """A scatter shard of a motif's calling or pileup (suffix '.calls.tsv', '.bed',
    '.pileup_reads.tsv'), or with motif None the calling's shard of alignments ('.bam')."""
    name = f"{sample}.{aligner}" + (f".{motif}" if motif is not None else "")
    return f"{RESULTS}/{sample}/methylation/shards/{name}.{shard}{suffix}"


def cohort_table(ref: str = "{ref}", aligner: str = A, motif: str = M, suffix: str = "") -> str:
    """The cohort table of a reference and motif (suffix '.tbi' for its index)."""
    return f"{RESULTS}/cohort/{ref}/cohort.{aligner}.{motif}.bed.gz{suffix}"


def cohort_samples(ref: str = "{ref}", aligner: str = A, motif: str = M) -> str:
    """Beside a cohort table: each sample's sites read and kept (config cohort:'s filters)."""
    return f"{RESULTS}/cohort/{ref}/cohort.{aligner}.{motif}.samples.tsv"


def track(
    sample: str = S, aligner: str = A, motif: str = M, part: str = "{part}", codes="{codes}"
) -> str:
    """A bigWig track of a sample's bedMethyl (part 'all', or a haplotype's 'hp1', 'hp2') of
    the percent modified of codes (summed, as modkit's --mod-codes h,m; named 'h_m')."""
    return f"{RESULTS}/{sample}/tracks/{sample}.{aligner}.{motif}.{part}.{codes}.bw"


def region_table(
    name: str = "{regionset}", aligner: str = A, motif: str = M, what: str = "{what}"
) -> str:
    """A region set's table (config regions:) of a motif: 'stats' (numapore stats) or
    'entropy' (numapore entropy --regions), a row per region of each sample, haplotype, group."""
    return f"{RESULTS}/regions/{name}/{name}.{aligner}.{motif}.{what}.tsv"


def region_report(name: str = "{regionset}", aligner: str = A, motif: str = M, suffix="") -> str:
    """A region set's report files by suffix: '.html' (its tables), '.png' (its figure),
    '.data.json' (the figure's numbers)."""
    return f"{RESULTS}/regions/{name}/{name}.{aligner}.{motif}.report{suffix}"


def igv_session(ref: str = "{ref}") -> str:
    """An IGV session of a reference and every track of its samples."""
    return f"{RESULTS}/tracks/{ref}.igv_session.xml"


def pileup_thresholds(sample: str = S, aligner: str = A, motif: str = M) -> str:
    """The pass thresholds a motif's pileup used, and their origin (a JSON record:
    numapore.pileup.thresholds.threshold_record)."""
    return methylation(sample, aligner, motif, ".pileup_thresholds.json")


# ---- QC of the calls


CALLS_QC_FILES = ["summary.txt", "summary.tsv", "thresholds.tsv", "probabilities.tsv", "pass.tsv"]


def calls_qc(sample: str = S, aligner: str = A, motif: str = M, name: str = "{name}") -> str:
    """The QC of the calls a motif's pileup read (numapore.modbam.qc): 'summary.txt' and
    'summary.tsv' (`numapore summary`, its table and --tsv), 'thresholds.tsv' and
    'probabilities.tsv' (`numapore sample-probs --hist`), 'pass.tsv' (per code: the pileup's
    threshold and the calls passing it)."""
    return f"{RESULTS}/{sample}/qc/{sample}.{aligner}.{motif}.{name}"


# ---- simulated samples


SIMULATED = f"{RESULTS}/simulated"


def simulated(sample: str = S, name: str = "truth.tsv") -> str:
    """A simulated sample's files: 'truth.tsv', 'regions.bed', 'reads.fastq',
    'reads.modbam.bam', 'fast5_multi'."""
    return f"{SIMULATED}/{sample}/{name}"


# ---- reports


def report_file(sample: str = S, aligner: str = A, name: str = "{name}") -> str:
    """A report file of a sample (e.g. 'alignment_qc.png', 'provenance.html',
    'accounting.data.json')."""
    return f"{RESULTS}/{sample}/report/{sample}.{aligner}.{name}"


MULTIQC_REPORT = f"{RESULTS}/multiqc/numapore_multiqc.html"


def multiqc_custom(name: str) -> str:
    """One of numapore's MultiQC custom-content tables ('accounting', 'methylation', 'dmr')."""
    return f"{RESULTS}/multiqc/numapore_{name}_mqc.tsv"


def multiqc_custom_plot(name: str) -> str:
    """One of numapore's MultiQC custom-content plots, JSON ('calls_qc')."""
    return f"{RESULTS}/multiqc/numapore_{name}_mqc.json"


# ---- DMRs


def dmr(contrast: str = "{contrast}", suffix: str = "") -> str:
    """A contrast's output by suffix ('.sites.tsv.gz', '.dmrs.bed.gz', '.dmrs.png', ...)."""
    return f"{RESULTS}/dmr/{contrast}/{contrast}{suffix}"


def dmr_shard(contrast: str = "{contrast}", shard: str = "{shard}", suffix: str = "") -> str:
    """A contrast's table of one DMR shard ('.counts.tsv', '.sites.tsv', '.dmrs.tsv')."""
    return f"{RESULTS}/dmr/{contrast}/shards/{contrast}.{shard}{suffix}"


def dss_summary(shard: str = "{shard}") -> str:
    """DSS's summary of one shard's tests."""
    return f"{RESULTS}/dmr/shards/{shard}.dss.txt"


# ---- host tuning's records and adoptable host files (numapore.compare.tuning, tune_pileup)

TUNING = f"{RESULTS}/tuning"


# ---- the strategy comparison


COMPARE = f"{RESULTS}/compare"
COMPARISON_REPORT = f"{COMPARE}/report.md"


def compare_file(name: str) -> str:
    """A file of the comparison's folder ('summary.tsv', 'io_modes.png', ...)."""
    return f"{COMPARE}/{name}"


def compare_input(name: str) -> str:
    """The comparison's own inputs (reads subsampled, staged again, aligned)."""
    return f"{COMPARE}/input/{name}"


def compare_cell(cell: str = "{cell}", suffix: str = ".run.json") -> str:
    """A cell's run record ('.run.json') or GNU time's report ('.time.txt')."""
    return f"{COMPARE}/cells/{cell}{suffix}"


# ---- logs and benchmarks


def log(rule: str, name: str) -> str:
    """A job's log."""
    return f"{RESULTS}/logs/{rule}/{name}"


def benchmark(rule: str, name: str) -> str:
    """A job's Snakemake benchmark."""
    return f"{RESULTS}/benchmarks/{rule}/{name}"
