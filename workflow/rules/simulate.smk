# Simulated samples (config `simulate:`): raw R9.4 signal with known CpG methylation, made from
# a reference by numapore.simulate.reads, and the accuracy of nanopolish's calls against that truth.


rule simulate_reads:
    input:
        lambda wc: SAMPLES[wc.sample].reference,
    output:
        reads="results/simulated/{sample}/reads.fastq",
        truth="results/simulated/{sample}/truth.tsv",
        fast5=directory("results/simulated/{sample}/fast5_multi"),
    log:
        "results/logs/simulate_reads/{sample}.log",
    benchmark:
        "results/benchmarks/simulate_reads/{sample}.tsv"
    conda:
        "../../envs/python.yaml"
    threads: RUN_CORES
    params:
        settings=lambda wc: config["simulate"][wc.sample],
    script:
        "../../scripts/simulate_reads.py"


rule methylation_accuracy:
    input:
        calls="results/{sample}/methylation/{sample}.{aligner}.cpg.calls.tsv",
        truth="results/simulated/{sample}/truth.tsv",
    output:
        "results/{sample}/methylation/{sample}.{aligner}.cpg.accuracy.tsv",
    log:
        "results/logs/methylation_accuracy/{sample}.{aligner}.cpg.log",
    benchmark:
        "results/benchmarks/methylation_accuracy/{sample}.{aligner}.cpg.tsv"
    conda:
        "../../envs/python.yaml"
    params:
        threshold=config["methylation"]["call_threshold"],
    script:
        "../../scripts/methylation_accuracy.py"
