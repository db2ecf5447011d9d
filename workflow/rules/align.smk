# Alignment with the aligner chosen in config, one job per read shard, merged into one sorted,
# indexed BAM per sample; then QC. Each aligner rule is the plain tool command piped into
# samtools sort, so execution strategies can wrap it without changing it.


rule align_minimap2:
    input:
        reads=reads_shard,
        index=lambda wc: aligner_index(wc, "minimap2", ".map-ont.mmi"),
    output:
        temp("results/{sample}/align/shards/{sample}.minimap2.{shard}.bam"),
    log:
        "results/logs/align_minimap2/{sample}.{shard}.log",
    benchmark:
        "results/benchmarks/align_minimap2/{sample}.{shard}.tsv"
    conda:
        "../../envs/minimap2.yaml"
    shell:
        "(minimap2 -ax map-ont -t {threads} {input.index} {input.reads}"
        " | samtools sort -@ {threads} -o {output} -) 2> {log}"


rule align_bwa:
    input:
        reads=reads_shard,
        index=lambda wc: aligner_index(wc, "bwa", ".amb"),
    output:
        temp("results/{sample}/align/shards/{sample}.bwa.{shard}.bam"),
    log:
        "results/logs/align_bwa/{sample}.{shard}.log",
    benchmark:
        "results/benchmarks/align_bwa/{sample}.{shard}.tsv"
    conda:
        "../../envs/bwa.yaml"
    params:
        prefix=lambda wc, input: input.index.removesuffix(".amb"),
    shell:
        "(bwa mem -x ont2d -t {threads} {params.prefix} {input.reads}"
        " | samtools sort -@ {threads} -o {output} -) 2> {log}"


rule align_bowtie2:
    input:
        reads=reads_shard,
        index=lambda wc: aligner_index(wc, "bowtie2", ".1.bt2"),
    output:
        temp("results/{sample}/align/shards/{sample}.bowtie2.{shard}.bam"),
    log:
        "results/logs/align_bowtie2/{sample}.{shard}.log",
    benchmark:
        "results/benchmarks/align_bowtie2/{sample}.{shard}.tsv"
    conda:
        "../../envs/bowtie2.yaml"
    params:
        prefix=lambda wc, input: input.index.removesuffix(".1.bt2"),
        # bowtie2 reads FASTQ unless told the reads are FASTA.
        format=lambda wc: "-f" if SAMPLES[wc.sample].reads_format.startswith("fasta") else "-q",
    shell:
        "(bowtie2 --local -p {threads} -x {params.prefix} {params.format} -U {input.reads}"
        " | samtools sort -@ {threads} -o {output} -) 2> {log}"


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
        "../../envs/samtools.yaml"
    script:
        "../../scripts/merge_bams.py"


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
    conda:
        "../../envs/samtools.yaml"
    shell:
        "samtools flagstat -@ {threads} -O json {input} > {output} 2> {log}"


rule alignment_stats:
    input:
        "results/{sample}/align/{sample}.{aligner}.bam",
    output:
        "results/{sample}/align/{sample}.{aligner}.stats.txt",
    log:
        "results/logs/alignment_stats/{sample}.{aligner}.log",
    benchmark:
        "results/benchmarks/alignment_stats/{sample}.{aligner}.tsv"
    conda:
        "../../envs/samtools.yaml"
    shell:
        "samtools stats -@ {threads} {input} > {output} 2> {log}"


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
