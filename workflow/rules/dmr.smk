# Differentially methylated regions with DSS (config dmr:; numapore.methylation.dmr): per
# contrast (group A vs group B, or haplotype 1 vs 2 of a phased sample), the counts of its
# samples' bedMethyl cut into contig groups (scatter.dmr), DSS's DMLtest and callDMR on each
# group (scripts/dmr_test.R: one R process per group for every contrast, since loading DSS costs
# ~15 s of CPU), the groups merged in order, bgzipped and indexed; the report's figure and table
# of the top DMRs, MultiQC's line per contrast, and the score against a simulated truth.
rule dmr_counts:
    input:
        unpack(dmr_counts_inputs),
    output:
        [
            temp(f"results/dmr/{{contrast}}/shards/{{contrast}}.{shard}.counts.tsv")
            for shard in DMR_SHARDS
        ],
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
    script:
        "../../scripts/dmr_counts.py"


rule dmr_test:
    input:
        counts=[f"results/dmr/{name}/shards/{name}.{{shard}}.counts.tsv" for name in DMR_CONTRASTS],
    output:
        sites=[
            temp(f"results/dmr/{name}/shards/{name}.{{shard}}.sites.tsv") for name in DMR_CONTRASTS
        ],
        dmrs=[
            temp(f"results/dmr/{name}/shards/{name}.{{shard}}.dmrs.tsv") for name in DMR_CONTRASTS
        ],
        # what each contrast's part came to (the outputs above may be none: no contrast)
        summary=temp("results/dmr/shards/{shard}.dss.txt"),
    log:
        "results/logs/dmr_test/{shard}.log",
    benchmark:
        "results/benchmarks/dmr_test/{shard}.tsv"
    conda:
        "../../envs/dss.yaml"
    threads: 1
    params:
        contrasts=[c.dss() for c in DMR_CONTRASTS.values()],
    script:
        "../../scripts/dmr_test.R"


rule dmr_merge:
    input:
        sites=expand(
            "results/dmr/{{contrast}}/shards/{{contrast}}.{shard}.sites.tsv", shard=DMR_SHARDS
        ),
        dmrs=expand(
            "results/dmr/{{contrast}}/shards/{{contrast}}.{shard}.dmrs.tsv", shard=DMR_SHARDS
        ),
    output:
        sites="results/dmr/{contrast}/{contrast}.sites.tsv.gz",
        sites_tbi="results/dmr/{contrast}/{contrast}.sites.tsv.gz.tbi",
        dmrs="results/dmr/{contrast}/{contrast}.dmrs.bed.gz",
        dmrs_tbi="results/dmr/{contrast}/{contrast}.dmrs.bed.gz.tbi",
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
        truth=lambda wc: dmr_truth(DMR_CONTRASTS[wc.contrast]),
        dmrs="results/dmr/{contrast}/{contrast}.dmrs.bed.gz",
    output:
        "results/dmr/{contrast}/{contrast}.score.tsv",
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
        unpack(dmr_report_inputs),
    output:
        png=report(
            "results/dmr/{contrast}/{contrast}.dmrs.png",
            caption="../report/dmr.rst",
            category="DMRs",
            subcategory="{contrast}",
            labels={"contrast": "{contrast}", "figure": "DMRs"},
        ),
        table=report(
            "results/dmr/{contrast}/{contrast}.top_dmrs.html",
            caption="../report/dmr_table.rst",
            category="DMRs",
            subcategory="{contrast}",
            labels={"contrast": "{contrast}", "figure": "top DMRs"},
        ),
        data="results/dmr/{contrast}/{contrast}.dmrs.data.json",
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
        [f"results/dmr/{name}/{name}.dmrs.bed.gz" for name in DMR_CONTRASTS],
    output:
        "results/multiqc/numapore_dmr_mqc.tsv",
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
