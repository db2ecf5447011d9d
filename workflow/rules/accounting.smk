# Read accounting: per sample and aligner, where every read went from the FAST5 files to the
# CpG calls (numapore.run.accounting); the job fails when the totals do not reconcile.


rule read_accounting:
    input:
        unpack(accounting_inputs),
    output:
        "results/{sample}/{sample}.{aligner}.accounting.tsv",
    log:
        "results/logs/read_accounting/{sample}.{aligner}.log",
    benchmark:
        "results/benchmarks/read_accounting/{sample}.{aligner}.tsv"
    conda:
        "../../envs/python.yaml"
    params:
        signal=lambda wc: [str(p) for p in SAMPLES[wc.sample].signal],
        kind=lambda wc: SAMPLES[wc.sample].signal_kind,
        min_mapq=config["methylation"]["min_mapping_quality"],
    script:
        "../../scripts/read_accounting.py"
