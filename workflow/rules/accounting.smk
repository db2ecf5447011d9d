# Read accounting: per sample and aligner, where every read went from the FAST5 files to the
# CpG calls, or for a modbam sample from the input's records to the modification calls
# (numapore.report.accounting); the job fails when the totals do not reconcile.


# The reads of FAST5 or POD5 inputs, from the files' layout: a job of its own, which runs
# beside nanopolish index (one thread) instead of after the calls.
rule signal_census:
    input:
        signal=lambda wc: [str(p) for p in SAMPLES[wc.sample].signal],
        reference=ask(jobs.reference_fasta, "sample"),  # checked first
    output:
        reads=layout.census(),
        files=layout.census(suffix=".files.tsv"),
    log:
        "results/logs/signal_census/{sample}.log",
    benchmark:
        "results/benchmarks/signal_census/{sample}.tsv"
    wildcard_constraints:
        sample=f"{PLAN.samples_with_signal_format('fast5')}|{PLAN.samples_with_signal_format('pod5')}",
    conda:
        "../../envs/python.yaml"
    # One thread reading every FAST5/POD5 file's layout: beside the alignment, as nanopolish
    # index (HOLDS_NO_CORE).
    threads: HOLDS_NO_CORE
    params:
        signal_format=lambda wc: SAMPLES[wc.sample].signal_format,
    script:
        "../../scripts/signal_census.py"


rule read_accounting:
    input:
        unpack(accounting_inputs),
    output:
        layout.accounting(),
    log:
        "results/logs/read_accounting/{sample}.{aligner}.log",
    benchmark:
        "results/benchmarks/read_accounting/{sample}.{aligner}.tsv"
    conda:
        "../../envs/python.yaml"
    # One thread reading the reads, the BAM and the calls: beside the steps after the calls,
    # which hold every core (HOLDS_NO_CORE). A modbam sample's reads the pileup's
    # read listing instead of the BAM, after the pileup.
    threads: HOLDS_NO_CORE
    params:
        signal=lambda wc: [str(p) for p in SAMPLES[wc.sample].signal],
        signal_format=lambda wc: SAMPLES[wc.sample].signal_format,
        kind=lambda wc: SAMPLES[wc.sample].kind,
        source=lambda wc: str(SAMPLES[wc.sample].reads),
        min_mapq=config["methylation"]["min_mapping_quality"],
    script:
        "../../scripts/read_accounting.py"
