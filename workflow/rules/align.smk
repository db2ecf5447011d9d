# Alignment with the aligner chosen in config: one job per read shard, merged into one sorted,
# indexed BAM per sample (not scattered: the align job makes that BAM itself); then QC. The
# aligner command (numapore.execution.tools) is run unchanged under the host's alignment strategy
# (numapore.execution.launch).


rule align:
    input:
        reads=reads_shard,
        reads2=reads2_shard,
        counted=counted_reads,
        index=ask(RunPlan.aligner_index_files, "sample", "aligner"),
        tuning=tuned_strategy_record("alignment"),
    output:
        **(layout.sample_bam_outputs() if ONE_ALIGN_SHARD else {"bam": temp(layout.bam_shard())}),
    log:
        main=f"results/logs/align/{{sample}}.{{aligner}}.{ALIGN_SHARD}.log",
        record=f"results/logs/align/{{sample}}.{{aligner}}.{ALIGN_SHARD}.run.json",
    benchmark:
        f"results/benchmarks/align/{{sample}}.{{aligner}}.{ALIGN_SHARD}.tsv"
    conda:
        "../../envs/{aligner}.yaml"
    threads: RUN_CORES
    # On a cluster (profiles/slurm): the whole node when the host's strategy uses every NUMA node.
    resources:
        cpus_per_task=cluster_cpus("alignment"),
        slurm_extra=cluster_node("alignment"),
    params:
        **PLAN.host_overrides("strategy.alignment"),
        **tuned_strategy_params("alignment"),
        index=ask(jobs.aligner_index, "sample", "aligner"),
        host=HOST_FILE,
        reference=lambda wc: str(SAMPLES[wc.sample].reference),
        kind=lambda wc: SAMPLES[wc.sample].kind,
        rewrites_sorted_bam=kind_param("rewrites_sorted_bam"),
        duplicates=ask(RunPlan.marks_duplicates, "sample"),
        reads=lambda wc: str(SAMPLES[wc.sample].reads),
        minimap2_preset=lambda wc: PLAN.minimap2_preset(SAMPLES[wc.sample]),
        batch=ask(RunPlan.bwa_batch, "sample"),
    script:
        "../../scripts/align.py"


# The sample's BAM is finished by the job that makes it (numapore.execution.shards.
# finish_sample_bam): its index and samtools flagstat (JSON), side by side, and the alignment
# check (numapore.inputs.readids.alignment_summary: reads in, primary alignments mapped; the run
# stops here when none mapped or the reads repeat a read id, before methylation calling). Tiny
# jobs of their own would each cost a Snakemake job of ~0.5-1 s around < 0.1 s of samtools. Only
# a scattered alignment has this merge job (ruleorder below); otherwise the align job does it
# (ONE_ALIGN_SHARD).
rule merge_alignment_shards:
    input:
        shards=lambda wc: expand(
            layout.bam_shard(),
            shard=PLAN.shard_ids("alignment"),
            **wc,
        ),
        counted=counted_reads,
    output:
        **layout.sample_bam_outputs(),
    log:
        "results/logs/merge_alignment_shards/{sample}.{aligner}.log",
    benchmark:
        "results/benchmarks/merge_alignment_shards/{sample}.{aligner}.tsv"
    conda:
        "../../envs/python.yaml"
    threads: RUN_CORES
    params:
        reference=lambda wc: str(SAMPLES[wc.sample].reference),
        kind=lambda wc: SAMPLES[wc.sample].kind,
        paired=lambda wc: SAMPLES[wc.sample].paired,
        rewrites_sorted_bam=kind_param("rewrites_sorted_bam"),
        duplicates=ask(RunPlan.marks_duplicates, "sample"),
        reads=lambda wc: str(SAMPLES[wc.sample].reads),
    script:
        "../../scripts/merge_alignment_shards.py"


# The reports only MultiQC and the report read: samtools flagstat (text) and stats. stats reads
# every base (on long reads about a tenth of the alignment's time), so it is a job of its own
# that holds no core: it runs beside the calls or the pileup, which wait for none of it. A
# short sample has no later step: its reports take the run's cores (alignment_reports_threads).
rule alignment_reports:
    input:
        layout.bam(suffix=".bam"),
    output:
        flagstat_text=layout.bam(suffix=".flagstat.txt"),
        stats=layout.bam(suffix=".stats.txt"),
    log:
        "results/logs/alignment_reports/{sample}.{aligner}.log",
    benchmark:
        "results/benchmarks/alignment_reports/{sample}.{aligner}.tsv"
    conda:
        "../../envs/python.yaml"
    threads: alignment_reports_threads
    script:
        "../../scripts/alignment_reports.py"


# Other BAMs: the methylation shards' and the comparison's subsets (the sample's BAM and the
# modBAM are indexed by the jobs that make them). The index is written under a hidden name and
# renamed, so it is complete or absent.
rule index_bam:
    input:
        "{prefix}.bam",
    output:
        "{prefix}.bam.bai",
    log:
        "results/logs/index_bam/{prefix}.log",
    benchmark:
        "results/benchmarks/index_bam/{prefix}.tsv"
    conda:
        "../../envs/samtools.yaml"
    threads: RUN_CORES
    params:
        tmp=hidden_temp,
    shell:
        "samtools index -@ {threads} {input} {params.tmp} 2> {log} && mv {params.tmp} {output}"


ruleorder: align > merge_alignment_shards > haplotag > index_bam


# A sample with a phased VCF (the sheet's phased_vcf): WhatsHap tags its aligned reads by
# haplotype (HP, PS; supplementary records as their primary), and the pileup reads this BAM.
# The VCF's contigs were checked against the reference by the staging job, before the alignment.
rule haplotag:
    input:
        bam=layout.bam(suffix=".bam"),
        bai=layout.bam(suffix=".bam.bai"),
        vcf=lambda wc: str(SAMPLES[wc.sample].phased_vcf),
        reference=ask(jobs.reference_fasta, "sample"),
        fai=lambda wc: f"{jobs.reference_fasta(PLAN, wc.sample)}.fai",
    output:
        bam=layout.bam(suffix=".haplotagged.bam"),
        bai=layout.bam(suffix=".haplotagged.bam.bai"),
    log:
        "results/logs/haplotag/{sample}.{aligner}.log",
    benchmark:
        "results/benchmarks/haplotag/{sample}.{aligner}.tsv"
    wildcard_constraints:
        sample=PLAN.samples_with_phased_vcf(),
    conda:
        "../../envs/whatshap.yaml"
    threads: 1
    params:
        vcf_sample=lambda wc: vcf_sample(
            SAMPLES[wc.sample].phased_vcf, wc.sample, f"sample '{wc.sample}'"
        ),
    script:
        "../../scripts/haplotag.py"
