# Basecalled reads: staged under results/ (a link; nanopolish writes its read index beside it)
# and, when the alignment step is scattered, split into shards by read.


rule stage_reads:
    input:
        lambda wc: SAMPLES[wc.sample].reads,
    output:
        "results/{sample}/reads/{sample}.{fmt}",
    log:
        "results/logs/stage_reads/{sample}.{fmt}.log",
    benchmark:
        "results/benchmarks/stage_reads/{sample}.{fmt}.tsv"
    conda:
        "../../envs/python.yaml"
    shell:
        "ln -sfn $(realpath {input}) {output} 2> {log}"


rule split_reads:
    input:
        staged_reads,
    output:
        temp(
            expand(
                "results/{{sample}}/reads/shards/{{sample}}.{shard}.{{fmt}}",
                shard=shard_ids("alignment"),
            )
        ),
    log:
        "results/logs/split_reads/{sample}.{fmt}.log",
    benchmark:
        "results/benchmarks/split_reads/{sample}.{fmt}.tsv"
    conda:
        "../../envs/python.yaml"
    script:
        "../../scripts/split_reads.py"
