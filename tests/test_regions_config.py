"""config regions: (statistics over region sets, issue 56 item 3): the tables and rows a plan
makes, and the mistakes users make with the key, through the plan's build as the workflow reads
it (no job). The tables' values: test_dmr.py (the groups run's, against numapore stats and
numapore entropy run by hand)."""

from __future__ import annotations

from pathlib import Path

import pytest
from project import REPO
from test_cohort_filters import groups_clone  # noqa: F401 (a fixture)

from numapore.base.errors import InputError
from numapore.workflow import build, jobs

CONTIG = "ecoli_window"  # .test/ecoli_window.fa's one contig, 24,000 bp


def plan_with(regions, **config):
    """The groups config's plan with these regions: settings on the command line (--config)."""
    files = [Path("config/config.yaml"), Path(".test/config-groups.yaml")]
    given = {"regions": regions, **config}
    loaded = build.load_config(files, given)
    loaded["regions"] = regions  # --config replaces the file's mapping
    schemas = REPO / "workflow" / "schemas"
    return build.build(loaded, schemas=schemas, configfiles=files, given=given, cores=2)


def problem(regions, **config) -> str:
    with pytest.raises(InputError) as err:
        plan_with(regions, **config)
    return str(err.value)


def bed(folder: Path, text: str, name: str = "set.bed") -> str:
    path = folder / name
    path.write_text(text)
    return str(path)


def test_tables_rows_and_inputs(groups_clone):  # noqa: F811
    """.test/config-groups.yaml's two sets: per set the stats and entropy tables and the report's
    page and figure; rows of the 5 samples, the 4 haplotypes' (phased: case1..control2 and demo)
    and the 2 groups (demo has none); a group's stats read its samples' bedMethyl files, its
    entropy their modBAMs pooled at the mean of their estimated thresholds."""
    plan = build.build(
        build.load_config([Path("config/config.yaml"), Path(".test/config-groups.yaml")]),
        schemas=REPO / "workflow" / "schemas",
        configfiles=[Path("config/config.yaml"), Path(".test/config-groups.yaml")],
        cores=2,
    )
    assert plan.region_sets() == {
        "truth": ".test/regions-truth.bed",
        "tiles": ".test/regions-tiles.bed",
    }
    assert "results/regions/tiles/tiles.minimap2.cpg.entropy.tsv" in plan.region_tables()
    assert len(plan.region_tables()) == 2 * 4
    entities = jobs.region_entities(plan, "minimap2", "cpg")
    assert [(e["level"], e["of"]) for e in entities][:3] == [
        ("sample", "case1"),
        ("haplotype", "case1.hp1"),
        ("haplotype", "case1.hp2"),
    ]
    assert [e["of"] for e in entities if e["level"] == "group"] == ["case", "control"]
    assert len(entities) == 5 * 3 + 2
    case = next(e for e in entities if e["of"] == "case")
    assert case["bedmethyl"] == [
        f"results/{s}/methylation/{s}.minimap2.cpg.bedmethyl.gz" for s in ("case1", "case2")
    ]
    assert case["mean_of"] == [
        (f"results/{s}/align/{s}.minimap2.bam", None) for s in ("case1", "case2")
    ]
    inputs = jobs.region_inputs(plan, "minimap2", "cpg", "entropy")
    assert inputs["references"] == ["results/references/ecoli_window/ecoli_window.fa"]
    fixed = plan_with({"tiles": ".test/regions-tiles.bed"}, pileup={"filter_threshold": 0.8})
    assert {e["threshold"] for e in jobs.region_entities(fixed, "minimap2", "cpg")} == {0.8, None}
    assert plan_with({}).region_tables() == []


def test_a_bad_region_set_is_one_line(groups_clone):  # noqa: F811
    folder = groups_clone
    where = f"config regions.a: {folder}/set.bed"
    good = f"{CONTIG}\t10\t200\tr1\n"
    cases = [  # the BED file's text (None: no file), the message
        ("", f"{where}: no BED region in it (empty)"),
        ("# only a comment\n\n", f"{where}: no BED region in it (empty)"),
        (
            good + f"{CONTIG} 300 400\n",
            f"{where}, line 2: not a BED line (chrom, start and end, tab-separated): "
            f"'{CONTIG} 300 400'",
        ),
        (
            good + f"{CONTIG}\t300\tend\n",
            f"{where}, line 2: not a BED line (chrom, start and end, tab-separated): "
            f"'{CONTIG}\\t300\\tend'",
        ),
        (good + f"{CONTIG}\t500\t400\n", f"{where}, line 2: start 500 is after end 400"),
        (
            "#h\n" + good + "chr1\t1\t2\n",
            f"{where}, line 3: contig 'chr1' is not in the reference .test/ecoli_window.fa",
        ),
        (
            f"{CONTIG}\t1\t24001\n",
            f"{where}, line 1: end 24001 is beyond contig '{CONTIG}' (24000 bp in the "
            "reference .test/ecoli_window.fa)",
        ),
        (
            f"{CONTIG}\t1\t20\tr\t0\tplus\n",
            f"{where}, line 1: strand 'plus' (column 6) is not +, - or .",
        ),
    ]
    for text, message in cases:
        assert problem({"a": bed(folder, text)}) == message
    assert problem({"a": "x.bed"}) == "config regions.a: x.bed: no such file"
    assert problem({"a": str(folder)}) == f"config regions.a: {folder}: a folder, not a BED file"
    (folder / "binary.bed").write_bytes(b"\x1f\x8b\x08\x00\xff\xfe")
    assert problem({"a": str(folder / "binary.bed")}) == (
        f"config regions.a: {folder}/binary.bed: not a BED file (binary; a compressed BED?)"
    )


@pytest.mark.parametrize(
    "regions, message",
    [
        (
            "promoters.bed",
            "--config regions=promoters.bed: 'promoters.bed' is not of type 'object'",
        ),
        (["a.bed"], "--config regions=['a.bed']: ['a.bed'] is not of type 'object'"),
        (
            {"my set": ".test/regions-tiles.bed"},
            "--config regions=...: 'my set' does not match '^[A-Za-z0-9][A-Za-z0-9_.-]*$' (a "
            "region set's name: letters, digits, _, . and -, first a letter or digit; it names a "
            "folder)",
        ),
        (
            {"../up": ".test/regions-tiles.bed"},
            "--config regions=...: '../up' does not match '^[A-Za-z0-9][A-Za-z0-9_.-]*$' (a "
            "region set's name: letters, digits, _, . and -, first a letter or digit; it names a "
            "folder)",
        ),
        (
            {"a": ["x.bed", "y.bed"]},
            "--config regions=...: regions.a: ['x.bed', 'y.bed'] is not of type 'string'",
        ),
    ],
)
def test_a_bad_regions_setting_is_one_line(groups_clone, regions, message):  # noqa: F811
    assert problem(regions) == message


def test_motif_any_is_refused(groups_clone):  # noqa: F811
    assert problem({"t": ".test/regions-tiles.bed"}, pileup={"motif": "any"}) == (
        "config regions: pileup.motif is any: numapore entropy's windows need a motif (set "
        "pileup.motif, e.g. cpg)"
    )
