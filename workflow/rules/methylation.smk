# Methylation: nanopolish indexes the raw signal (FAST5, or BLOW5 converted from it in I/O mode
# slow5) against the reads, calls methylation per read (one job per shard of alignments, merged
# in shard order) under the host's strategy and I/O mode, then per-site frequencies, bedMethyl
# and a modBAM. Every motif of methylation.motifs is the {motif} wildcard of the same rules.


# The BLOW5 of I/O mode slow5 comes from one rule per raw signal format (the sample's format
# picks it: samples_with_signal_format).
rule fast5_to_blow5:
    input:
        signal=lambda wc: [str(p) for p in SAMPLES[wc.sample].signal],
        reference=ask(jobs.reference_fasta, "sample"),  # checked first
    output:
        blow5=layout.blow5(),
        index=layout.blow5(suffix=".idx"),
        rejected=layout.blow5(suffix=".rejected.tsv"),
    log:
        "results/logs/fast5_to_blow5/{sample}.log",
    benchmark:
        "results/benchmarks/fast5_to_blow5/{sample}.tsv"
    wildcard_constraints:
        sample=PLAN.samples_with_signal_format("fast5"),
    conda:
        "../../envs/python.yaml"
    threads: RUN_CORES
    params:
        record_compression=config["slow5"]["record_compression"],
        signal_compression=config["slow5"]["signal_compression"],
        on_bad_fast5=config["on_bad_fast5"],
        processes=io_processes,
    script:
        "../../scripts/fast5_to_blow5.py"


rule pod5_to_blow5:
    input:
        signal=lambda wc: [str(p) for p in SAMPLES[wc.sample].signal],
        reference=ask(jobs.reference_fasta, "sample"),  # checked first
    output:
        blow5=layout.blow5(),
        index=layout.blow5(suffix=".idx"),
        rejected=layout.blow5(suffix=".rejected.tsv"),
    log:
        "results/logs/pod5_to_blow5/{sample}.log",
    benchmark:
        "results/benchmarks/pod5_to_blow5/{sample}.tsv"
    wildcard_constraints:
        sample=PLAN.samples_with_signal_format("pod5"),
    conda:
        "../../envs/python.yaml"
    threads: RUN_CORES
    params:
        signal_format="pod5",
        record_compression=config["slow5"]["record_compression"],
        signal_compression=config["slow5"]["signal_compression"],
        processes=io_processes,
    script:
        "../../scripts/signal_to_blow5.py"


# A BLOW5 input is used as it is: checked, linked and indexed (when no .idx is beside it).
rule link_blow5:
    input:
        signal=lambda wc: [str(p) for p in SAMPLES[wc.sample].signal],
        reference=ask(jobs.reference_fasta, "sample"),  # checked first
    output:
        blow5=layout.blow5(),
        index=layout.blow5(suffix=".idx"),
        rejected=layout.blow5(suffix=".rejected.tsv"),
    log:
        "results/logs/link_blow5/{sample}.log",
    benchmark:
        "results/benchmarks/link_blow5/{sample}.tsv"
    wildcard_constraints:
        sample=PLAN.samples_with_signal_format("blow5"),
    conda:
        "../../envs/python.yaml"
    params:
        signal_format="blow5",
    script:
        "../../scripts/signal_to_blow5.py"


rule link_fast5_files:
    input:
        signal=lambda wc: jobs.fast5_inputs(PLAN, wc.sample)["files"],
        reference=ask(jobs.reference_fasta, "sample"),  # checked first
    output:
        directory(layout.fast5_links()),
    log:
        "results/logs/link_fast5_files/{sample}.log",
    benchmark:
        "results/benchmarks/link_fast5_files/{sample}.tsv"
    conda:
        "../../envs/python.yaml"
    script:
        "../../scripts/link_fast5_files.py"


