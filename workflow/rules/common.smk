# Configuration and sample sheet: validated here, before any job starts, so that a bad input
# fails fast with one message naming the key or the file.
import sys
from pathlib import Path

from snakemake.utils import validate

sys.path.insert(0, str(Path(workflow.basedir).parent / "scripts"))
from numapore.launch import host_file_for  # noqa: E402
from numapore.numa import NumaError, startup_check  # noqa: E402
from numapore.samples import (  # noqa: E402
    InputError,
    combine_samples,
    load_samples,
    read_sheet,
    simulated_samples,
)
from numapore.slow5 import check_nanopolish_compatible  # noqa: E402

validate(config, schema="../schemas/config.schema.yaml")

try:
    _sheet = Path(config["samples"])
    _table = read_sheet(_sheet)
    validate(_table, schema="../schemas/samples.schema.yaml")
    SAMPLES = combine_samples(
        load_samples(_table, _sheet, Path.cwd()),
        simulated_samples(config["simulate"], Path.cwd()),
        _sheet,
    )
    # The host file: its NUMA layout must exist on this machine before any job starts.
    HOST_FILE = str(host_file_for(config["host"]))
    HOST = startup_check(HOST_FILE)[0]
    if HOST.io_mode == "slow5":
        check_nanopolish_compatible(config["slow5"]["signal_compression"])
except (InputError, NumaError, ValueError) as err:
    raise WorkflowError(f"numapore: {err}")

ALIGNERS = ["minimap2", "bwa", "bowtie2"]
# The files each aligner's index consists of (after the reference's name).
INDEX_SUFFIXES = {
    "minimap2": [".map-ont.mmi"],
    "bwa": [".amb", ".ann", ".bwt", ".pac", ".sa"],
    "bowtie2": [".1.bt2", ".2.bt2", ".3.bt2", ".4.bt2", ".rev.1.bt2", ".rev.2.bt2"],
}
# Wildcard patterns (applied in the Snakefile): sample names as the sheet schema allows them.
WILDCARD_PATTERNS = {
    "sample": r"[A-Za-z0-9][A-Za-z0-9_-]*",
    "aligner": "|".join(ALIGNERS),
    "ref": r"[A-Za-z0-9._-]+",
    "shard": r"\d+-of-\d+",
    "fmt": r"fast[aq](\.gz)?",
}
REFERENCES = {s.reference_name: s.reference for s in SAMPLES.values()}


def shard_ids(step):
    """Shard names '1-of-N' .. 'N-of-N' for a step scattered into N pieces by read."""
    n = config["scatter"][step]
    return [f"{i}-of-{n}" for i in range(1, n + 1)]


def staged_reads(wildcards):
    """The sample's reads as staged under results/ (nanopolish writes its index beside them)."""
    sample = SAMPLES[wildcards.sample]
    return f"results/{sample.name}/reads/{sample.name}.{sample.reads_format}"


def reads_shard(wildcards):
    """The reads the aligner gets for one shard: all reads when the step is not scattered."""
    if config["scatter"]["alignment"] == 1:
        return staged_reads(wildcards)
    fmt = SAMPLES[wildcards.sample].reads_format.removesuffix(".gz")
    return f"results/{wildcards.sample}/reads/shards/{wildcards.sample}.{wildcards.shard}.{fmt}"


def reference_fasta(wildcards):
    """The sample's reference as prepared under results/references/."""
    ref = SAMPLES[wildcards.sample].reference_name
    return f"results/references/{ref}/{ref}.fa"


def final_outputs():
    """The default target's files: per sample, the alignments, QC and methylation tables."""
    aligner = config["aligner"]
    out = []
    for s in SAMPLES:
        prefix = f"results/{s}"
        out += [
            f"{prefix}/align/{s}.{aligner}.bam.bai",
            f"{prefix}/align/{s}.{aligner}.stats.txt",
            f"{prefix}/align/{s}.{aligner}.summary.tsv",
            f"{prefix}/methylation/{s}.{aligner}.calls.tsv",
            f"{prefix}/methylation/{s}.{aligner}.frequency.tsv",
            f"{prefix}/methylation/{s}.{aligner}.bedmethyl.gz.tbi",
        ]
        if s in config["simulate"]:  # the truth is known: measure calling accuracy
            out.append(f"{prefix}/methylation/{s}.{aligner}.accuracy.tsv")
    return out


def aligner_index_files(wildcards):
    """Every file of the aligner's index for the sample's reference."""
    ref = SAMPLES[wildcards.sample].reference_name
    prefix = f"results/references/{ref}/{wildcards.aligner}/{ref}"
    return [prefix + suffix for suffix in INDEX_SUFFIXES[wildcards.aligner]]


def aligner_index(wildcards):
    """What the aligner is given as its index: minimap2's .mmi, or bwa's / bowtie2's prefix."""
    first = aligner_index_files(wildcards)[0]
    return (
        first
        if wildcards.aligner == "minimap2"
        else first.removesuffix(INDEX_SUFFIXES[wildcards.aligner][0])
    )


def io_processes(wildcards, threads):
    """FAST5 reader processes (conversion, fast5-pool): the host's io_processes, else threads."""
    return HOST.io_processes or threads


def signal_index_inputs(wildcards):
    """What nanopolish index reads the signal from: FAST5 folders, or the converted BLOW5."""
    if HOST.io_mode == "slow5":
        return [f"results/{wildcards.sample}/signal/{wildcards.sample}.blow5"]
    return fast5_inputs(wildcards)["dirs"]


def fast5_inputs(wildcards):
    """The sample's FAST5 folders for nanopolish index, plus single files (linked into a folder)."""
    # By name, not on disk: a simulated sample's folder does not exist before its rule runs.
    paths = SAMPLES[wildcards.sample].fast5
    files = [str(p) for p in paths if p.suffix == ".fast5"]
    dirs = [str(p) for p in paths if p.suffix != ".fast5"]
    if files:
        dirs.append(f"results/{wildcards.sample}/fast5_files")
    return {"files": files, "dirs": dirs}


def methylation_shard_inputs(wildcards):
    """What nanopolish needs for one shard: reads + their signal index, BAM shard, reference."""
    reads = staged_reads(wildcards)
    if config["scatter"]["methylation"] == 1:
        bam = f"results/{wildcards.sample}/align/{wildcards.sample}.{wildcards.aligner}.bam"
    else:
        bam = (
            f"results/{wildcards.sample}/methylation/shards/"
            f"{wildcards.sample}.{wildcards.aligner}.{wildcards.shard}.bam"
        )
    return {
        "reads": reads,
        "readdb": f"{reads}.index.readdb",
        "bam": bam,
        "bai": f"{bam}.bai",
        "genome": reference_fasta(wildcards),
        # Calling waits for the alignment check, so a wrong reference fails with its reason.
        "alignment_summary": (
            f"results/{wildcards.sample}/align/{wildcards.sample}.{wildcards.aligner}.summary.tsv"
        ),
    }


def report_rejected():
    """After a run: say per sample how many FAST5 files or reads the conversion left out."""
    for name in SAMPLES:
        listing = Path(f"results/{name}/signal/{name}.blow5.rejected.tsv")
        if listing.is_file():
            skipped = len(listing.read_text().splitlines()) - 1
            if skipped:
                logger.warning(
                    f"numapore: sample '{name}': {skipped} FAST5 files/reads skipped "
                    f"(on_bad_fast5: skip), listed with reasons in {listing}"
                )
