# The strategy comparison, `snakemake --profile profiles/hpc-numa compare`: every cell of the
# matrix in config `compare:` (a heavy step with one aligner, strategy, I/O mode, thread count,
# repeat) is its own job, timed by Snakemake's benchmark and /usr/bin/time -v, one cell at a
# time in the matrix's seeded shuffled order; then the summary table, plots, report and a
# recommended host file in results/compare/.


rule compare:
    input:
        layout.compare_file("summary.tsv"),
        COMPARISON_REPORT,
        layout.compare_file("recommended-host.yaml"),
        layout.compare_file("time_vs_threads.png"),
        layout.compare_file("utilisation_core_hours.png"),
        layout.compare_file("io_modes.png"),


rule compare_subsample_reads:
    input:
        compared_staged_reads,
    output:
        layout.compare_input("{sample}.{fmt}"),
    log:
        "results/logs/compare_subsample_reads/{sample}.{fmt}.log",
    benchmark:
        "results/benchmarks/compare_subsample_reads/{sample}.{fmt}.tsv"
    conda:
        "../../envs/python.yaml"
    params:
        reads=config["compare"]["reads"],
    script:
        "../../scripts/compare_subsample.py"


# Pairs: the first compare.reads pairs, R1 and R2 read side by side (mates kept together).
rule compare_subsample_pairs:
    input:
        reads=staged_reads,
        reads2=ask(jobs.staged_reads2, "sample"),
    output:
        reads=layout.compare_input("{sample}.1.{fmt}"),
        reads2=layout.compare_input("{sample}.2.{fmt}"),
    log:
        "results/logs/compare_subsample_pairs/{sample}.{fmt}.log",
    benchmark:
        "results/benchmarks/compare_subsample_pairs/{sample}.{fmt}.tsv"
    conda:
        "../../envs/python.yaml"
    params:
        reads=config["compare"]["reads"],
    script:
        "../../scripts/compare_subsample.py"


rule compare_subsample_alignments:
    input:
        bam=layout.bam(suffix=".bam"),
        reads=lambda wc: compare_reads(),
    output:
        layout.compare_input("{sample}.{aligner}.bam"),
    log:
        "results/logs/compare_subsample_alignments/{sample}.{aligner}.log",
    benchmark:
        "results/benchmarks/compare_subsample_alignments/{sample}.{aligner}.tsv"
    conda:
        "../../envs/python.yaml"
    params:
        reads=config["compare"]["reads"],
    script:
        "../../scripts/compare_subsample.py"


rule compare_cell:
    input:
        unpack(compare_cell_inputs),
    output:
        record=layout.compare_cell(),
        time=layout.compare_cell(suffix=".time.txt"),
    log:
        "results/logs/compare_cell/{cell}.log",
    benchmark:
        "results/benchmarks/compare_cell/{cell}.tsv"
    # One cell at a time (`compare`: the run's limit is 1), in run order (priority).
    priority: cell_priority
    conda:
        "../../envs/compare.yaml"
    threads: lambda wc: Cell.parse(wc.cell).threads
    resources:
        compare=1,
    params:
        host=HOST_FILE,
        position=lambda wc: COMPARE_CELLS.index(wc.cell) + 1,
        cells=len(COMPARE_CELLS),
        seed=config["compare"]["seed"],
        index=lambda wc: jobs.aligner_index(
            PLAN, compare_sample().name, Cell.parse(wc.cell).aligner
        ),
        storage=config["compare"]["storage"],
        min_mapq=config["methylation"]["min_mapping_quality"],
        # The sample's kind and read group: its aligner preset, as the align job runs it.
        kind=lambda wc: compare_sample().kind,
        sample=lambda wc: compare_sample().name,
        duplicates=lambda wc: PLAN.marks_duplicates(compare_sample().name),
        batch=lambda wc: PLAN.bwa_batch(compare_sample().name),
    script:
        "../../scripts/compare_cell.py"


rule compare_summary:
    input:
        records=jobs.compare_cell_files(PLAN, "record"),
        times=jobs.compare_cell_files(PLAN, "time"),
        benchmarks=jobs.compare_cell_files(PLAN, "benchmark"),
    output:
        report(
            layout.compare_file("summary.tsv"),
            caption="../report/summary.rst",
            category="Strategy comparison",
            subcategory="Every cell",
            labels={"figure": "summary table"},
        ),
    log:
        "results/logs/compare_summary/summary.log",
    benchmark:
        "results/benchmarks/compare_summary/summary.tsv"
    conda:
        "../../envs/python.yaml"
    script:
        "../../scripts/compare_summary.py"


rule compare_plots:
    input:
        layout.compare_file("summary.tsv"),
    output:
        time=report(
            layout.compare_file("time_vs_threads.png"),
            caption="../report/time_vs_threads.rst",
            category="Strategy comparison",
            subcategory="Plots",
            labels={"figure": "time vs threads"},
        ),
        cost=report(
            layout.compare_file("utilisation_core_hours.png"),
            caption="../report/utilisation_core_hours.rst",
            category="Strategy comparison",
            subcategory="Plots",
            labels={"figure": "CPU utilisation and core-hours"},
        ),
        io=report(
            layout.compare_file("io_modes.png"),
            caption="../report/io_modes.rst",
            category="Strategy comparison",
            subcategory="Plots",
            labels={"figure": "I/O modes"},
        ),
        # What the plots show, series by series and point by point (colours, marks, bars).
        data=layout.compare_file("plots.data.json"),
    log:
        "results/logs/compare_plots/plots.log",
    benchmark:
        "results/benchmarks/compare_plots/plots.tsv"
    conda:
        "../../envs/python.yaml"
    script:
        "../../scripts/compare_plots.py"


rule compare_report:
    input:
        # Each aligner's index (index_<aligner>), its size set against the nodes' memory.
        unpack(compare_index_files),
        summary=layout.compare_file("summary.tsv"),
        # The reads the cells ran on: counted to size compare.reads when cells are too short.
        reads=lambda wc: compare_reads(),
    output:
        report=report(
            COMPARISON_REPORT,
            caption="../report/report.rst",
            category="Strategy comparison",
            subcategory="Recommendation",
            labels={"figure": "report (Markdown)"},
        ),
        host=report(
            layout.compare_file("recommended-host.yaml"),
            caption="../report/recommendation.rst",
            category="Strategy comparison",
            subcategory="Recommendation",
            labels={"figure": "recommended host file"},
        ),
    log:
        "results/logs/compare_report/report.log",
    benchmark:
        "results/benchmarks/compare_report/report.tsv"
    conda:
        "../../envs/compare.yaml"
    params:
        host=HOST_FILE,
        sample=lambda wc: compare_sample().name,
        kind=lambda wc: compare_sample().kind,
        paired=lambda wc: compare_sample().paired,
        steps=config["compare"]["steps"],
        reads=config["compare"]["reads"],
    script:
        "../../scripts/compare_report.py"
