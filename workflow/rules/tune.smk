# Host tuning (config tune: on; numapore.compare.tuning): before the heavy steps, the I/O
# modes that read the signal are measured on a slice of one raw-signal sample, and on a host of
# more than one NUMA node the alignment's strategies on its first reads (a sample of any kind)
# and nanopolish calling's under the chosen mode (numapore.compare.tune_strategy); the run uses
# the winners. A checkpoint: the inputs of the steps whose files depend on the I/O mode (the
# staged reads, the signal index, the calling) are known once it has run, or is found up to
# date (its params hold the cache key: another key, or tune=again, and it runs anew).


checkpoint tune_host:
    input:
        reads=lambda wc: str(SAMPLES[TUNE["sample"]].reads),
        reads2=lambda wc: SAMPLES[TUNE["sample"]].reads2 or [],
        signal=lambda wc: [str(p) for p in SAMPLES[TUNE["sample"]].signal],
        reference=lambda wc: jobs.reference_fasta(PLAN, TUNE["sample"]),
        index=lambda wc: PLAN.aligner_index_files(TUNE["sample"], PLAN.aligner),
    output:
        record=tuning.tuning_files(layout.TUNING, TUNING_NAME)["record"],
        host=tuning.tuning_files(layout.TUNING, TUNING_NAME)["host"],
    log:
        f"results/logs/tune_host/{TUNING_NAME}.log",
    benchmark:
        f"results/benchmarks/tune_host/{TUNING_NAME}.tsv"
    conda:
        "../../envs/compare.yaml"
    threads: RUN_CORES
    resources:
        # the node of the step it measures (a partition's whole node for NUMA strategies)
        cpus_per_task=cluster_cpus(TUNED_STEP),
        slurm_extra=cluster_node(TUNED_STEP),
    params:
        settings=lambda wc: TUNE["settings"],
        candidates=lambda wc: TUNE["candidates"],
        key=lambda wc: TUNE["key"],
        again=lambda wc: TUNE["again"],
        host=HOST_FILE,
        aligner=config["aligner"],
        index=lambda wc: jobs.aligner_index(PLAN, TUNE["sample"], PLAN.aligner),
        kind=lambda wc: SAMPLES[TUNE["sample"]].kind,
        sample=lambda wc: TUNE["sample"],
        min_mapq=config["methylation"]["min_mapping_quality"],
        io_processes=io_processes,
        # the sample's call jobs, each of which pays nanopolish's start (the estimates)
        call_jobs=config["scatter"]["methylation"],
        strategy_steps=lambda wc: TUNE["strategy_steps"],
        # the run's I/O mode when it is not tuned (the calling's strategies are measured in it)
        io_mode=PLAN.io_mode,
        strategies_why=lambda wc: TUNE["strategies_why"],
    script:
        "../../scripts/tune_host.py"


# Host tuning of the pileup (numapore.compare.tune_pileup): the pileup's split into regions and
# its threads measured on a window of the tuned sample's modBAM with the real engine; the
# pileup jobs follow the winner (common.smk's pileup_setting: their shards and threads).
checkpoint tune_pileup:
    input:
        bam=lambda wc: TUNE_PILEUP["bam"],
        bai=lambda wc: f"{TUNE_PILEUP['bam']}.bai",
        reference=lambda wc: jobs.reference_fasta(PLAN, TUNE_PILEUP["sample"]),
        host=tuning_plans.tuned_pileup_base(PLAN),
    output:
        record=tune_pileup.files(layout.TUNING, TUNING_NAME)["record"],
        host=tune_pileup.files(layout.TUNING, TUNING_NAME)["host"],
    log:
        f"results/logs/tune_pileup/{TUNING_NAME}.log",
    benchmark:
        f"results/benchmarks/tune_pileup/{TUNING_NAME}.tsv"
    conda:
        "../../envs/python.yaml"
    threads: RUN_CORES
    resources:
        cpus_per_task=cluster_cpus("methylation"),
        slurm_extra=cluster_node("methylation"),
    params:
        settings=lambda wc: TUNE_PILEUP["settings"],
        candidates=lambda wc: TUNE_PILEUP["candidates"],
        dropped=lambda wc: TUNE_PILEUP["dropped"],
        key=lambda wc: TUNE_PILEUP["key"],
        again=lambda wc: TUNE_PILEUP["again"],
        sample=lambda wc: TUNE_PILEUP["sample"],
        jobs=lambda wc: TUNE_PILEUP["jobs"],
        pileup=lambda wc: jobs.pileup_options(PLAN, TUNE_PILEUP["sample"], TUNE_PILEUP["motif"]),
    script:
        "../../scripts/tune_pileup_checkpoint.py"
