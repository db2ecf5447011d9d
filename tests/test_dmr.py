"""DMRs with DSS (config dmr:, issue 43): the groups' shared run (.test/config-groups.yaml: 2 vs 2
simulated replicates with known DMRs) checked against DSS run by hand in R on the same counts and
against the simulated truth; the report's figure and table and MultiQC's line; the simulator's
truth regions and haplotags; bad contrasts stopped at config load."""

from __future__ import annotations

import gzip
import json
import subprocess
from pathlib import Path

import numpy as np
import pysam
import pytest
import yaml
from conftest import run_workflow
from project import REPO
from runs_modbam_short import as_the_clone
from shared_runs import shared_run
from test_cohort_filters import build_with, groups_clone  # noqa: F401 (a fixture)

from numapore.base.errors import InputError
from numapore.methylation import dmr, dmr_regions
from numapore.simulate import read_model
from numapore.simulate import reads as sim
from numapore.simulate.truth import TruthSettings, layout

CONFIG = REPO / ".test" / "config-groups.yaml"
NAME = "case_vs_control"
PREFIX = f"results/dmr/{NAME}/{NAME}"
HP = "case1_hp1_vs_hp2"  # haplotype 1 vs 2 of case1 (pileup.phased)
HP_PREFIX = f"results/dmr/{HP}/{HP}"
COHORT = "results/cohort/ecoli_window/cohort.minimap2.cpg.bed.gz"
TARGETS = [
    f"{PREFIX}.sites.tsv.gz.tbi",
    f"{PREFIX}.dmrs.bed.gz.tbi",
    f"{PREFIX}.score.tsv",
    f"{PREFIX}.dmrs.png",
    f"{PREFIX}.top_dmrs.html",
    "results/multiqc/numapore_dmr_mqc.tsv",
    f"{HP_PREFIX}.dmrs.bed.gz.tbi",
    f"{HP_PREFIX}.score.tsv",
    "results/case1/tracks/case1.minimap2.cpg.all.m.bw",  # test_tracks_of_the_run
    "results/case1/tracks/case1.minimap2.cpg.hp1.m.bw",
    COHORT + ".tbi",  # filtered (the config's cohort:): test_cohort_table_filtered_as_configured
    COHORT.replace(".bed.gz", ".samples.tsv"),
    # config regions: test_region_tables_equal_stats_and_entropy_by_hand
    *[f"results/regions/{name}/{name}.minimap2.cpg.{what}.tsv" for name in ("truth", "tiles")
      for what in ("stats", "entropy")],  # fmt: skip
    "results/regions/truth/truth.minimap2.cpg.report.html",
]
SAMPLES = ["case1", "case2", "control1", "control2"]


@pytest.fixture(scope="session")
def groups_run(tmp_path_factory) -> Path:
    """.test/config-groups.yaml as a user runs it, asking only for the DMR outputs: four simulated
    modBAM samples (two groups of 2 replicates), realigned and piled up, then DSS."""

    def make(work: Path) -> None:
        as_the_clone(work)
        run_workflow(work, *TARGETS, "--configfile", ".test/config-groups.yaml")

    return shared_run(tmp_path_factory, "groups", make)


def bedmethyl(work: Path, sample: str) -> Path:
    """A sample's bedMethyl in the run."""
    return work / f"results/{sample}/methylation/{sample}.minimap2.cpg.bedmethyl.gz"


# DSS by hand: its own functions on the four bedMethyl files' 5mC counts (valid coverage, Nmod),
# with the parameters of config/config.yaml's dmr: section, nothing of numapore's between.
BY_HAND = r"""
suppressPackageStartupMessages(library(DSS))
args <- commandArgs(trailingOnly = TRUE)
counts <- function(f) {
  b <- read.delim(gzfile(f), header = FALSE, colClasses = c(V1 = "character"))
  b <- b[b$V4 == "m" & b$V10 > 0, ]
  data.frame(chr = b$V1, pos = b$V2 + 1, N = b$V10, X = b$V12)
}
by_hand <- function(out, files, group1, group2) {
  names <- c(group1, group2)
  bs <- makeBSseqData(lapply(files, counts), names)
  invisible(capture.output(test <- DMLtest(bs, group1 = group1, group2 = group2,
    smoothing = TRUE, smoothing.span = 500)))
  dmrs <- callDMR(test, delta = 0.1, p.threshold = 1e-5, minlen = 50, minCG = 3,
    dis.merge = 100, pct.sig = 0.5)
  write.table(test, paste0(out, ".sites.tsv"), sep = "\t", quote = FALSE, row.names = FALSE)
  write.table(dmrs, paste0(out, ".dmrs.tsv"), sep = "\t", quote = FALSE, row.names = FALSE)
}
by_hand(args[1], args[3:6], c("case1", "case2"), c("control1", "control2"))
by_hand(args[2], args[7:8], "hp1", "hp2")
"""


def read_gz_table(path: Path) -> list[list[str]]:
    """A bgzipped table's rows (its '#' header left out)."""
    with gzip.open(path, "rt") as handle:
        return [line.rstrip("\n").split("\t") for line in handle if not line.startswith("#")]