rule nanopolish_index:
    input:
        reads=layout.staged_reads(),
        signal=ask(jobs.signal_index_inputs, "sample", "signal"),
    output:
        multiext(
            layout.staged_reads(),
            ".index",
            ".index.fai",
            ".index.gzi",
            ".index.readdb",
        ),
    log:
        "results/logs/nanopolish_index/{sample}.{signal}.{fmt}.log",
    benchmark:
        "results/benchmarks/nanopolish_index/{sample}.{signal}.{fmt}.tsv"
    conda:
        "../../envs/nanopolish.yaml"
    # One thread, mostly reading (the reads, then every FAST5): beside the alignment, holding no
    # core (HOLDS_NO_CORE).
    threads: HOLDS_NO_CORE
    params:
        reads=lambda wc: str(SAMPLES[wc.sample].reads),
        signal=lambda wc: ", ".join(str(p) for p in SAMPLES[wc.sample].signal),
    # A script, not shell: a damaged BLOW5 is checked first, so the error gives the reason; and
    # nanopolish writes beside a link to the reads in a scratch folder, whose files are renamed
    # into place once complete (no shadow folder: it costs a second Snakemake process per job).
    script:
        "../../scripts/nanopolish_index.py"


rule split_alignments:
    input:
        bam=layout.bam(suffix=".bam"),
        bai=layout.bam(suffix=".bam.bai"),
    output:
        temp(
            expand(
                layout.methylation_shard(motif=None, suffix=".bam"),
                shard=PLAN.shard_ids("methylation"),
                allow_missing=True,
            )
        ),
    log:
        "results/logs/split_alignments/{sample}.{aligner}.log",
    benchmark:
        "results/benchmarks/split_alignments/{sample}.{aligner}.tsv"
    conda:
        "../../envs/python.yaml"
    script:
        "../../scripts/split_alignments.py"


rule call_methylation:
    input:
        unpack(methylation_shard_inputs),
        strategy_tuning=tuned_strategy_record("methylation"),
    output:
        (
            layout.methylation(suffix=".calls.tsv")
            if ONE_CALL_SHARD
            else temp(layout.methylation_shard(suffix=".calls.tsv"))
        ),
    log:
        main=f"results/logs/call_methylation/{{sample}}.{{aligner}}.{{motif}}.{CALL_SHARD}.log",
        record=(
            f"results/logs/call_methylation/{{sample}}.{{aligner}}.{{motif}}.{CALL_SHARD}.run.json"
        ),
    benchmark:
        f"results/benchmarks/call_methylation/{{sample}}.{{aligner}}.{{motif}}.{CALL_SHARD}.tsv"
    conda:
        "../../envs/nanopolish.yaml"
    threads: RUN_CORES
    # On a cluster (profiles/slurm): the whole node when the host's strategy uses every NUMA node.
    resources:
        cpus_per_task=cluster_cpus("methylation"),
        slurm_extra=cluster_node("methylation"),
    params:
        **PLAN.host_overrides("io_mode", "strategy.methylation"),
        **tuned_strategy_params("methylation"),
        min_mapq=config["methylation"]["min_mapping_quality"],
        host=HOST_FILE,
        io_mode=lambda wc: run_io_mode(),
        # the tuning record whose choice io_mode is (config tune), into the job's run record
        tuning=lambda wc: TUNE["files"]["record"] if TUNE else "",
        io_processes=io_processes,
    script:
        "../../scripts/call_methylation.py"


# Only when the calling is scattered (ONE_CALL_SHARD: else call_methylation makes the table).
rule merge_methylation_calls:
    input:
        lambda wc: expand(
            layout.methylation_shard(suffix=".calls.tsv"),
            shard=PLAN.shard_ids("methylation"),
            **wc,
        ),
    output:
        layout.methylation(suffix=".calls.tsv"),
    log:
        "results/logs/merge_methylation_calls/{sample}.{aligner}.{motif}.log",
    benchmark:
        "results/benchmarks/merge_methylation_calls/{sample}.{aligner}.{motif}.tsv"
    conda:
        "../../envs/python.yaml"
    script:
        "../../scripts/merge_methylation_calls.py"


ruleorder: call_methylation > merge_methylation_calls


