# Alignment with the aligner chosen in config, one job per read shard, merged into one sorted,
# indexed BAM per sample; then QC. The aligner command (numapore.execution.tools) is run unchanged under
# the host's alignment strategy (numapore.execution.launch).


rule align:
    input:
        reads=reads_shard,
        index=aligner_index_files,
    output:
        temp("results/{sample}/align/shards/{sample}.{aligner}.{shard}.bam"),
    log:
        main="results/logs/align/{sample}.{aligner}.{shard}.log",
        record="results/logs/align/{sample}.{aligner}.{shard}.run.json",
    benchmark:
        "results/benchmarks/align/{sample}.{aligner}.{shard}.tsv"
    conda:
        "../../envs/{aligner}.yaml"
    threads: RUN_CORES
    # On a cluster (profiles/slurm): the whole node when the host's strategy uses every NUMA node.
    resources:
        cpus_per_task=cluster_cpus("alignment"),
        slurm_extra=cluster_node("alignment"),
    params:
        index=aligner_index,
        host=HOST_FILE,
    script:
        "../../scripts/align.py"


rule merge_alignment_shards:
    input:
        lambda wc: expand(
            "results/{sample}/align/shards/{sample}.{aligner}.{shard}.bam",
            shard=shard_ids("alignment"),
            **wc,
        ),
    output:
        "results/{sample}/align/{sample}.{aligner}.bam",
    log:
        "results/logs/merge_alignment_shards/{sample}.{aligner}.log",
    benchmark:
        "results/benchmarks/merge_alignment_shards/{sample}.{aligner}.tsv"
    conda:
        "../../envs/python.yaml"
    threads: RUN_CORES
    script:
        "../../scripts/merge_alignment_shards.py"


rule index_bam:
    input:
        "{prefix}.bam",
    output:
        "{prefix}.bam.bai",
    log:
        "results/logs/index_bam/{prefix}.log",
    benchmark:
        "results/benchmarks/index_bam/{prefix}.tsv"
    # Run in a shadow folder: outputs are moved into place (a rename) only when complete.
    shadow:
        "minimal"
    conda:
        "../../envs/samtools.yaml"
    threads: RUN_CORES
    shell:
        "samtools index -@ {threads} {input} 2> {log}"


rule alignment_flagstat:
    input:
        "results/{sample}/align/{sample}.{aligner}.bam",
    output:
        "results/{sample}/align/{sample}.{aligner}.flagstat.json",
    log:
        "results/logs/alignment_flagstat/{sample}.{aligner}.log",
    benchmark:
        "results/benchmarks/alignment_flagstat/{sample}.{aligner}.tsv"
    # Run in a shadow folder: outputs are moved into place (a rename) only when complete.
    shadow:
        "minimal"
    conda:
        "../../envs/samtools.yaml"
    threads: RUN_CORES
    # samtools does not check its writes to stdout (exit 0, empty file on a full disk): cat does.
    shell:
        "samtools flagstat -@ {threads} -O json {input} 2> {log} | cat > {output}"


rule alignment_stats:
    input:
        "results/{sample}/align/{sample}.{aligner}.bam",
    output:
        "results/{sample}/align/{sample}.{aligner}.stats.txt",
    log:
        "results/logs/alignment_stats/{sample}.{aligner}.log",
    benchmark:
        "results/benchmarks/alignment_stats/{sample}.{aligner}.tsv"
    # Run in a shadow folder: outputs are moved into place (a rename) only when complete.
    shadow:
        "minimal"
    conda:
        "../../envs/samtools.yaml"
    threads: RUN_CORES
    # samtools does not check its writes to stdout (exit 0, empty file on a full disk): cat does.
    shell:
        "samtools stats -@ {threads} {input} 2> {log} | cat > {output}"


rule alignment_summary:
    input:
        flagstat="results/{sample}/align/{sample}.{aligner}.flagstat.json",
        reads=staged_reads,
    output:
        "results/{sample}/align/{sample}.{aligner}.summary.tsv",
    log:
        "results/logs/alignment_summary/{sample}.{aligner}.log",
    benchmark:
        "results/benchmarks/alignment_summary/{sample}.{aligner}.tsv"
    conda:
        "../../envs/python.yaml"
    params:
        reference=lambda wc: str(SAMPLES[wc.sample].reference),
    script:
        "../../scripts/alignment_summary.py"


rule alignment_flagstat_text:
    input:
        "results/{sample}/align/{sample}.{aligner}.bam",
    output:
        "results/{sample}/align/{sample}.{aligner}.flagstat.txt",
    log:
        "results/logs/alignment_flagstat_text/{sample}.{aligner}.log",
    benchmark:
        "results/benchmarks/alignment_flagstat_text/{sample}.{aligner}.tsv"
    # Run in a shadow folder: outputs are moved into place (a rename) only when complete.
    shadow:
        "minimal"
    conda:
        "../../envs/samtools.yaml"
    threads: RUN_CORES
    # The text form, which MultiQC's samtools module reads (it does not read the JSON one).
    shell:
        "samtools flagstat -@ {threads} {input} 2> {log} | cat > {output}"