def test_dmr_tables_equal_dss_run_by_hand(groups_run, tmp_path):
    """The per-site table and the DMRs equal DSS's DMLtest and callDMR run by hand in R on the
    same bedMethyl counts (config/config.yaml's parameters, which the run used): the groups'
    four samples, and case1's two haplotypes (1 vs 1, smoothed)."""
    settings = yaml.safe_load((REPO / "config" / "config.yaml").read_text())["dmr"]
    assert (settings["smoothing"], settings["smoothing_span"], settings["delta"]) == (
        True, 500, 0.1,
    )  # fmt: skip
    assert (settings["p_threshold"], settings["minlen"], settings["min_cg"]) == (1e-5, 50, 3)
    assert (settings["dis_merge"], settings["pct_sig"]) == (100, 0.5)
    script = tmp_path / "by_hand.R"
    script.write_text(BY_HAND)
    case1 = str(bedmethyl(groups_run, "case1"))
    haplotypes = [case1.replace(".bedmethyl", f".{hp}.bedmethyl") for hp in ("hp1", "hp2")]
    files = [str(bedmethyl(groups_run, s)) for s in SAMPLES] + haplotypes
    outs = [str(tmp_path / NAME), str(tmp_path / HP)]  # one R process: DSS loads once
    done = subprocess.run(["Rscript", str(script), *outs, *files], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    for contrast in (NAME, HP):
        same_as_by_hand(groups_run, tmp_path / contrast, f"results/dmr/{contrast}/{contrast}")


def same_as_by_hand(groups_run: Path, hand_prefix: Path, prefix: str) -> None:
    """A contrast's merged tables equal DSS's by hand (its .sites.tsv and .dmrs.tsv)."""
    hand = [line.split("\t") for line in Path(f"{hand_prefix}.sites.tsv").read_text().splitlines()]
    assert hand[0] == ["chr", "pos", "mu1", "mu2", "diff", "diff.se", "stat", "phi1", "phi2",
                       "pval", "fdr"]  # fmt: skip
    ours = read_gz_table(groups_run / f"{prefix}.sites.tsv.gz")
    assert len(ours) == len(hand) - 1 > 1000
    assert [(r[0], int(r[1]) + 1, int(r[2])) for r in ours] == [
        (h[0], int(h[1]), int(h[1])) for h in hand[1:]
    ]
    np.testing.assert_allclose(
        np.array([r[3:] for r in ours], dtype=float),
        np.array([h[2:] for h in hand[1:]], dtype=float),
        rtol=1e-12,
    )
    hand_dmrs = [
        line.split("\t") for line in Path(f"{hand_prefix}.dmrs.tsv").read_text().splitlines()
    ]
    assert hand_dmrs[0] == ["chr", "start", "end", "length", "nCG", "meanMethy1", "meanMethy2",
                            "diff.Methy", "areaStat"]  # fmt: skip
    hand_dmrs = sorted(hand_dmrs[1:], key=lambda h: int(h[1]))  # DSS orders by |areaStat|
    dmrs = read_gz_table(groups_run / f"{prefix}.dmrs.bed.gz")
    assert len(dmrs) == len(hand_dmrs) >= 3
    assert [(r[0], int(r[1]) + 1, int(r[2]), int(r[3])) for r in dmrs] == [
        (h[0], int(h[1]), int(h[2]), int(h[4])) for h in hand_dmrs
    ]
    np.testing.assert_allclose(
        np.array([r[4:] for r in dmrs], dtype=float),
        np.array([h[5:] for h in hand_dmrs], dtype=float),
        rtol=1e-12,
    )


def test_dmrs_found_where_the_truth_has_them(groups_run):
    """At least 90 % of the true DMRs overlapped by a call and 90 % of the calls on a true one,
    by the workflow's score and by `numapore dmr-score` on the same files."""
    truth = groups_run / "results/simulated/case1/regions.bed"
    regions = [line.split("\t")[:5] for line in truth.read_text().splitlines()]
    other = groups_run / "results/simulated/control2/regions.bed"
    assert regions == [line.split("\t")[:5] for line in other.read_text().splitlines()]
    header, row = (groups_run / f"{PREFIX}.score.tsv").read_text().splitlines()
    score = dict(zip(header.split("\t"), row.split("\t"), strict=True))
    assert int(score["true_regions"]) == 6
    assert float(score["recall"]) >= 0.9 and float(score["precision"]) >= 0.9, score
    done = subprocess.run(
        [str(REPO / ".venv/bin/numapore"), "dmr-score", str(truth),
         str(groups_run / f"{PREFIX}.dmrs.bed.gz")],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert done.stdout.splitlines()[1].split("\t")[1:] == row.split("\t")[1:]
    header, row = (groups_run / f"{HP_PREFIX}.score.tsv").read_text().splitlines()
    score = dict(zip(header.split("\t"), row.split("\t"), strict=True))
    assert (score["kind"], int(score["true_regions"])) == ("asm", 3)
    assert float(score["recall"]) >= 0.9 and float(score["precision"]) >= 0.9, score


def test_dmr_outputs_indexed_reported_and_in_multiqc(groups_run):
    """Both tables bgzipped with a tabix index and a header; the figure, the top-DMR table and
    the figure's data name every DMR drawn with every sample; MultiQC's line per contrast counts
    the DMRs and their CpGs."""
    dmrs = read_gz_table(groups_run / f"{PREFIX}.dmrs.bed.gz")
    with pysam.TabixFile(str(groups_run / f"{PREFIX}.dmrs.bed.gz")) as tabix:
        assert tabix.header[0] == (
            "#chrom\tstart\tend\tCpGs\tmean_case\tmean_control\tdifference\tareaStat"
        )
        fetched = [line.split("\t") for line in tabix.fetch(dmrs[0][0])]
    assert fetched == dmrs
    with pysam.TabixFile(str(groups_run / f"{PREFIX}.sites.tsv.gz")) as tabix:
        chrom, start, end = dmrs[0][:3]
        inside = list(tabix.fetch(chrom, int(start), int(end)))
    assert len(inside) >= int(dmrs[0][3])  # the DMR's CpGs were all tested
    assert (groups_run / f"{PREFIX}.dmrs.png").stat().st_size > 20_000
    data = json.loads((groups_run / f"{PREFIX}.dmrs.data.json").read_text())
    assert data["dmrs"] == len(dmrs) and len(data["drawn"]) == min(6, len(dmrs))
    assert all(set(panel["samples"]) == set(SAMPLES) for panel in data["drawn"])
    best = max(dmrs, key=lambda r: abs(float(r[-1])))
    assert data["top"][0]["areaStat"] == best[-1]
    page = (groups_run / f"{PREFIX}.top_dmrs.html").read_text()
    assert f"<td>{best[1]}</td><td>{best[2]}</td>" in page
    table = (groups_run / "results/multiqc/numapore_dmr_mqc.tsv").read_text().splitlines()
    assert table[-3:-1] == [
        "Sample\tDMRs\tCpGs in DMRs",
        f"{NAME}\t{len(dmrs)}\t{sum(int(r[3]) for r in dmrs)}",
    ]
    assert table[-1].startswith(f"{HP}\t")


def test_simulated_truth_regions_and_haplotags(tmp_path):
    """The truth's layout depends on truth_seed alone (not the sample's seed); a sample whose
    group differs has the other level there; HP/PS tags on about the haplotagged share of reads,
    and allele-specific regions methylated by haplotype as the truth says."""
    window = ("gi|170079663|ref|NC_010473.1|", 1_000_000, 1_060_000)
    settings = TruthSettings(7, 5, 4, 1000, 0.8, window)
    regions = layout(settings)
    assert [r.kind for r in regions].count("dmr") == 5 and len(regions) == 9
    assert all(b.start - a.end >= 500 for a, b in zip(regions, regions[1:], strict=False))
    assert layout(TruthSettings(8, 5, 4, 1000, 0.8, window)) != regions
    with pytest.raises(ValueError, match="do not fit"):
        layout(TruthSettings(7, 40, 0, 1000, 0.8, window))
    for r in regions:
        same, other = r.fractions(False), r.fractions(True)
        gap = abs(same[0] - same[1]) if r.kind == "asm" else abs(same[0] - other[0])
        assert gap == pytest.approx(0.8)
    cfg = read_model.SimConfig(
        n_reads=400, seed=3, mean_length=3000, sd_length=1000, region=window,
        formats=("modbam", "truth", "regions"), truth_seed=7, group_regions=5, asm_regions=4,
        truth_length=1000, truth_difference=0.8, haplotagged=0.8,
    )  # fmt: skip
    sim.simulate(REPO / "resources" / "ecoli_dh10b.fa", tmp_path, cfg, progress=False)
    assert (tmp_path / "regions.bed").read_text().splitlines()[1].split("\t")[:5] == [
        regions[0].chrom, str(regions[0].start), str(regions[0].end), regions[0].name,
        regions[0].kind,
    ]  # fmt: skip
    with pysam.AlignmentFile(str(tmp_path / "reads.modbam.bam"), check_sq=False) as bam:
        tags = [(r.get_tag("HP"), r.get_tag("PS")) if r.has_tag("HP") else None for r in bam]
    share = sum(t is not None for t in tags) / len(tags)
    assert 0.74 < share < 0.86
    assert {t for t in tags if t} == {(1, window[1] + 1), (2, window[1] + 1)}
    ref = read_model.Reference(read_model.read_fasta(REPO / "resources" / "ecoli_dh10b.fa"))
    asm = [r for r in regions if r.kind == "asm"]
    methylated = {1: [0, 0], 2: [0, 0]}  # haplotype -> [methylated CpGs, CpGs] in asm1
    for i in range(400):
        mol = read_model.draw_molecule(np.random.default_rng([cfg.seed, i]), ref, cfg)
        inside = (mol.cpg_positions >= asm[0].start) & (mol.cpg_positions < asm[0].end)
        methylated[mol.haplotype][0] += int(mol.methylated[inside].sum())
        methylated[mol.haplotype][1] += int(inside.sum())
    for hp in (1, 2):
        level = asm[0].fractions(False)[hp - 1]
        assert methylated[hp][0] / methylated[hp][1] == pytest.approx(level, abs=0.1)


def dry_run(work: Path, contrasts: list, **dmr_settings) -> str:
    """A dry run of the groups' config with other contrasts (and pileup.phased off when the
    settings say phased=False); what it printed (it must fail)."""
    extra = work / "extra.yaml"
    pileup = {"pileup": {"phased": dmr_settings.pop("phased")}} if "phased" in dmr_settings else {}
    extra.write_text(yaml.safe_dump({"dmr": {"contrasts": contrasts, **dmr_settings}, **pileup}))
    done = run_workflow(
        work, "--dry-run", "--configfile", ".test/config-groups.yaml", str(extra), check=False
    )
    assert done.returncode != 0, done.stdout[-2000:]
    return done.stdout + done.stderr


@pytest.mark.parametrize(
    "contrasts, settings, message",
    [
        (
            [{"groups": ["case", "controls"]}],
            {},
            "numapore: config dmr.contrasts[0] (case_vs_controls): no sample has group "
            "'controls' (the sheet's group column, or simulate.<name>.group); did you mean "
            "`control`?",
        ),
        (
            [{"name": "one", "groups": ["case", "single"]}],
            {"smoothing": False},
            "numapore: config dmr.contrasts[0] (one): group 'single' has one sample (control2): "
            "DSS's DMLtest estimates each site's dispersion from replicates and refuses a side "
            "of one sample without smoothing; add replicates, or set smoothing: true "
            "(dmr.smoothing, or the contrast's own), which makes neighbouring CpGs stand in for "
            "replicates",
        ),
        (
            [{"sample": "case1"}],
            {"phased": False},
            "numapore: config dmr.contrasts[0] (case1_hp1_vs_hp2): sample 'case1' is not phased: "
            "pileup.phased is false (no per-haplotype bedMethyl files)",
        ),
    ],
    ids=["unknown-group", "one-sample-no-smoothing", "haplotypes-not-phased"],
)
def test_bad_contrast_stops_before_any_job(tmp_path, contrasts, settings, message):
    """One numapore: line at config load, naming the contrast and the reason."""
    as_the_clone(tmp_path)
    if contrasts[-1].get("groups", [""])[-1] == "single":  # control2 alone in a group
        config = yaml.safe_load(CONFIG.read_text())
        config["simulate"]["control2"]["group"] = "single"
        (tmp_path / "groups.yaml").write_text(yaml.safe_dump(config))
        extra = tmp_path / "extra.yaml"
        extra.write_text(yaml.safe_dump({"dmr": {"contrasts": contrasts, **settings}}))
        done = run_workflow(
            tmp_path, "--dry-run", "--configfile", str(tmp_path / "groups.yaml"), str(extra),
            check=False,
        )  # fmt: skip
        out = done.stdout + done.stderr
    else:
        out = dry_run(tmp_path, contrasts, **settings)
    assert message in out, out[-3000:]
    assert "simulate_modbam_reads" not in out  # no job listed: it stopped before the DAG


def test_contig_groups_whole_and_in_order():
    """Scatter: consecutive groups of whole contigs balanced by sites; the fdr over every
    group is R's p.adjust(method = 'BH')."""
    sites = {"c1": 50, "c2": 10, "c3": 30, "c4": 10}
    assert dmr.contig_groups(sites, 2) == [["c1"], ["c2", "c3", "c4"]]
    assert dmr.contig_groups(sites, 1) == [["c1", "c2", "c3", "c4"]]
    assert dmr.contig_groups({"c1": 5}, 3) == [["c1"], [], []]
    # R 4.2.2: p.adjust(c(0.01, 0.04, 0.03, 0.2, NA), "BH") -> 0.04 0.05333333 0.05333333 0.2 NA
    q = dmr.bh_fdr([0.01, 0.04, 0.03, 0.2, float("nan")])
    assert q[:4] == pytest.approx([0.04, 0.16 / 3, 0.16 / 3, 0.2]) and np.isnan(q[4])


def test_regions_under_the_memory_bound_end_where_dss_joins_nothing():
    """config dmr.max_memory_gb: a shard's sites cut into regions of at most the sites the
    bound holds, each ending at a contig's end or before a gap wider than DSS looks across,
    else (dense CpGs) at the widest gap within reach, counted."""
    chrom = ["c1"] * 8 + ["c2"] * 4
    pos = [1, 50, 100, 6000, 6050, 20000, 20100, 20200, 1, 2, 3, 4]
    ids, forced = dmr_regions.region_ids(chrom, pos, None, 5000)
    assert ids.tolist() == [1] * 12 and forced == 0  # no bound: the shard whole
    ids, forced = dmr_regions.region_ids(chrom, pos, 5, 5000)
    assert ids.tolist() == [1] * 5 + [2] * 3 + [3] * 4 and forced == 0
    ids, forced = dmr_regions.region_ids(chrom, pos, 3, 5000)
    assert ids.tolist() == [1, 1, 1, 2, 2, 3, 3, 3, 4, 5, 5, 5] and forced == 1
    rng = np.random.default_rng(3)
    pos = np.cumsum(rng.integers(1, 400, 5000) + (rng.random(5000) < 0.03) * 9000)
    ids, forced = dmr_regions.region_ids(["c"] * 5000, pos, 300, 5000)
    assert np.bincount(ids)[1:].max() <= 300 and forced == 0
    starts = np.flatnonzero(np.diff(ids)) + 1
    assert (pos[starts] - pos[starts - 1] > 5000).all()
    settings = {"smoothing_span": 8000, "dis_merge": 100}
    assert dmr_regions.safe_gap(settings) == 8000
    assert dmr_regions.safe_gap({**settings, "smoothing_span": 500}) == dmr_regions.DSS_BUMP_SEP
    for bound, samples, shard in ((4.0, 12, 0), (3.0, 4, 2_000_000), (1.5, 24, 100_000)):
        most = dmr_regions.max_region_sites(bound, samples, shard)
        assert dmr_regions.dss_gib(most, samples, shard) <= bound
        assert dmr_regions.dss_gib(most + 1, samples, shard) > bound


def test_merge_keeps_dss_values_and_shard_order(tmp_path):
    """dmr_merge's text: shards in order, DSS's values as written, 1-based positions made BED's;
    with several shards the fdr is recomputed over all of them."""
    header = "chr\tpos\tmu1\tmu2\tdiff\tdiff.se\tstat\tphi1\tphi2\tpval\tfdr\n"
    one, two = tmp_path / "1.tsv", tmp_path / "2.tsv"
    one.write_text(header + "c1\t10\t0.5\t0.1\t0.4\t0.1\t4\t0.01\t0.02\t0.01\t0.02\n")
    two.write_text(header + "c2\t5\t0.2\t0.3\t-0.1\t0.1\t-1\t0.01\t0.02\t0.04\t0.04\n")
    lines = dmr.site_lines([str(one), str(two)])
    assert lines[0] == dmr.SITE_HEADER
    assert lines[1].split("\t")[:10] == "c1 9 10 0.5 0.1 0.4 0.1 4 0.01 0.02".split()
    assert [float(line.split("\t")[-1]) for line in lines[1:]] == [0.02, 0.04]
    assert dmr.site_lines([str(one)])[1].endswith("\t0.01\t0.02\n")  # one shard: DSS's own
    dmrs = tmp_path / "d.tsv"
    dmrs.write_text(
        "chr\tstart\tend\tlength\tnCG\tmeanMethy1\tmeanMethy2\tdiff.Methy\tareaStat\n"
        "c1\t101\t300\t200\t12\t0.8\t0.2\t0.6\t55.5\n"
    )
    assert dmr.dmr_lines([str(dmrs)], "tumour", "normal") == [
        "#chrom\tstart\tend\tCpGs\tmean_tumour\tmean_normal\tdifference\tareaStat\n",
        "c1\t100\t300\t12\t0.8\t0.2\t0.6\t55.5\n",
    ]


def test_cohort_table_filtered_as_configured(groups_run):
    """.test/config-groups.yaml's cohort: (min_samples 3, min_sample_coverage 3) over the five
    samples' bedMethyl: the table keeps exactly the sites the definition keeps, computed row by
    row from the bedMethyl files (test_cohort_filters.expected_sites); the log names modkit
    0.6.4's equivalent merge; each sample's sites read and kept beside the table."""
    from test_cohort_filters import expected_sites, table_sites

    samples = [*SAMPLES, "demo"]
    beds = [(s, bedmethyl(groups_run, s)) for s in samples]
    expected = expected_sites(beds, 3, 3)
    assert table_sites(groups_run / COHORT) == expected and len(expected) > 100
    assert len(expected) < len(expected_sites(beds, 1, 0))
    log = (groups_run / "results/logs/cohort_table/ecoli_window.minimap2.cpg.log").read_text()
    assert "--min-samples 3 --min-sample-coverage 3 (modkit 0.6.4)" in log
    counts = (groups_run / COHORT.replace(".bed.gz", ".samples.tsv")).read_text().splitlines()
    assert counts[0] == "sample\tsites_read\tsites_kept"
    assert [line.split("\t")[0] for line in counts[1:]] == samples
    assert all(0 < int(kept) <= int(read) for _, read, kept in (x.split("\t") for x in counts[1:]))


SITE_ROW = "c1\t{0}\t{1}\tm\t1\t+\t{0}\t{1}\t255,0,0\t4\t50.00\t2\t2\t0\t0\t0\t0\t0\n"


def sites(*starts: int) -> str:
    """bedMethyl rows of code m on contig c1 at starts (4 valid calls, 2 modified each)."""
    return "".join(SITE_ROW.format(start, start + 1) for start in starts)


def two_sides(folder: Path, name: str, kind: str, labels, texts: dict[str, str]):
    """A contrast of two sides of one bedMethyl each (texts: column -> the file's text, side A
    first), its files and where its counts go."""
    paths = {column: folder / f"{column}.bedmethyl" for column in texts}
    for column, text in texts.items():
        paths[column].write_text(text)
    first, second = texts
    contrast = dmr.Contrast(name, kind, *labels, (first,), (second,),
                            {c: str(p) for c, p in paths.items()})  # fmt: skip
    return contrast, list(paths.values()), [str(folder / "counts.tsv")]


def refusal(contrast, code: str, out: list[str]) -> str:
    """The counts job's one line for contrast, and nothing written under the counts' name."""
    with pytest.raises(dmr.InputError) as err:
        dmr.write_counts(contrast, code, ["c1"], out)
    assert not Path(out[0]).exists()
    return str(err.value)


def test_a_side_without_calls_of_the_code_is_refused_before_dss(tmp_path):
    """The counts job: a side whose bedMethyl files hold no valid call of dmr.code (haplotype 2
    of reads WhatsHap could not tag) stops with one line naming the contrast, the side and its
    files, before DSS; another code of the same files is refused too, the code they carry
    passes."""
    files = {"x_hp1": sites(10, 20), "x_hp2": ""}
    contrast, (hp1, hp2), out = two_sides(tmp_path, "x_hp1_vs_hp2", "haplotypes",
                                          ("x hp1", "x hp2"), files)  # fmt: skip
    assert refusal(contrast, "m", out) == (
        f"DMR contrast 'x_hp1_vs_hp2': x hp2 has no valid call of code 'm' (config dmr.code) in "
        f"{hp2}: DSS would test no site"
    )
    hp2.write_text(sites(10))
    assert refusal(contrast, "h", out).startswith(
        f"DMR contrast 'x_hp1_vs_hp2': x hp1 has no valid call of code 'h' (config dmr.code) in "
        f"{hp1}"
    )
    assert dmr.write_counts(contrast, "m", ["c1"], out) == [["c1"]]


def cohort_bedmethyls(folder: Path, samples: list[str], seed: int = 5) -> dict[str, str]:
    """Small bedMethyl files as modkit pileup writes them (sorted; codes h and m at each site,
    strand '.'): three contigs, each sample missing some sites."""
    rng = np.random.default_rng(seed)
    row = "{c}\t{s}\t{e}\t{code}\t{n}\t.\t{s}\t{e}\t255,0,0\t{n}\t50.00\t{x}\t{r}\t0\t0\t0\t0\t0\n"
    paths = {}
    for sample in samples:
        lines = []
        for contig, sites in (("c1", 400), ("c2", 30), ("c3", 250)):
            for pos in np.cumsum(rng.integers(2, 60, sites)):
                if rng.random() < 0.2:
                    continue
                n = int(rng.integers(1, 30))
                for code in ("h", "m"):
                    x = int(rng.integers(0, n + 1))
                    lines.append(row.format(c=contig, s=pos, e=pos + 1, code=code, n=n, x=x,
                                            r=n - x))  # fmt: skip
        paths[sample] = str(folder / f"{sample}.bedmethyl")
        Path(paths[sample]).write_text("".join(lines))
    return paths


def test_counts_streamed_equal_the_counts_made_at_once(tmp_path):
    """The counts job streams the bedMethyl files (a small batch: many runs of positions) and
    writes each contig group from its scratch table: every shard's bytes equal those of the
    table made in memory at once, and nothing else is left beside them."""
    samples = ["a1", "a2", "b1", "b2"]
    sources = cohort_bedmethyls(tmp_path, samples)
    config = yaml.safe_load((REPO / "config/config.yaml").read_text())["dmr"]
    settings = {key: config[key] for key in dmr.DSS_KEYS}  # safe_gap's under a bound
    contrast = dmr.Contrast("a_vs_b", "groups", "A", "B", ("a1", "a2"), ("b1", "b2"), sources,
                            settings)  # fmt: skip
    said: list[str] = []
    for shards, bound in ((1, None), (2, 1.2), (4, None)):
        streamed = [str(tmp_path / f"s{k}.tsv") for k in range(shards)]
        at_once = [str(tmp_path / f"m{k}.tsv") for k in range(shards)]
        groups = dmr.write_counts(contrast, "m", ["c1", "c2", "c3"], streamed, bound, said.append,
                                  batch_bytes=4096)  # fmt: skip
        assert groups == dmr._write_in_memory(contrast, "m", ["c1", "c2", "c3"], at_once, bound,
                                              None)  # fmt: skip
        for ours, reference in zip(streamed, at_once, strict=True):
            assert Path(ours).read_bytes() == Path(reference).read_bytes()
        assert sum(len(Path(p).read_text().splitlines()) - 1 for p in streamed) > 500
    assert sorted(f.name for f in tmp_path.glob("s*")) == [f"s{k}.tsv" for k in range(4)]
    assert not [line for line in said if "in memory" in line]


def test_counts_of_an_unsorted_bedmethyl_are_made_at_once_and_said(tmp_path):
    """A bedMethyl not in the reference's order by position, or with a contig the reference has
    not: one line in the job's log, and the counts made in memory at once, the same bytes; a
    file that is not a bedMethyl: one line naming it."""
    sources = cohort_bedmethyls(tmp_path, ["a", "b"])
    lines = Path(sources["b"]).read_text().splitlines(keepends=True)
    Path(sources["b"]).write_text("".join(lines[10:] + lines[:10]))
    contrast = dmr.Contrast("a_vs_b", "groups", "A", "B", ("a",), ("b",), sources)
    said: list[str] = []
    out = [str(tmp_path / "counts.tsv")]
    dmr.write_counts(contrast, "m", ["c1", "c2", "c3"], out, None, said.append)
    assert said[0] == (
        f"DMR counts: {sources['b']} is not in the reference's contig order by position: the "
        "counts are made in memory at once"
    )
    dmr._write_in_memory(contrast, "m", ["c1", "c2", "c3"], [str(tmp_path / "m.tsv")], None, None)
    assert Path(out[0]).read_bytes() == (tmp_path / "m.tsv").read_bytes()
    Path(sources["b"]).write_text("".join(lines))  # sorted again
    dmr.write_counts(contrast, "m", ["c1", "c2"], out, None, said.append)  # c3 unknown
    assert [line for line in said if line.startswith("DMR counts:")][-1] == (
        "DMR counts: a bedMethyl has contig(s) c3 not in the reference: the counts are made in "
        "memory at once"
    )
    assert Path(out[0]).read_bytes() == (tmp_path / "m.tsv").read_bytes()  # c3 last, as before
    Path(sources["b"]).write_text("not\ta bedMethyl\n")
    with pytest.raises(dmr.InputError, match=f"^{sources['b']}: not a bedMethyl file"):
        dmr.write_counts(contrast, "m", ["c1", "c2", "c3"], out)


def test_sides_with_no_common_site_are_refused_before_dss(tmp_path):
    """The counts job: two sides that each have calls but at no common site (samples of
    different panels) stop with one line naming both sides and their files, before DSS."""
    contrast, (a, b), out = two_sides(tmp_path, "a_vs_b", "groups", ("A", "B"),
                                      {"a": sites(10, 20), "b": sites(30)})  # fmt: skip
    assert refusal(contrast, "m", out) == (
        f"DMR contrast 'a_vs_b': group 'A' ({a}) and group 'B' ({b}) have no site with valid "
        "calls of code 'm' in common: DSS would test no site"
    )
    b.write_text(sites(20, 30))
    assert dmr.write_counts(contrast, "m", ["c1"], out) == [["c1"]]


# The rule's R script on two contrasts' counts. "small": two regions, one of 30 sites both sides
# cover (DSS's one-core loop stops on 50 or fewer), one only side A covers. "overlap": one
# region whose sides cover 130 sites each, 30 of them both (DSS tests 34).
DMR_TEST_RULE = """
rule dmr_test:
    input:
        counts=["counts.tsv", "overlap.counts.tsv", "interleaved.counts.tsv"],
    output:
        sites=["sites.tsv", "overlap.sites.tsv", "interleaved.sites.tsv"],
        dmrs=["dmrs.tsv", "overlap.dmrs.tsv", "interleaved.dmrs.tsv"],
        summary="summary.tsv",
    log:
        "dmr_test.log",
    threads: 1
    params:
        contrasts={contrasts},
    script:
        "{script}"
"""

SMALL_BY_HAND = r"""
suppressPackageStartupMessages(library(DSS))
library(data.table)
dml <- function(counts, part) {
  t <- fread(counts, colClasses = list(character = "chrom"))[region == part]
  frame <- function(s) t[get(paste0("N.", s)) > 0,
    .(chr = chrom, pos = pos, N = get(paste0("N.", s)), X = get(paste0("X.", s)))]
  bs <- makeBSseqData(lapply(c("a1", "a2", "b1", "b2"), frame), c("a1", "a2", "b1", "b2"))
  invisible(capture.output(test <- DMLtest(bs, group1 = c("a1", "a2"), group2 = c("b1", "b2"),
    smoothing = TRUE, smoothing.span = 500, ncores = 2)))
  test
}
by_hand <- function(counts, out) {
  fwrite(as.data.frame(dml(counts, 1)), out, sep = "	", quote = FALSE)
}
by_hand("counts.tsv", "by_hand.sites.tsv")
by_hand("overlap.counts.tsv", "by_hand.overlap.sites.tsv")
by_hand("interleaved.counts.tsv", "by_hand.interleaved.sites.tsv")
thin <- tryCatch({ dml("counts.tsv", 3); "tested" }, error = function(e) conditionMessage(e))
writeLines(thin, "by_hand.thin.txt")
"""


def test_dss_on_small_regions_and_regions_one_side_covers(tmp_path):
    """The dmr_test job (threads 1) through Snakemake: a region of 30 sites (which DSS's
    one-core loop cannot take) gives DSS's own per-site table, every column, as DSS run by hand
    on it; a region only one side covers, and one whose sites DSS's coverage filter keeps none
    of (DSS by hand fails on it), are said in the log and tested for nothing; sides covering no
    site in common but near each other are tested as DSS tests them; the job ends, its summary
    counting the 30."""
    columns = ["a1", "a2", "b1", "b2"]
    lines = ["chrom\tpos\t" + "\t".join(f"N.{c}\tX.{c}" for c in columns) + "\tregion"]
    for i in range(30):
        counts = [(10 + (i + k) % 7, (i * (k + 3)) % (10 + (i + k) % 7)) for k in range(4)]
        lines.append(f"c1\t{100 + 40 * i}\t" + "\t".join(f"{n}\t{x}" for n, x in counts) + "\t1")
    for i in range(20):
        lines.append(f"c2\t{100 + 40 * i}\t12\t6\t12\t3\t0\t0\t0\t0\t2")
    # both sides cover these, one read a sample, 1 kb apart: DSS's coverage filter keeps none
    for i in range(10):
        lines.append(f"c3\t{100 + 1000 * i}\t" + "\t".join([f"1\t{i % 2}"] * 4) + "\t3")
    (tmp_path / "counts.tsv").write_text("\n".join(lines) + "\n")
    # 100 sites side A alone covers, 30 both sides cover, 100 side B alone covers
    lines = [lines[0]]
    for i in range(230):
        a = (12, 6 + i % 5, 10, 4 + i % 3) if i < 130 else (0, 0, 0, 0)
        b = (11, 2 + i % 7, 9, 5 + i % 4) if i >= 100 else (0, 0, 0, 0)
        lines.append(f"c1\t{100 + 40 * i}\t" + "\t".join(map(str, a + b)) + "\t1")
    (tmp_path / "overlap.counts.tsv").write_text("\n".join(lines) + "\n")
    # 30 sites 40 bp apart, side A covering every other one and side B the rest: no site both
    # sides cover, yet DSS's windowed coverage filter keeps them all and DSS tests them
    lines = [lines[0]]
    for i in range(30):
        a = (12, 6 + i % 5, 10, 3 + i % 4) if i % 2 == 0 else (0, 0, 0, 0)
        b = (11, 2 + i % 7, 9, 5 + i % 3) if i % 2 else (0, 0, 0, 0)
        lines.append(f"c1\t{100 + 40 * i}\t" + "\t".join(map(str, a + b)) + "\t1")
    (tmp_path / "interleaved.counts.tsv").write_text("\n".join(lines) + "\n")
    contrast = {
        "name": "small", "label1": "A", "label2": "B", "group1": ["a1", "a2"],
        "group2": ["b1", "b2"], "smoothing": True, "smoothing_span": 500, "delta": 0.1,
        "p_threshold": 1e-5, "minlen": 50, "min_cg": 3, "dis_merge": 100, "pct_sig": 0.5,
    }  # fmt: skip
    contrasts = [contrast, {**contrast, "name": "overlap"}, {**contrast, "name": "interleaved"}]
    (tmp_path / "Snakefile").write_text(
        DMR_TEST_RULE.format(contrasts=repr(contrasts), script=REPO / "scripts" / "dmr_test.R")
    )
    done = subprocess.run(
        [str(REPO / ".venv/bin/snakemake"), "--cores", "1", "--quiet"],
        cwd=tmp_path, capture_output=True, text=True,
    )  # fmt: skip
    log = (tmp_path / "dmr_test.log").read_text() if (tmp_path / "dmr_test.log").exists() else ""
    assert done.returncode == 0, done.stderr[-3000:] + log[-3000:]
    assert "no site of c2 to c2 is covered on both sides (20 by A, 0 by B): nothing to test" in log
    assert (
        "no site of c3 to c3 passes DSS's coverage filter on both sides (10 sites both sides "
        "cover, too few reads near them): nothing to test" in log
    )
    summary = (tmp_path / "summary.tsv").read_text().splitlines()[1:]
    assert summary[0] == "small\t60\t30\t0"
    # the overlap: 34 sites tested (DSS's coverage filter keeps sites near the 30 both sides
    # cover; its one-core loop would stop on them, though each side covers 130)
    assert summary[1].split("\t")[:3] == ["overlap", "230", "34"]
    (tmp_path / "by_hand.R").write_text(SMALL_BY_HAND)
    hand = subprocess.run(["Rscript", "by_hand.R"], cwd=tmp_path, capture_output=True, text=True)
    assert hand.returncode == 0, hand.stderr[-3000:]
    # DSS by hand on the region its coverage filter empties stops with an R error
    assert (tmp_path / "by_hand.thin.txt").read_text().strip() not in ("tested", "")
    ours = (tmp_path / "sites.tsv").read_text().splitlines()
    assert len(ours) == 31
    assert ours == (tmp_path / "by_hand.sites.tsv").read_text().splitlines()
    overlap = (tmp_path / "overlap.sites.tsv").read_text().splitlines()
    assert len(overlap) == 35
    assert overlap == (tmp_path / "by_hand.overlap.sites.tsv").read_text().splitlines()
    # as DSS by hand: all 30 tested, though no site is covered on both sides
    assert summary[2].split("\t")[:3] == ["interleaved", "30", "30"]
    interleaved = (tmp_path / "interleaved.sites.tsv").read_text().splitlines()
    assert interleaved == (tmp_path / "by_hand.interleaved.sites.tsv").read_text().splitlines()


def test_tracks_of_the_run(groups_run):
    """.test/config-groups.yaml's tracks (mod_codes [m]): case1's bigWig and its haplotype 1's
    hold, per position, the percent modified of the bedMethyl's m rows, as modkit's bedmethyl
    tobigwig computes it (float32(N_mod / N_valid_cov) * 100, in float32), every interval."""
    import numpy as np
    import pybigtools

    from numapore.methylation.bedmethyl import read_bedmethyl

    for part, suffix in (("all", ""), ("hp1", ".hp1")):
        bed = groups_run / f"results/case1/methylation/case1.minimap2.cpg{suffix}.bedmethyl.gz"
        expected = {
            (r.chrom, r.start): float(np.float32(np.float32(r.n_mod / r.valid_cov) * 100))
            for r in read_bedmethyl(bed)
            if r.name.split(",")[0] == "m" and r.valid_cov > 0
        }
        track = groups_run / f"results/case1/tracks/case1.minimap2.cpg.{part}.m.bw"
        with pybigtools.open(str(track)) as bw:
            found = {
                (chrom, start): value
                for chrom in bw.chroms()
                for start, end, value in bw.records(chrom)
                if end == start + 1
            }
        assert found == expected and len(found) > 100, part


# ---- statistics over regions (config regions:, .test/config-groups.yaml's two sets)


def table_by(path: Path) -> dict[tuple[str, str], list[dict[str, str]]]:
    """A region table's rows by (level, of), each a dict of its columns."""
    header, *rows = [line.split("\t") for line in path.read_text().splitlines()]
    out: dict[tuple[str, str], list[dict[str, str]]] = {}
    for row in rows:
        out.setdefault((row[0], row[1]), []).append(dict(zip(header, row, strict=True)))
    return out


def merged_bedmethyl(paths: list[Path], out: Path) -> str:
    """The bedMethyl files' counts summed per record (modkit bedmethyl merge's sums), bgzipped
    and indexed, written here row by row from the files."""
    sums: dict[tuple, list[int]] = {}
    for path in paths:
        with gzip.open(path, "rt") as handle:
            for line in handle:
                f = line.rstrip("\n").split("\t")
                key = (f[0], int(f[1]), int(f[2]), f[3], f[5])
                counts = [int(f[9])] + [int(x) for x in f[11:18]]
                sums[key] = [a + b for a, b in zip(sums.get(key, [0] * 8), counts, strict=True)]
    lines = []
    for (chrom, start, end, code, strand), (valid, *rest) in sorted(sums.items()):
        percent = f"{100 * rest[0] / valid:.2f}" if valid else "0.00"
        cells = [chrom, start, end, code, valid, strand, start, end, "255,0,0", valid, percent]
        lines.append("\t".join(map(str, [*cells, *rest])) + "\n")
    out.write_text("".join(lines))
    return pysam.tabix_index(str(out), preset="bed", force=True)


def stats_by_hand(bed: str, regions: Path, out: Path) -> list[dict[str, str]]:
    """`numapore stats` (modkit stats) run on a bedMethyl with its defaults."""
    from numapore.modbam import stats

    assert stats.main([bed, "--regions", str(regions), "-o", str(out), "--force"]) == 0
    header, *rows = [line.split("\t") for line in out.read_text().splitlines()]
    header[0] = header[0].lstrip("#")
    return [dict(zip(header, row, strict=True)) for row in rows]


def entropy_by_hand(bams: list[str], reference: Path, regions: Path, out: Path, threshold=None):
    """`numapore entropy --regions` (modkit entropy) run on the modBAMs: its regions.bed rows."""
    from numapore.modbam import entropy

    args = [a for bam in bams for a in ("--in-bam", bam)]
    args += ["--ref", str(reference), "--cpg", "--regions", str(regions), "-o", str(out)]
    assert entropy.main(args + (["--filter-threshold", threshold] if threshold else [])) == 0
    return (out / "regions.bed").read_text().splitlines()


def sample_probs_threshold(bam: str, out: Path) -> str:
    """The pass threshold of C at the 10th percentile (pileup.filter_percentile, the pileup's
    default) as `numapore sample-probs` (modkit modbam sample-probs) gives it."""
    from numapore.modbam import sample_probs

    assert sample_probs.main([bam, "-p", "0.1", "-o", str(out)]) == 0
    rows = [line.split() for line in (out / "thresholds.tsv").read_text().splitlines()]
    return next(row[2] for row in rows if row[0] == "C")


def test_region_tables_equal_stats_and_entropy_by_hand(groups_run, tmp_path):
    """config regions: (.test/config-groups.yaml's truth regions and 4 kb tiles): each set's
    stats table holds, per sample, haplotype and group, the rows of `numapore stats` run by hand
    on its bedMethyl (a group's: the merge of its samples' files, summed by hand), and its
    entropy table the rows of `numapore entropy --regions` on its modBAM (a haplotype's reads
    by `samtools view -d HP:N`, at its sample's threshold; a group's modBAMs together, at the
    float32 mean of its samples'), the thresholds as `numapore sample-probs` estimates them."""
    work = groups_run
    reference = work / "results/references/ecoli_window/ecoli_window.fa"
    groups = {"case": ["case1", "case2"], "control": ["control1", "control2"]}
    bam = {s: str(work / f"results/{s}/align/{s}.minimap2.bam") for s in [*SAMPLES, "demo"]}
    threshold = {s: sample_probs_threshold(b, tmp_path / f"{s}.probs") for s, b in bam.items()}
    hp_bams = {}
    for s, path in bam.items():
        for hp in (1, 2):
            hp_bams[s, hp] = str(tmp_path / f"{s}.hp{hp}.bam")
            subprocess.run(["samtools", "view", "-b", "-d", f"HP:{hp}", "-o", hp_bams[s, hp],
                            path], check=True)  # fmt: skip
            pysam.index(hp_bams[s, hp])
    for name in ("truth", "tiles"):
        regions = REPO / f".test/regions-{name}.bed"
        count = sum(1 for line in regions.read_text().splitlines() if not line.startswith("#"))
        stats = table_by(work / f"results/regions/{name}/{name}.minimap2.cpg.stats.tsv")
        entropy = table_by(work / f"results/regions/{name}/{name}.minimap2.cpg.entropy.tsv")
        expected_stats, expected_entropy = {}, {}
        for s in [*SAMPLES, "demo"]:
            bed = str(bedmethyl(work, s))
            expected_stats["sample", s] = stats_by_hand(bed, regions, tmp_path / "s.tsv")
            expected_entropy["sample", s] = entropy_by_hand([bam[s]], reference, regions,
                                                            tmp_path / "e")  # fmt: skip
            for hp in (1, 2):
                hp_bed = bed.replace(".bedmethyl", f".hp{hp}.bedmethyl")
                key = ("haplotype", f"{s}.hp{hp}")
                expected_stats[key] = stats_by_hand(hp_bed, regions, tmp_path / "s.tsv")
                expected_entropy[key] = entropy_by_hand(
                    [hp_bams[s, hp]], reference, regions, tmp_path / "e", threshold[s]
                )
        for group, members in groups.items():
            merged = merged_bedmethyl([bedmethyl(work, s) for s in members], tmp_path / "m.bed")
            expected_stats["group", group] = stats_by_hand(merged, regions, tmp_path / "s.tsv")
            mean = np.float32(sum(np.float32(threshold[s]) for s in members) / len(members))
            expected_entropy["group", group] = entropy_by_hand(
                [bam[s] for s in members], reference, regions, tmp_path / "e", repr(float(mean))
            )
        assert list(stats) == list(expected_stats)
        assert list(entropy) == [k for k, rows in expected_entropy.items() if rows]  # in order
        for key, hand in expected_stats.items():
            assert len(stats[key]) == len(hand) == count, (name, key)
            for ours, row in zip(stats[key], hand, strict=True):
                assert {c: ours[c] for c in row} == row, (name, key)
                assert all(ours[c] == "0" for c in set(ours) - set(row) - {"level", "of"})
        for key, hand in expected_entropy.items():
            rows = ["\t".join(list(row.values())[2:]) for row in entropy.get(key, [])]
            assert rows == hand, (name, key)
        assert sum(len(v) for v in expected_entropy.values()) > 5 * count
        # the groups differ where the truth says: dmr regions' percent modified
        if name == "truth":
            case, control = stats["group", "case"], stats["group", "control"]
            gaps = [abs(float(a["percent_m"]) - float(b["percent_m"])) for a, b in
                    zip(case, control, strict=True) if a["name"].startswith("dmr")]  # fmt: skip
            assert min(gaps) > 30
    page = (work / "results/regions/truth/truth.minimap2.cpg.report.html").read_text()
    assert "numapore entropy" in page and "group" in page and "dmr1" in page


def test_an_empty_region_table_names_the_setting(groups_run, tmp_path, capsys):
    """A region set none of whose regions has an entropy window (3 bases): the table has its
    header only, and the job says so naming config regions.<name>; the stats table has its row."""
    from numapore.modbam import regions

    work = groups_run
    bed = tmp_path / "tiny.bed"
    bed.write_text("ecoli_window\t100\t103\ttiny\n")
    entity = {
        "level": "sample", "of": "case1", "threshold": None, "percentile": 0.1,
        "bams": [str(work / "results/case1/align/case1.minimap2.bam")],
        "bedmethyl": [str(bedmethyl(work, "case1"))],
        "reference": str(work / "results/references/ecoli_window/ecoli_window.fa"),
    }  # fmt: skip
    out = tmp_path / "tiny.entropy.tsv"
    assert regions.write_entropy([entity], str(bed), "cpg", True, str(out), "tiny") == 0
    assert out.read_text() == "\t".join(regions.ENTROPY_COLUMNS) + "\n"
    err = capsys.readouterr().err.splitlines()
    assert err[-1] == (
        f"numapore: {out} has no row: no region of {bed} has an entropy window (cpg: 4 "
        "positions within 50 bases, each read by 3 reads or more, numapore entropy's defaults) "
        "(config regions.tiny)"
    )
    assert regions.write_stats([entity], str(bed), str(tmp_path / "s.tsv"), "tiny") == 1


@pytest.mark.parametrize(
    "value, message",
    [
        (
            0.5,
            "config dmr.max_memory_gb: 0.5 is too small for DSS on contrast 'case_vs_control' "
            "(4 samples): R and DSS take 1 GiB before any site, 1.01 GiB with 10,000 sites; "
            "give at least 1.1, or leave it unset (no bound)",
        ),
        ("4G", "--config dmr=...: dmr.max_memory_gb: '4G' is not of type 'number'"),
        (-2, "--config dmr=...: dmr.max_memory_gb: -2 is less than the minimum of 0"),
    ],
)
def test_memory_bound_mistakes_are_one_line(groups_clone, value, message):  # noqa: F811
    """config dmr.max_memory_gb: stopped at the plan's build, before any job, one line."""
    with pytest.raises(InputError) as err:
        build_with("dmr", max_memory_gb=value)
    assert str(err.value) == message


def test_memory_bound_reaches_the_jobs(groups_clone):  # noqa: F811
    """The bound: dmr_test's mem_mib for a cluster's scheduler; none without it (0)."""
    assert build_with("dmr", max_memory_gb=2.5).dmr_test_resources() == {"mem_mib": 2560}
    assert build_with("dmr", max_memory_gb=2.5).dmr_memory_bound() == 2.5
    assert build_with().dmr_test_resources() == {} and build_with().dmr_memory_bound() is None
    with pytest.raises(InputError) as err:
        build_with("dmr", max_memory=4)
    assert str(err.value) == (
        "--config dmr=...: unknown config key 'dmr.max_memory'; did you mean `max_memory_gb`?"
    )
