# CpG methylation: nanopolish indexes the raw signal against the reads, calls methylation per
# read (one job per shard of alignments, merged in shard order), then per-site frequencies.


rule link_fast5_files:
    input:
        lambda wc: fast5_inputs(wc)["files"],
    output:
        directory("results/{sample}/fast5_files"),
    log:
        "results/logs/link_fast5_files/{sample}.log",
    benchmark:
        "results/benchmarks/link_fast5_files/{sample}.tsv"
    conda:
        "../../envs/python.yaml"
    shell:
        "(mkdir -p {output} && ln -s $(realpath {input}) {output}/) 2> {log}"


rule nanopolish_index:
    input:
        reads=staged_reads,
        fast5=lambda wc: fast5_inputs(wc)["dirs"],
    output:
        multiext(
            "results/{sample}/reads/{sample}.{fmt}",
            ".index",
            ".index.fai",
            ".index.gzi",
            ".index.readdb",
        ),
    log:
        "results/logs/nanopolish_index/{sample}.{fmt}.log",
    benchmark:
        "results/benchmarks/nanopolish_index/{sample}.{fmt}.tsv"
    conda:
        "../../envs/nanopolish.yaml"
    params:
        dirs=lambda wc, input: " ".join(f"-d {d}" for d in input.fast5),
    shell:
        "nanopolish index {params.dirs} {input.reads} > {log} 2>&1"


rule split_alignments:
    input:
        bam="results/{sample}/align/{sample}.{aligner}.bam",
        bai="results/{sample}/align/{sample}.{aligner}.bam.bai",
    output:
        temp(
            expand(
                "results/{{sample}}/methylation/shards/{{sample}}.{{aligner}}.{shard}.bam",
                shard=shard_ids("methylation"),
            )
        ),
    log:
        "results/logs/split_alignments/{sample}.{aligner}.log",
    benchmark:
        "results/benchmarks/split_alignments/{sample}.{aligner}.tsv"
    conda:
        "../../envs/python.yaml"
    script:
        "../../scripts/split_bam_by_read.py"


rule call_methylation:
    input:
        unpack(methylation_shard_inputs),
    output:
        temp("results/{sample}/methylation/shards/{sample}.{aligner}.{shard}.calls.tsv"),
    log:
        "results/logs/call_methylation/{sample}.{aligner}.{shard}.log",
    benchmark:
        "results/benchmarks/call_methylation/{sample}.{aligner}.{shard}.tsv"
    conda:
        "../../envs/nanopolish.yaml"
    params:
        min_mapq=config["methylation"]["min_mapping_quality"],
    shell:
        "nanopolish call-methylation --progress -q cpg -t {threads}"
        " --min-mapping-quality {params.min_mapq}"
        " -r {input.reads} -b {input.bam} -g {input.genome} > {output} 2> {log}"


rule merge_methylation_calls:
    input:
        lambda wc: expand(
            "results/{sample}/methylation/shards/{sample}.{aligner}.{shard}.calls.tsv",
            shard=shard_ids("methylation"),
            **wc,
        ),
    output:
        "results/{sample}/methylation/{sample}.{aligner}.calls.tsv",
    log:
        "results/logs/merge_methylation_calls/{sample}.{aligner}.log",
    benchmark:
        "results/benchmarks/merge_methylation_calls/{sample}.{aligner}.tsv"
    conda:
        "../../envs/python.yaml"
    script:
        "../../scripts/merge_call_tables.py"


rule methylation_frequency:
    input:
        "results/{sample}/methylation/{sample}.{aligner}.calls.tsv",
    output:
        tsv="results/{sample}/methylation/{sample}.{aligner}.frequency.tsv",
        bed="results/{sample}/methylation/{sample}.{aligner}.bedmethyl.gz",
        tbi="results/{sample}/methylation/{sample}.{aligner}.bedmethyl.gz.tbi",
    log:
        "results/logs/methylation_frequency/{sample}.{aligner}.log",
    benchmark:
        "results/benchmarks/methylation_frequency/{sample}.{aligner}.tsv"
    conda:
        "../../envs/python.yaml"
    params:
        threshold=config["methylation"]["call_threshold"],
        split_groups=config["methylation"]["split_groups"],
    script:
        "../../scripts/methylation_frequency.py"
