# Basecalled reads: checked once (numapore.inputs.seqcheck), staged under results/ (a link, or a tidied
# copy when the tools need one; nanopolish writes its read index beside it,
# one staging per signal kind, fast5 or blow5, as the index names where each read's signal is)
# and, when the alignment step is scattered, split into shards by read.


rule stage_reads:
    input:
        lambda wc: SAMPLES[wc.sample].reads,
        reference=ask(jobs.reference_fasta, "sample"),  # checked first
    output:
        layout.staged_reads(),
    log:
        "results/logs/stage_reads/{sample}.{signal}.{fmt}.log",
    benchmark:
        "results/benchmarks/stage_reads/{sample}.{signal}.{fmt}.tsv"
    conda:
        "../../envs/python.yaml"
    script:
        "../../scripts/stage_reads.py"


# Short reads (kind short): each file checked like the reads above, and the two files of pairs
# side by side (as many records, each R2 record the mate of its R1 record), then staged.
rule stage_short_reads:
    input:
        unpack(ask(jobs.short_reads_input, "sample")),
    output:
        reads=layout.staged_reads(kind="single"),
    log:
        "results/logs/stage_short_reads/{sample}.{fmt}.log",
    benchmark:
        "results/benchmarks/stage_short_reads/{sample}.{fmt}.tsv"
    conda:
        "../../envs/python.yaml"
    script:
        "../../scripts/stage_short_reads.py"


rule stage_paired_reads:
    input:
        unpack(ask(jobs.short_reads_input, "sample")),
    output:
        reads=layout.paired_reads(),
        reads2=layout.paired_reads(mate=2),
    log:
        "results/logs/stage_paired_reads/{sample}.{fmt}.log",
    benchmark:
        "results/benchmarks/stage_paired_reads/{sample}.{fmt}.tsv"
    conda:
        "../../envs/python.yaml"
    script:
        "../../scripts/stage_short_reads.py"


rule split_reads:
    input:
        staged_reads,
    output:
        temp(
            expand(
                layout.reads_shard(),
                shard=PLAN.shard_ids("alignment"),
                allow_missing=True,
            )
        ),
    log:
        "results/logs/split_reads/{sample}.{fmt}.log",
    benchmark:
        "results/benchmarks/split_reads/{sample}.{fmt}.tsv"
    conda:
        "../../envs/python.yaml"
    params:
        batch=ask(RunPlan.bwa_batch, "sample"),
    script:
        "../../scripts/split_reads.py"


# Pairs: R1 and R2 split in step (numapore.execution.shards.split_short_reads), shard i of R2
# holding the mates of shard i of R1, in consecutive shares of whole bwa batches.
rule split_paired_reads:
    input:
        reads=staged_reads,
        reads2=ask(jobs.staged_reads2, "sample"),
    output:
        reads=temp(
            expand(
                layout.reads_shard(mate=".1"),
                shard=PLAN.shard_ids("alignment"),
                allow_missing=True,
            )
        ),
        reads2=temp(
            expand(
                layout.reads_shard(mate=".2"),
                shard=PLAN.shard_ids("alignment"),
                allow_missing=True,
            )
        ),
    log:
        "results/logs/split_paired_reads/{sample}.{fmt}.log",
    benchmark:
        "results/benchmarks/split_paired_reads/{sample}.{fmt}.tsv"
    conda:
        "../../envs/python.yaml"
    params:
        batch=ask(RunPlan.bwa_batch, "sample"),
    script:
        "../../scripts/split_reads.py"


# A modBAM sample's reads (a basecaller's BAM/CRAM, or FASTQ with tags): its primary records as
# FASTQ whose headers carry MM/ML/MN, for the aligners to copy into their records
# (numapore.inputs.modbam_reads). When one align job reads them, they go to it through a named
# pipe, as `samtools fastq | minimap2` by hand: both jobs run together and the reads are never
# written (the plan's staging_streams); the job then holds no core beside the aligner's. The
# counts and the reads staged without calls (and why) go to the read accounting, with the reads'
# ids, which would otherwise take a second pass. The reference's index tells whether an aligned
# input was aligned to it.
rule stage_modbam_reads:
    input:
        reads=lambda wc: SAMPLES[wc.sample].reads,
        fai=lambda wc: f"{jobs.reference_fasta(PLAN, wc.sample)}.fai",
    output:
        reads=staged_modbam_reads_output(layout.modbam_staging(what="fastq")),
        untagged=layout.modbam_staging(what="untagged"),
        ids=layout.modbam_staging(what="ids"),
        counts=layout.staged_counts(),
    log:
        "results/logs/stage_modbam_reads/{sample}.log",
    benchmark:
        "results/benchmarks/stage_modbam_reads/{sample}.tsv"
    conda:
        "../../envs/python.yaml"
    threads: staging_threads
    params:
        reference=lambda wc: str(SAMPLES[wc.sample].reference),
        # checked here, before the alignment: the phased VCF's contigs against the reference;
        # with pileup.phased and no VCF, the reads must carry HP tags
        phased_vcf=lambda wc: str(SAMPLES[wc.sample].phased_vcf or ""),
        phased=config["pileup"]["phased"],
    script:
        "../../scripts/stage_modbam_reads.py"


# The comparison's cells read a modBAM sample's staged reads again and again: a file, staged for
# it alone when the sample's staging streams into its align job (the plan's staging_streams).
use rule stage_modbam_reads as stage_compared_modbam_reads with:
    output:
        reads=layout.compare_input("staged/{sample}.fastq"),
        untagged=layout.compare_input("staged/{sample}.untagged.tsv"),
        ids=layout.compare_input("staged/{sample}.ids.parquet"),
        counts=layout.compare_input("staged/{sample}.staged.tsv"),
    log:
        "results/logs/stage_compared_modbam_reads/{sample}.log",
    benchmark:
        "results/benchmarks/stage_compared_modbam_reads/{sample}.tsv"
    threads: RUN_CORES
