# Differentially methylated regions with DSS (config dmr:; numapore.methylation.dmr): per
# contrast (group A vs group B, or haplotype 1 vs 2 of a phased sample), the counts of its
# samples' bedMethyl cut into contig groups (dmr.scatter), DSS's DMLtest and callDMR on each
# group (scripts/dmr_test.R: one R process per group for every contrast, since loading DSS costs
# ~15 s of CPU), the groups merged in order, bgzipped and indexed; the report's figure and table
# of the top DMRs, MultiQC's line per contrast, and the score against a simulated truth.
from numapore.methylation.dmr import plan as plan_contrasts  # noqa: E402


def dmr_bedmethyl(sample):
    """The bedMethyl a group contrast reads of a sample (the report's: run_output)."""
    return run_output("bedmethyl", sample, config["aligner"])


def dmr_haplotype_bedmethyl(sample):
    """A phased sample's per-haplotype bedMethyl files (pileup.phased), haplotype 1 then 2."""
    name = f"results/{sample}/methylation/{sample}.{config['aligner']}.{config['pileup']['motif']}"
    return f"{name}.hp1.bedmethyl.gz", f"{name}.hp2.bedmethyl.gz"


def dmr_not_phased(sample):
    """Why a sample has no per-haplotype bedMethyl ('' when it has them)."""
    kind = SAMPLES[sample].input_kind
    if not config["pileup"].get("phased", False):
        return "pileup.phased is false (no per-haplotype bedMethyl files)"
    if not kind.stages_tagged_reads:
        return f"its reads (kind {SAMPLES[sample].kind}) carry no haplotags (HP tags)"
    simulated = config["simulate"].get(sample)
    if simulated is not None and not simulated.get("haplotagged", 0):
        return f"simulate.{sample}.haplotagged is 0: its reads carry no HP tags"
    return ""


try:
    DMR_CONTRASTS = {
        c.name: c
        for c in plan_contrasts(
            config["dmr"],
            GROUPS,
            dmr_bedmethyl,
            {s: SAMPLES[s].reference_name for s in SAMPLES},
            dmr_haplotype_bedmethyl,
            dmr_not_phased,
        )
    }
except InputError as err:
    raise WorkflowError(f"numapore: {err}")
if workflow.is_main_process:
    for _note in (n for c in DMR_CONTRASTS.values() for n in c.notes):
        logger.info(f"numapore: {_note}")

DMR_SHARDS = shard_ids("dmr")
# Contrast names as the contrasts: key allows them (the schema's pattern).
WILDCARD_PATTERNS_DMR = "|".join(re.escape(n) for n in DMR_CONTRASTS) or "(?!)"


def dmr_counts_inputs(wildcards):
    """A contrast's bedMethyl files (with their indexes) and its reference's index (the contig
    order)."""
    contrast = DMR_CONTRASTS[wildcards.contrast]
    ref = contrast.reference
    beds = list(contrast.sources.values())
    return {
        "bedmethyl": beds,
        "tbi": [f"{b}.tbi" for b in beds],
        "fai": f"results/references/{ref}/{ref}.fa.fai",
    }


def dmr_truth(contrast):
    """The simulated truth regions a contrast is scored against: its first sample's, when every
    sample of it is simulated with regions of its kind (DMRs between groups, allele-specific
    regions); else None."""
    samples = [c.removesuffix("_hp1").removesuffix("_hp2") for c in contrast.group1]
    samples += [c.removesuffix("_hp1").removesuffix("_hp2") for c in contrast.group2]
    key = "group_regions" if contrast.kind == "groups" else "asm_regions"
    settings = [config["simulate"].get(s) for s in samples]
    if all(s is not None and s.get(key, 0) > 0 for s in settings):
        return f"results/simulated/{samples[0]}/regions.bed"
    return None


def dmr_outputs():
    """The files of every contrast: merged tables (indexed), the report's figure and table, and
    the score when the truth is known."""
    out = []
    for name, contrast in DMR_CONTRASTS.items():
        prefix = f"results/dmr/{name}/{name}"
        out += [f"{prefix}.sites.tsv.gz.tbi", f"{prefix}.dmrs.bed.gz.tbi"]
        out += [f"{prefix}.dmrs.png", f"{prefix}.top_dmrs.html"]
        if dmr_truth(contrast):
            out.append(f"{prefix}.score.tsv")
    return out


def dmr_report_inputs(wildcards):
    """What a contrast's figure reads: its merged tables and its samples' bedMethyl files (each
    sample's per-site values in the top regions)."""
    prefix = f"results/dmr/{wildcards.contrast}/{wildcards.contrast}"
    beds = list(DMR_CONTRASTS[wildcards.contrast].sources.values())
    return {
        "dmrs": f"{prefix}.dmrs.bed.gz",
        "sites": f"{prefix}.sites.tsv.gz",
        "bedmethyl": beds,
        "tbi": [f"{b}.tbi" for b in beds],
    }


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
        counts=[
            f"results/dmr/{name}/shards/{name}.{{shard}}.counts.tsv" for name in DMR_CONTRASTS
        ],
    output:
        sites=[
            temp(f"results/dmr/{name}/shards/{name}.{{shard}}.sites.tsv")
            for name in DMR_CONTRASTS
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
