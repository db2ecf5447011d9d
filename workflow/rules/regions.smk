# Statistics over named region sets (config regions:; numapore.modbam.regions): per set and
# motif, a table of numapore stats (modkit stats' values) over the bedMethyl files and one of
# numapore entropy --regions (modkit entropy's) over the modBAMs, with rows of every sample,
# haplotype (pileup.phased) and group; and the report's page and figure of them.
rule region_stats:
    input:
        unpack(lambda wc: jobs.region_inputs(PLAN, wc.aligner, wc.motif, "stats")),
        bed=lambda wc: PLAN.region_sets()[wc.regionset],
    output:
        layout.region_table(what="stats"),
    log:
        "results/logs/region_stats/{regionset}.{aligner}.{motif}.log",
    benchmark:
        "results/benchmarks/region_stats/{regionset}.{aligner}.{motif}.tsv"
    wildcard_constraints:
        regionset=PLAN.region_set_pattern(),
    conda:
        "../../envs/python.yaml"
    params:
        entities=ask(jobs.region_entities, "aligner", "motif"),
    script:
        "../../scripts/region_stats.py"


rule region_entropy:
    input:
        unpack(lambda wc: jobs.region_inputs(PLAN, wc.aligner, wc.motif, "entropy")),
        bed=lambda wc: PLAN.region_sets()[wc.regionset],
    output:
        layout.region_table(what="entropy"),
    log:
        "results/logs/region_entropy/{regionset}.{aligner}.{motif}.log",
    benchmark:
        "results/benchmarks/region_entropy/{regionset}.{aligner}.{motif}.tsv"
    wildcard_constraints:
        regionset=PLAN.region_set_pattern(),
    conda:
        "../../envs/python.yaml"
    params:
        entities=ask(jobs.region_entities, "aligner", "motif"),
        combine_strands=config["pileup"]["combine_strands"],
    script:
        "../../scripts/region_entropy.py"


rule report_regions:
    input:
        stats=layout.region_table(what="stats"),
        entropy=layout.region_table(what="entropy"),
    output:
        png=report(
            layout.region_report(suffix=".png"),
            caption="../report/regions.rst",
            category="Regions",
            subcategory="{regionset}",
            labels={"regions": "{regionset}", "motif": "{motif}", "figure": "regions"},
        ),
        table=report(
            layout.region_report(suffix=".html"),
            caption="../report/regions_table.rst",
            category="Regions",
            subcategory="{regionset}",
            labels={"regions": "{regionset}", "motif": "{motif}", "figure": "region tables"},
        ),
        data=layout.region_report(suffix=".data.json"),
    log:
        "results/logs/report_regions/{regionset}.{aligner}.{motif}.log",
    benchmark:
        "results/benchmarks/report_regions/{regionset}.{aligner}.{motif}.tsv"
    wildcard_constraints:
        regionset=PLAN.region_set_pattern(),
    conda:
        "../../envs/python.yaml"
    script:
        "../../scripts/report_regions.py"
