# Configuration and sample sheet: validated here, before any job starts, so that a bad input
# fails fast with one message naming the key or the file.
import sys
from pathlib import Path

from snakemake.utils import validate

sys.path.insert(0, str(Path(workflow.basedir).parent / "scripts"))
from numapore.samples import InputError, load_samples, read_sheet  # noqa: E402

validate(config, schema="../schemas/config.schema.yaml")

try:
    _sheet = Path(config["samples"])
    _table = read_sheet(_sheet)
    validate(_table, schema="../schemas/samples.schema.yaml")
    SAMPLES = load_samples(_table, _sheet, Path.cwd())
except InputError as err:
    raise WorkflowError(f"numapore: {err}")

ALIGNERS = ["minimap2", "bwa", "bowtie2"]
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
    return out


def aligner_index(wildcards, aligner, suffix):
    """The first file of the aligner's index for the sample's reference."""
    ref = SAMPLES[wildcards.sample].reference_name
    return f"results/references/{ref}/{aligner}/{ref}{suffix}"


def fast5_inputs(wildcards):
    """The sample's FAST5 folders for nanopolish index, plus single files (linked into a folder)."""
    paths = SAMPLES[wildcards.sample].fast5
    files = [str(p) for p in paths if p.is_file()]
    dirs = [str(p) for p in paths if p.is_dir()]
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
