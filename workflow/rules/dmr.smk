# Differentially methylated regions with DSS (config dmr:; numapore.methylation.dmr): per
# contrast (group A vs group B, or haplotype 1 vs 2 of a phased sample), the counts of its
# samples' bedMethyl cut into contig groups (scatter.dmr), DSS's DMLtest and callDMR on each
# group (scripts/dmr_test.R: one R process per group for every contrast, since loading DSS costs
# ~15 s of CPU), the groups merged in order, bgzipped and indexed; the report's figure and table
# of the top DMRs, MultiQC's line per contrast, and the score against a simulated truth.
rule dmr_counts:
    input:
        unpack(ask(jobs.dmr_counts_inputs, "contrast")),
    output:
        [temp(layout.dmr_shard(shard=shard, suffix=".counts.tsv")) for shard in DMR_SHARDS],
    log:
        "results/logs/dmr_counts/{contrast}.log",
    benchmark:
        "results/benchmarks/dmr_counts/{contrast}.tsv"
    wildcard_constraints:
        contrast=WILDCARD_PATTERNS_DMR,
    conda:
        "../../envs/python.yaml"
    params:
        contrast=lambda wc: DMR_CONTRASTS[wc.contrast],
        code=config["dmr"]["code"],
        max_memory_gb=PLAN.dmr_memory_bound(),
    script:
        "../../scripts/dmr_counts.py"


rule dmr_test:
    input:
        counts=[layout.dmr_shard(name, suffix=".counts.tsv") for name in DMR_CONTRASTS],
    output:
        sites=[temp(layout.dmr_shard(name, suffix=".sites.tsv")) for name in DMR_CONTRASTS],
        dmrs=[temp(layout.dmr_shard(name, suffix=".dmrs.tsv")) for name in DMR_CONTRASTS],
        # what each contrast's part came to (the outputs above may be none: no contrast)
        summary=temp(layout.dss_summary()),
    log:
        "results/logs/dmr_test/{shard}.log",
    benchmark:
        "results/benchmarks/dmr_test/{shard}.tsv"
    conda:
        "../../envs/dss.yaml"
    threads: 1
    resources:
        **PLAN.dmr_test_resources(),
    params:
        contrasts=[c.dss() for c in DMR_CONTRASTS.values()],
    script:
        "../../scripts/dmr_test.R"


rule dmr_merge:
    input:
        sites=expand(layout.dmr_shard(suffix=".sites.tsv"), shard=DMR_SHARDS, allow_missing=True),
        dmrs=expand(layout.dmr_shard(suffix=".dmrs.tsv"), shard=DMR_SHARDS, allow_missing=True),
    output:
        sites=layout.dmr(suffix=".sites.tsv.gz"),
        sites_tbi=layout.dmr(suffix=".sites.tsv.gz.tbi"),
        dmrs=layout.dmr(suffix=".dmrs.bed.gz"),
        dmrs_tbi=layout.dmr(suffix=".dmrs.bed.gz.tbi"),
    log:
        "results/logs/dmr_merge/{contrast}.log",
    benchmark:
        "results/benchmarks/dmr_merge/{contrast}.tsv"
    wildcard_constraints:
        contrast=WILDCARD_PATTERNS_DMR,
    conda:
        "../../envs/python.yaml"
    params:
        contrast=lambda wc: DMR_CONTRASTS[wc.contrast],
    script:
        "../../scripts/dmr_merge.py"


rule dmr_score:
    input:
        truth=lambda wc: jobs.dmr_truth(PLAN, wc.contrast),
        dmrs=layout.dmr(suffix=".dmrs.bed.gz"),
    output:
        layout.dmr(suffix=".score.tsv"),
    log:
        "results/logs/dmr_score/{contrast}.log",
    benchmark:
        "results/benchmarks/dmr_score/{contrast}.tsv"
    wildcard_constraints:
        contrast=WILDCARD_PATTERNS_DMR,
    conda:
        "../../envs/python.yaml"
    params:
        kind=lambda wc: "dmr" if DMR_CONTRASTS[wc.contrast].kind == "groups" else "asm",
    script:
        "../../scripts/dmr_score.py"


rule report_dmr:
    input:
        unpack(ask(jobs.dmr_report_inputs, "contrast")),
    output:
        png=report(
            layout.dmr(suffix=".dmrs.png"),
            caption="../report/dmr.rst",
            category="DMRs",
            subcategory="{contrast}",
            labels={"contrast": "{contrast}", "figure": "DMRs"},
        ),
        table=report(
            layout.dmr(suffix=".top_dmrs.html"),
            caption="../report/dmr_table.rst",
            category="DMRs",
            subcategory="{contrast}",
            labels={"contrast": "{contrast}", "figure": "top DMRs"},
        ),
        data=layout.dmr(suffix=".dmrs.data.json"),
    log:
        "results/logs/report_dmr/{contrast}.log",
    benchmark:
        "results/benchmarks/report_dmr/{contrast}.tsv"
    wildcard_constraints:
        contrast=WILDCARD_PATTERNS_DMR,
    conda:
        "../../envs/python.yaml"
    params:
        contrast=lambda wc: DMR_CONTRASTS[wc.contrast],
        code=config["dmr"]["code"],
        top=config["dmr"]["top"],
    script:
        "../../scripts/report_dmr.py"


rule multiqc_dmr:
    input:
        [layout.dmr(name, ".dmrs.bed.gz") for name in DMR_CONTRASTS],
    output:
        layout.multiqc_custom("dmr"),
    log:
        "results/logs/multiqc_dmr/dmr.log",
    benchmark:
        "results/benchmarks/multiqc_dmr/dmr.tsv"
    conda:
        "../../envs/python.yaml"
    params:
        contrasts=list(DMR_CONTRASTS),
    script:
        "../../scripts/multiqc_dmr.py"