rule methylation_frequency:
    input:
        layout.methylation(suffix=".calls.tsv"),
    output:
        tsv=layout.methylation(suffix=".frequency.tsv"),
    log:
        "results/logs/methylation_frequency/{sample}.{aligner}.{motif}.log",
    benchmark:
        "results/benchmarks/methylation_frequency/{sample}.{aligner}.{motif}.tsv"
    wildcard_constraints:
        sample=PLAN.samples_running("call_methylation"),
    conda:
        "../../envs/python.yaml"
    params:
        threshold=config["methylation"]["call_threshold"],
        split_groups=config["methylation"]["split_groups"],
    script:
        "../../scripts/methylation_frequency.py"


# The alignments with MM/ML tags from the calls (nanopolish runs once), sorted and indexed:
# one modBAM per motif, since CpG, GpC and dcm would all be C+m tags in one file.
rule methylation_modbam:
    input:
        bam=layout.bam(suffix=".bam"),
        calls=layout.methylation(suffix=".calls.tsv"),
    output:
        bam=layout.methylation(suffix=".modbam.bam"),
        bai=layout.methylation(suffix=".modbam.bam.bai"),
    log:
        "results/logs/methylation_modbam/{sample}.{aligner}.{motif}.log",
    benchmark:
        "results/benchmarks/methylation_modbam/{sample}.{aligner}.{motif}.tsv"
    # First of the three jobs on the calls (the longest): on 2 cores the frequency and the
    # accounting then run one after the other beside it, not the modBAM after the frequency.
    priority: 1
    conda:
        "../../envs/python.yaml"
    # Half the cores: the tagging is one Python process (the threads are samtools sort's), and
    # the frequency and the accounting, one core each, run beside it on the same calls.
    threads: max(1, RUN_CORES // 2)
    script:
        "../../scripts/methylation_modbam.py"


ruleorder: methylation_modbam > index_bam


# The pileup of a modBAM into bedMethyl (numapore pileup, modkit 0.6.1's semantics, 0.4.4's with
# pileup.modkit: "0.4"; config pileup:): every sample's bedMethyl. A modbam sample's aligned BAM
# is its modBAM (the basecaller's calls, realigned); a signal sample's is the modBAM made from
# nanopolish's calls.
rule pileup:
    input:
        unpack(pileup_inputs),
    output:
        bed=layout.methylation(suffix=".bedmethyl.gz"),
        tbi=layout.methylation(suffix=".bedmethyl.gz.tbi"),
        # Each mapped primary record once: what the read accounting reads of a modbam sample
        reads=temp(layout.methylation(suffix=".pileup_reads.tsv")),
        # The pass thresholds it used (the QC of the calls shows them)
        thresholds=layout.pileup_thresholds(),
    log:
        "results/logs/pileup/{sample}.{aligner}.{motif}.log",
    benchmark:
        "results/benchmarks/pileup/{sample}.{aligner}.{motif}.tsv"
    wildcard_constraints:
        sample=PLAN.samples_running("pileup"),
    conda:
        "../../envs/python.yaml"
    threads: pileup_threads
    params:
        options=ask(jobs.pileup_options, "sample", "motif"),
    script:
        "../../scripts/pileup_bedmethyl.py"


# pileup.phased: the bedMethyl of the records with HP:i:1 and of those with HP:i:2, as modkit
# 0.6.1's pileup --phased writes its hp1 and hp2 files (the combined one is rule pileup's), each
# bgzipped and indexed. One job, never scattered.
rule pileup_haplotypes:
    input:
        unpack(haplotype_pileup_inputs),
    output:
        hp1=layout.methylation(suffix=".hp1.bedmethyl.gz"),
        hp1_tbi=layout.methylation(suffix=".hp1.bedmethyl.gz.tbi"),
        hp2=layout.methylation(suffix=".hp2.bedmethyl.gz"),
        hp2_tbi=layout.methylation(suffix=".hp2.bedmethyl.gz.tbi"),
    log:
        "results/logs/pileup_haplotypes/{sample}.{aligner}.{motif}.log",
    benchmark:
        "results/benchmarks/pileup_haplotypes/{sample}.{aligner}.{motif}.tsv"
    wildcard_constraints:
        sample=PLAN.samples_running("pileup"),
    conda:
        "../../envs/python.yaml"
    threads: RUN_CORES
    params:
        options=ask(jobs.pileup_options, "sample", "motif"),
    script:
        "../../scripts/pileup_haplotypes.py"


# A share of the pileup (scatter.pileup > 1, or the host file's or the tuning's pileup regions:
# common.smk's pileup_setting): the rows of consecutive regions of the genome
# (numapore.pileup.cli.shard_regions); rule pileup concatenates them in order.
rule pileup_shard:
    input:
        unpack(pileup_inputs),
    output:
        text=temp(layout.methylation_shard(suffix=".bed")),
        reads=temp(layout.methylation_shard(suffix=".pileup_reads.tsv")),
        thresholds=temp(layout.methylation_shard(suffix=".pileup_thresholds.json")),
    log:
        "results/logs/pileup_shard/{sample}.{aligner}.{motif}.{shard}.log",
    benchmark:
        "results/benchmarks/pileup_shard/{sample}.{aligner}.{motif}.{shard}.tsv"
    wildcard_constraints:
        sample=PLAN.samples_running("pileup"),
    conda:
        "../../envs/python.yaml"
    threads: pileup_threads
    params:
        options=ask(jobs.pileup_options, "sample", "motif"),
    script:
        "../../scripts/pileup_bedmethyl.py"


# The cohort table: per reference and motif, every sample's bedMethyl as one table of sites x
# samples (numapore.methylation.cohort): columns 1-18 what `modkit bedmethyl merge` writes from
# the same files (counts summed), then each sample's valid coverage and modified count; the
# sites kept as config cohort: says; beside it, each sample's sites read and kept.
rule cohort_table:
    input:
        unpack(ask(jobs.cohort_inputs, "ref", "aligner", "motif")),
    output:
        table=layout.cohort_table(),
        tbi=layout.cohort_table(suffix=".tbi"),
        samples=layout.cohort_samples(),
    log:
        "results/logs/cohort_table/{ref}.{aligner}.{motif}.log",
    benchmark:
        "results/benchmarks/cohort_table/{ref}.{aligner}.{motif}.tsv"
    conda:
        "../../envs/python.yaml"
    params:
        samples=lambda wc: PLAN.cohort_samples(wc.ref, wc.motif),
        groups=lambda wc: {s: SAMPLES[s].group for s in PLAN.cohort_samples(wc.ref, wc.motif)},
        filters=lambda wc: PLAN.cohort_filters(wc.ref, wc.motif),
    script:
        "../../scripts/cohort_table.py"


# bigWig tracks of the bedMethyl (config tracks:): per sample, motif and code set, and per
# haplotype with pileup.phased; the values modkit's `bedmethyl tobigwig` writes
# (numapore.modbam.tobigwig), the chromosome sizes from the reference's index.
rule bigwig_track:
    input:
        unpack(ask(jobs.track_inputs, "sample", "aligner", "motif", "part")),
    output:
        layout.track(),
    log:
        "results/logs/bigwig_track/{sample}.{aligner}.{motif}.{part}.{codes}.log",
    benchmark:
        "results/benchmarks/bigwig_track/{sample}.{aligner}.{motif}.{part}.{codes}.tsv"
    conda:
        "../../envs/python.yaml"
    params:
        arguments=ask(jobs.track_arguments, "codes"),
    script:
        "../../scripts/bigwig_track.py"


# One IGV session per reference: its FASTA and every sample's tracks (numapore.report.tracks).
rule igv_session:
    input:
        tracks=lambda wc: PLAN.reference_tracks(wc.ref),
        fasta=layout.reference_fasta(),
        fai=f"{layout.reference_fasta()}.fai",
    output:
        layout.igv_session(),
    log:
        "results/logs/igv_session/{ref}.log",
    benchmark:
        "results/benchmarks/igv_session/{ref}.tsv"
    conda:
        "../../envs/python.yaml"
    script:
        "../../scripts/igv_session.py"
