# The run report: per sample and aligner, figures and tables collected by Snakemake's own report
# (`snakemake --report results/report.html` after a run; captions in workflow/report/), each
# figure with the numbers it shows beside it (.data.json); and one MultiQC report over every
# sample (samtools stats/flagstat plus numapore's accounting and methylation summaries).
# The run outputs they read: numapore.workflow.outputs.run_output.


rule report_alignment_qc:
    input:
        unpack(report_inputs("stats", "bam")),
    output:
        png=report(
            layout.report_file(name="alignment_qc.png"),
            caption="../report/alignment_qc.rst",
            category="{sample}",
            subcategory="Alignment QC",
            labels={"sample": "{sample}", "aligner": "{aligner}", "figure": "alignment QC"},
        ),
        data=layout.report_file(name="alignment_qc.data.json"),
    log:
        "results/logs/report_alignment_qc/{sample}.{aligner}.log",
    benchmark:
        "results/benchmarks/report_alignment_qc/{sample}.{aligner}.tsv"
    conda:
        "../../envs/python.yaml"
    script:
        "../../scripts/report_alignment_qc.py"


rule report_methylation:
    input:
        unpack(report_inputs("bedmethyl", "modbam")),
    output:
        png=report(
            layout.report_file(name="methylation.png"),
            caption="../report/methylation_overview.rst",
            category="{sample}",
            subcategory="Methylation",
            labels={"sample": "{sample}", "aligner": "{aligner}", "figure": "methylation"},
        ),
        data=layout.report_file(name="methylation.data.json"),
    log:
        "results/logs/report_methylation/{sample}.{aligner}.log",
    benchmark:
        "results/benchmarks/report_methylation/{sample}.{aligner}.tsv"
    conda:
        "../../envs/python.yaml"
    script:
        "../../scripts/report_methylation.py"


rule report_accounting:
    input:
        unpack(report_inputs("accounting")),
    output:
        png=report(
            layout.report_file(name="accounting.png"),
            caption="../report/accounting.rst",
            category="{sample}",
            subcategory="Read accounting",
            labels={"sample": "{sample}", "aligner": "{aligner}", "figure": "accounting plot"},
        ),
        table=report(
            layout.report_file(name="accounting.html"),
            caption="../report/accounting_table.rst",
            category="{sample}",
            subcategory="Read accounting",
            labels={"sample": "{sample}", "aligner": "{aligner}", "figure": "accounting table"},
        ),
        data=layout.report_file(name="accounting.data.json"),
    log:
        "results/logs/report_accounting/{sample}.{aligner}.log",
    benchmark:
        "results/benchmarks/report_accounting/{sample}.{aligner}.tsv"
    conda:
        "../../envs/python.yaml"
    script:
        "../../scripts/report_accounting.py"


rule report_accuracy:
    input:
        unpack(report_inputs("calls", "truth")),
    output:
        png=report(
            layout.report_file(name="accuracy.png"),
            caption="../report/accuracy.rst",
            category="{sample}",
            subcategory="Accuracy (simulated)",
            labels={"sample": "{sample}", "aligner": "{aligner}", "figure": "accuracy"},
        ),
        data=layout.report_file(name="accuracy.data.json"),
    log:
        "results/logs/report_accuracy/{sample}.{aligner}.log",
    benchmark:
        "results/benchmarks/report_accuracy/{sample}.{aligner}.tsv"
    conda:
        "../../envs/python.yaml"
    params:
        threshold=config["methylation"]["call_threshold"],
    script:
        "../../scripts/report_accuracy.py"


rule report_provenance:
    input:
        # The step outputs: their jobs' run records (step_records) are complete once they are.
        unpack(report_inputs("bam")),
        motif_calls=ask(jobs.motif_calls, "sample", "aligner"),
        # the pileup's tuning record, when the pileup is tuned (its setting on the page)
        pileup_tuning=lambda wc: (
            tuned_pileup_record() if SAMPLES[wc.sample].input_kind.runs("pileup") else []
        ),
    output:
        page=report(
            layout.report_file(name="provenance.html"),
            caption="../report/provenance.rst",
            category="{sample}",
            subcategory="Provenance",
            labels={"sample": "{sample}", "aligner": "{aligner}", "figure": "provenance"},
        ),
        data=layout.report_file(name="provenance.data.json"),
    log:
        "results/logs/report_provenance/{sample}.{aligner}.log",
    benchmark:
        "results/benchmarks/report_provenance/{sample}.{aligner}.tsv"
    conda:
        "../../envs/python.yaml"
    params:
        **PLAN.host_overrides("io_mode", "strategy.alignment", "strategy.methylation"),
        host=HOST_FILE,
        records=ask(jobs.step_records, "sample", "aligner"),
    script:
        "../../scripts/report_provenance.py"


rule report_tracks:
    input:
        tracks=lambda wc: PLAN.sample_tracks(wc.sample),
        session=lambda wc: layout.igv_session(SAMPLES[wc.sample].reference_name),
    output:
        page=report(
            layout.report_file(name="tracks.html"),
            caption="../report/tracks.rst",
            category="{sample}",
            subcategory="Tracks",
            labels={"sample": "{sample}", "aligner": "{aligner}", "figure": "tracks"},
        ),
        data=layout.report_file(name="tracks.data.json"),
    log:
        "results/logs/report_tracks/{sample}.{aligner}.log",
    benchmark:
        "results/benchmarks/report_tracks/{sample}.{aligner}.tsv"
    conda:
        "../../envs/python.yaml"
    script:
        "../../scripts/report_tracks.py"


rule multiqc_custom_content:
    input:
        lambda wc: [path for run in outputs.multiqc_runs(PLAN).values() for path in run.values()],
    output:
        accounting=layout.multiqc_custom("accounting"),
        methylation=layout.multiqc_custom("methylation"),
    log:
        "results/logs/multiqc_custom_content/custom.log",
    benchmark:
        "results/benchmarks/multiqc_custom_content/custom.tsv"
    conda:
        "../../envs/python.yaml"
    params:
        runs=ask(outputs.multiqc_runs),
    script:
        "../../scripts/multiqc_custom_content.py"


rule multiqc:
    input:
        unpack(ask(outputs.multiqc_inputs)),
    output:
        html=MULTIQC_REPORT,
        data=directory(MULTIQC_REPORT.removesuffix(".html") + "_data"),
    log:
        "results/logs/multiqc/multiqc.log",
    benchmark:
        "results/benchmarks/multiqc/multiqc.tsv"
    conda:
        "../../envs/multiqc.yaml"
    script:
        "../../scripts/multiqc.py"
