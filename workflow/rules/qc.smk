# The QC of the calls (config calls_qc; numapore.modbam.qc): per sample and motif whose calls
# a pileup read from a modBAM, the tables of `numapore summary` and `numapore sample-probs`
# (modkit 0.6.1's modbam summary and sample-probs) at the pileup's own threshold (its record),
# each code's pass fraction; the report's figure and table of them, and a MultiQC section.


rule calls_qc:
    input:
        unpack(ask(jobs.calls_qc_inputs, "sample", "aligner", "motif")),
    output:
        summary=layout.calls_qc(name="summary.txt"),
        tsv=layout.calls_qc(name="summary.tsv"),
        thresholds=layout.calls_qc(name="thresholds.tsv"),
        histogram=layout.calls_qc(name="probabilities.tsv"),
        passing=layout.calls_qc(name="pass.tsv"),
    log:
        "results/logs/calls_qc/{sample}.{aligner}.{motif}.log",
    benchmark:
        "results/benchmarks/calls_qc/{sample}.{aligner}.{motif}.tsv"
    conda:
        "../../envs/python.yaml"
    params:
        setting=ask(jobs.threshold_setting, "sample"),
    script:
        "../../scripts/calls_qc.py"


rule report_calls_qc:
    input:
        passing=layout.calls_qc(name="pass.tsv"),
        histogram=layout.calls_qc(name="probabilities.tsv"),
        thresholds=layout.calls_qc(name="thresholds.tsv"),
        summary=layout.calls_qc(name="summary.txt"),
    output:
        png=report(
            layout.report_file(name="{motif}.calls_qc.png"),
            caption="../report/calls_qc.rst",
            category="{sample}",
            subcategory="QC of the calls",
            labels={
                "sample": "{sample}",
                "aligner": "{aligner}",
                "figure": "{motif} calls QC",
            },
        ),
        table=report(
            layout.report_file(name="{motif}.calls_qc.html"),
            caption="../report/calls_qc_table.rst",
            category="{sample}",
            subcategory="QC of the calls",
            labels={
                "sample": "{sample}",
                "aligner": "{aligner}",
                "figure": "{motif} calls QC table",
            },
        ),
        data=layout.report_file(name="{motif}.calls_qc.data.json"),
    log:
        "results/logs/report_calls_qc/{sample}.{aligner}.{motif}.log",
    benchmark:
        "results/benchmarks/report_calls_qc/{sample}.{aligner}.{motif}.tsv"
    conda:
        "../../envs/python.yaml"
    script:
        "../../scripts/report_calls_qc.py"


rule multiqc_calls_qc:
    input:
        lambda wc: [path for files in outputs.calls_qc_inputs(PLAN).values() for path in files],
    output:
        table=layout.multiqc_custom("calls_qc"),
        plot=layout.multiqc_custom_plot("calls_qc"),
    log:
        "results/logs/multiqc_calls_qc/calls_qc.log",
    benchmark:
        "results/benchmarks/multiqc_calls_qc/calls_qc.tsv"
    conda:
        "../../envs/python.yaml"
    params:
        runs=ask(outputs.calls_qc_inputs),
    script:
        "../../scripts/multiqc_calls_qc.py"
