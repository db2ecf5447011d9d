# Simulated samples (config `simulate:`), made from a reference by numapore.simulate.reads with a
# known CpG methylation: raw R9.4 signal (kind signal), or the same molecules as an R10.4.1
# basecaller writes them, an unaligned modBAM with 5mC calls in MM/ML (kind modbam); and the
# accuracy of the calls (nanopolish's, or the realigned modBAM's and its pileup) against the truth.


rule simulate_reads:
    input:
        lambda wc: SAMPLES[wc.sample].reference,
    output:
        reads=layout.simulated(name="reads.fastq"),
        truth=layout.simulated(name="truth.tsv"),
        regions=layout.simulated(name="regions.bed"),
        fast5=directory(layout.simulated(name="fast5_multi")),
    log:
        "results/logs/simulate_reads/{sample}.log",
    benchmark:
        "results/benchmarks/simulate_reads/{sample}.tsv"
    wildcard_constraints:
        sample=PLAN.simulated_of_kind("signal"),
    conda:
        "../../envs/python.yaml"
    threads: RUN_CORES
    params:
        settings=lambda wc: config["simulate"][wc.sample],
        formats=["fastq", "truth", "multi", "regions"],
    script:
        "../../scripts/simulate_reads.py"


rule simulate_modbam_reads:
    input:
        lambda wc: SAMPLES[wc.sample].reference,
    output:
        reads=layout.simulated(name="reads.modbam.bam"),
        truth=layout.simulated(name="truth.tsv"),
        # the truth regions (DMRs between groups, allele-specific regions), header only if none
        regions=layout.simulated(name="regions.bed"),
    log:
        "results/logs/simulate_modbam_reads/{sample}.log",
    benchmark:
        "results/benchmarks/simulate_modbam_reads/{sample}.tsv"
    wildcard_constraints:
        sample=PLAN.simulated_of_kind("modbam"),
    conda:
        "../../envs/python.yaml"
    threads: RUN_CORES
    params:
        settings=lambda wc: config["simulate"][wc.sample],
        formats=["modbam", "truth", "regions"],
    script:
        "../../scripts/simulate_reads.py"


rule methylation_accuracy:
    input:
        unpack(ask(jobs.accuracy_inputs, "sample", "aligner")),
    output:
        layout.methylation(motif="cpg", suffix=".accuracy.tsv"),
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
