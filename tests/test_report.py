"""The run report: one workflow run of .test/config-signal.yaml's simulated demo and the real
E. coli reads (against region.fa), then Snakemake's report (tests/runs_signal.py's report_run);
the figures' numbers (written beside each figure) are checked against the TSV outputs and the
tools, the MultiQC report against samtools and the accounting, and both HTML reports are opened
in headless Chromium (no console errors, every sample shown)."""

from __future__ import annotations

import base64
import gzip
import io
import json
import os
import shlex
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import matplotlib.image
import numpy as np
import pysam
import pandas as pd
import pytest
import pybigtools
from browser import Browser
from igv import missing as igv_missing
from igv import snapshot as igv_snapshot
from calls_qc_check import check_calls_qc
from conftest import primary_mapped
from tables import read_table

from numapore.methylation.accuracy import roc_auc
from numapore.methylation.bedmethyl import pandas_frame
from numapore.execution.launch import Process, run_processes
from numapore.report.figures import read_fates, roc_curve, row_label, samtools_stats
from numapore.base.rulelog import LogAndTerminal
from numapore.execution.steps import CalledReads, reads_to_call
from numapore.execution.tools import call_methylation_command
from numapore.nanopolish.calls import llr_probability

SAMPLES = ["demo", "ecoli"]
ALIGNER = "minimap2"
# The report's items per sample: subcategory, the item's label and its file's suffix.
ITEMS = [
    ("Alignment QC", "alignment QC", "alignment_qc.png"),
    ("Methylation", "methylation", "methylation.png"),
    ("Read accounting", "accounting plot", "accounting.png"),
    ("Read accounting", "accounting table", "accounting.html"),
    ("Provenance", "provenance", "provenance.html"),
    ("Tracks", "tracks", "tracks.html"),  # the report run turns 5mC tracks on
    ("QC of the calls", "cpg calls QC", "cpg.calls_qc.png"),
    ("QC of the calls", "cpg calls QC table", "cpg.calls_qc.html"),
]


def out(work, sample, name):
    """A file of a sample's results (name relative to results/<sample>/)."""
    return work / "results" / sample / name


def figure_data(work, sample, kind):
    """The numbers a report figure shows (the .data.json written beside it)."""
    return json.loads(out(work, sample, f"report/{sample}.{ALIGNER}.{kind}.data.json").read_text())


def samtools(*args) -> str:
    """A samtools command's standard output."""
    run = subprocess.run(["samtools", *args], capture_output=True, check=True)
    return run.stdout.decode(errors="replace")


def test_main_command_says_where_the_reports_are(report_run):
    work, run = report_run
    mqc = work / "results/multiqc/numapore_multiqc.html"
    assert f"MultiQC report over every sample: {mqc}" in run.stderr
    assert "--report results/report.html" in run.stderr
    assert (work / "results/report.html").stat().st_size > 100_000


@pytest.mark.parametrize("sample", SAMPLES)
def test_alignment_qc_figure_matches_samtools_and_the_bam(report_run, sample):
    work, _ = report_run
    data = figure_data(work, sample, "alignment_qc")
    bam = out(work, sample, f"align/{sample}.{ALIGNER}.bam")
    stats = samtools_stats(out(work, sample, f"align/{sample}.{ALIGNER}.stats.txt"))["summary"]
    flagstat = json.loads(out(work, sample, f"align/{sample}.{ALIGNER}.flagstat.json").read_text())
    assert data["mapped"] == stats["reads mapped"] == flagstat["QC-passed reads"]["primary mapped"]
    assert data["reads"] == data["mapped"] + data["unmapped"] == stats["raw total sequences"]
    assert sum(data["read_length"]["reads"]) == data["reads"]
    assert max(data["read_length"]["length"]) == stats["maximum length"]
    # One identity per primary alignment; depth x bin width adds up to samtools depth's bases.
    assert sum(data["identity"]["counts"]) == data["primary_alignments"] == len(primary_mapped(bam))
    depth = samtools("depth", "-G", "UNMAP,SECONDARY,SUPPLEMENTARY,QCFAIL,DUP", str(bam))
    bases = sum(int(line.split("\t")[2]) for line in depth.splitlines())
    shown = sum(sum(c["depth"]) * c["bin_width"] for c in data["coverage"].values())
    assert shown == pytest.approx(bases, rel=1e-9)
    # and bin by bin: samtools depth's bases (position p covers [p - 1, p)) within each bin
    for contig, cov in data["coverage"].items():
        rows = [line.split("\t") for line in depth.splitlines() if line.split("\t")[0] == contig]
        first = int(rows[0][1]) - 1
        per_base = np.zeros(int(rows[-1][1]) - first + 1)
        for _, position, count in rows:
            per_base[int(position) - 1 - first] = int(count)
        before = np.concatenate(([0.0], np.cumsum(per_base)))  # bases before first + i
        edges = np.append(cov["bin_start"], cov["bin_start"][-1] + cov["bin_width"]) - first
        whole = np.floor(edges).astype(int)
        bases_to = before[whole] + per_base[whole] * (edges - whole)
        shown_bins = np.array(cov["depth"]) * cov["bin_width"]
        assert shown_bins == pytest.approx(np.diff(bases_to), rel=1e-6, abs=1e-6), contig


def modbam_ml(bam: Path) -> tuple[int, list[int]]:
    """Reads with ML values among a modBAM's primary records, and each one's ML count (pysam)."""
    counts = []
    with pysam.AlignmentFile(str(bam), check_sq=False) as handle:
        for rec in handle.fetch(until_eof=True):
            if not (rec.is_secondary or rec.is_supplementary) and rec.has_tag("ML"):
                counts.append(len(rec.get_tag("ML")))
    counts = [c for c in counts if c]
    return len(counts), counts


@pytest.mark.parametrize("sample", SAMPLES)
def test_methylation_figure_matches_the_bedmethyl_and_modbam(report_run, sample):
    """The figure's numbers are the bedMethyl's sites and the modBAM's calls (any source)."""
    work, _ = report_run
    data = figure_data(work, sample, "methylation")
    name = f"methylation/{sample}.{ALIGNER}.cpg"
    bed = pandas_frame(out(work, sample, f"{name}.bedmethyl.gz"))
    assert data["codes"] == ["m"] and data["sites"]["m"] == len(bed) > 0
    assert sum(data["fraction_modified"]["m"]["counts"]) == (bed["valid_cov"] > 0).sum()
    reads, per_read = modbam_ml(out(work, sample, f"{name}.modbam.bam"))
    assert sum(data["calls_per_read"]["counts"]) == data["reads_with_calls"] == reads > 0
    assert data["calls"]["m"] == sum(per_read) == sum(data["probability"]["m"])
    edges = data["calls_per_read"]["edges"]
    assert (edges[0], edges[-1]) == (min(per_read), max(per_read))
    along = data["along_reference"]["m"]
    assert set(along) == set(bed["chrom"])
    for contig, series in along.items():
        sites = bed[bed["chrom"] == contig]
        assert series["bin_start"][0] == sites["start"].min()
        fraction = sites["n_mod"] / sites["valid_cov"].where(sites["valid_cov"] > 0)
        assert min(series["mean_fraction"]) >= fraction.min()
        assert max(series["mean_fraction"]) <= fraction.max()


@pytest.mark.parametrize("sample", SAMPLES)
def test_accounting_plot_and_table_match_the_accounting_tsv(report_run, sample):
    work, _ = report_run
    tsv = out(work, sample, f"{sample}.{ALIGNER}.accounting.tsv")
    data = figure_data(work, sample, "accounting")
    rows = pd.read_csv(tsv, sep="\t", dtype=str, keep_default_na=False).to_dict("records")
    assert data["counts"] == {row_label(r): int(r["reads"]) for r in rows if r["reads"] != "NA"}
    table = read_table(tsv)
    (basecalled,) = [
        int(r["reads"]) for r in rows if (r["stage"], r["what"]) == ("basecalled", "reads")
    ]
    assert sum(data["fates"].values()) == basecalled
    assert data["fates"]["with calls"] == int(table[("methylation", "reads with calls", "")])
    page = out(work, sample, f"report/{sample}.{ALIGNER}.accounting.html").read_text()
    assert page.count("<tr>") == len(rows) + 1


def test_accuracy_figure_matches_the_accuracy_tsv(report_run):
    work, _ = report_run
    data = figure_data(work, "demo", "accuracy")
    acc = pd.read_csv(out(work, "demo", f"methylation/demo.{ALIGNER}.cpg.accuracy.tsv"), sep="\t")
    row = acc.iloc[0]
    assert round(data["auc"], 4) == row["auc"]
    assert data["roc_auc_trapezoid"] == pytest.approx(data["auc"], abs=1e-9)  # the plotted curve
    assert len(data["sites"]["truth"]) == len(data["sites"]["called"]) == row["sites"]
    shown_r = np.corrcoef(data["sites"]["called"], data["sites"]["truth"])[0, 1]
    assert round(shown_r, 4) == round(data["site_correlation"], 4) == row["site_correlation"]
    assert not out(work, "ecoli", f"report/ecoli.{ALIGNER}.accuracy.png").exists()


@pytest.mark.parametrize("sample", SAMPLES)
def test_provenance_page_shows_the_run_records_and_tool_versions(report_run, sample):
    work, _ = report_run
    data = figure_data(work, sample, "provenance")
    page = out(work, sample, f"report/{sample}.{ALIGNER}.provenance.html").read_text()
    for step, rule in [("alignment", "align"), ("methylation", "call_methylation.cpg")]:
        rule, _, motif = rule.partition(".")
        name = f"{sample}.{ALIGNER}.{motif}." if motif else f"{sample}.{ALIGNER}."
        record = json.loads((work / f"results/logs/{rule}/{name}1-of-1.run.json").read_text())
        (job,) = data["steps"][step]
        assert job["strategy"] == record["strategy"]
        assert [p["command"] for p in job["processes"]] == [
            p["command"] for p in record["processes"]
        ]
        assert all(p["policy"].split("\n")[0] in page for p in record["processes"])
    assert data["steps"]["methylation"][0]["io_mode"] == "fast5"
    assert data["tool_versions"]["samtools"] == samtools("--version").splitlines()[0]
    assert "nanopolish version 0.14.0" in page and "io_mode: fast5" in page


def nonzero(counts):
    """The non-zero entries of a dict of counts (MultiQC shows other samples' fates as 0)."""
    return {k: v for k, v in counts.items() if v}


def test_tracks_listed_in_the_report_and_opened_in_igv(report_run, tmp_path):
    """Each sample's tracks page lists every bigWig in results/<sample>/tracks, each with as many
    intervals as its bedMethyl has 5mC rows; each reference's IGV session names its FASTA and
    its samples' tracks; IGV itself (headless, under Xvfb) opens the demo's session without an
    error and draws its track."""
    assert igv_missing() == [], "./setup.sh --tests installs igv, xvfb and xauth"
    work, _ = report_run
    sessions: dict[str, list[Path]] = {}
    genomes: dict[str, Path] = {}
    for sample in SAMPLES:
        listed = figure_data(work, sample, "tracks")
        tracks = sorted(out(work, sample, "tracks").glob("*.bw"))
        assert [t["file"] for t in listed["tracks"]] == [t.name for t in tracks] != []
        for row in listed["tracks"]:
            bed = f"methylation/{sample}.{ALIGNER}.{row['motif']}.bedmethyl.gz"
            with gzip.open(out(work, sample, bed), "rt") as rows:
                assert row["intervals"] == sum(line.split("\t")[3] == "m" for line in rows)
        sessions.setdefault(listed["session"], []).extend(tracks)
    assert len(sessions) == 2  # the demo's reference and the E. coli sample's region.fa
    for session, tracks in sessions.items():
        root = ET.parse(work / session).getroot()
        folder = (work / session).parent
        fasta = Path(os.path.normpath(folder / root.get("genome")))
        assert fasta.parent.parent == work / "results/references" and fasta.exists()
        genomes[session] = fasta
        shown = [Path(os.path.normpath(folder / r.get("path"))) for r in root.iter("Resource")]
        assert shown == tracks
    session = next(s for s, t in sessions.items() if t[0].name.startswith("demo."))
    with pybigtools.open(str(sessions[session][0])) as track:
        chrom, start, _, _ = next((c, *r) for c in track.chroms() for r in track.records(c))
    png, errors = igv_snapshot(
        work / session, genomes[session], f"{chrom}:{start + 1}-{start + 2000}", tmp_path
    )
    assert errors == [], (tmp_path / "igv.log").read_text()[-3000:]
    pixels = np.asarray(matplotlib.image.imread(png))[..., :3]
    # IGV draws a bigWig's bars in its default track colour, (0, 0, 178)
    assert (np.abs(pixels - np.array([0, 0, 178]) / 255) < 0.02).all(axis=-1).sum() > 10


def test_multiqc_report_matches_samtools_and_the_accounting(report_run):
    work, _ = report_run
    data = json.loads(
        (work / "results/multiqc/numapore_multiqc_data/multiqc_data.json").read_text()
    )
    raw, plots = data["report_saved_raw_data"], data["report_plot_data"]
    fates_plot = plots["numapore_accounting_plot"]["datasets"][0]
    mapped_plot = plots["samtools_alignment_plot"]["datasets"][0]
    for sample in SAMPLES:
        name = f"{sample}.{ALIGNER}"
        stats = samtools_stats(out(work, sample, f"align/{name}.stats.txt"))["summary"]
        flagstat = json.loads(out(work, sample, f"align/{name}.flagstat.json").read_text())
        assert raw["multiqc_samtools_stats"][name]["reads_mapped"] == stats["reads mapped"]
        assert (
            raw["multiqc_samtools_flagstat"][name]["mapped_passed"]
            == flagstat["QC-passed reads"]["mapped"]
        )
        column = mapped_plot["samples"].index(name)
        shown = {c["name"]: c["data"][column] for c in mapped_plot["cats"]}
        assert shown["Unmapped"] == stats["reads unmapped"]
        # numapore's custom content: read fates as in the accounting TSV, also in the bar plot.
        rows = pd.read_csv(out(work, sample, f"{name}.accounting.tsv"), sep="\t", dtype=str)
        fates = read_fates(rows.fillna("").to_dict("records"))
        assert nonzero(raw["multiqc_numapore_accounting_plot"][name]) == nonzero(fates)
        column = fates_plot["samples"].index(name)
        assert nonzero({c["name"]: c["data"][column] for c in fates_plot["cats"]}) == nonzero(fates)
        bed = pandas_frame(out(work, sample, f"methylation/{name}.cpg.bedmethyl.gz"))
        reads, per_read = modbam_ml(out(work, sample, f"methylation/{name}.cpg.modbam.bam"))
        meth = raw["multiqc_numapore_methylation_table"][name]
        assert (meth["5mC calls"], meth["5mC sites"]) == (sum(per_read), len(bed))
        assert meth["reads_with_calls"] == reads
        # The QC of the calls: its table and line plot show the pass table's numbers.
        rows = pass_rows(work, sample)
        shown = raw["multiqc_numapore_calls_qc_table"][name]
        assert shown["reads sampled"] == int(rows[0]["reads_sampled"])
        assert shown["C threshold"] == float(rows[0]["threshold"])
        for row in rows:
            code = "canonical C" if row["code"] == "-" else "5mC"
            assert shown[f"{code} pass %"] == round(float(row["pass_fraction"]) * 100, 2)
        lines = plots["numapore_calls_qc_probabilities_plot"]["datasets"][0]["lines"]
        assert {line["name"] for line in lines} >= {f"{name} 5mC", f"{name} canonical C"}


def pass_rows(work, sample):
    """A sample's QC of the calls: its pass table's rows."""
    path = out(work, sample, f"qc/{sample}.{ALIGNER}.cpg.pass.tsv")
    header, *lines = path.read_text().splitlines()
    return [dict(zip(header.split("\t"), line.split("\t"), strict=True)) for line in lines]


@pytest.mark.parametrize("sample", SAMPLES)
def test_calls_qc_equals_summary_and_sample_probs_at_the_pileups_threshold(
    report_run, sample, tmp_path
):
    """The QC of a signal sample's calls: numapore summary's and sample-probs' tables of its
    modBAM at its pileup's threshold, which keeps nanopolish's (the probability of an LLR of
    methylation.call_threshold); the report's figure shows those numbers and that threshold."""
    work, _ = report_run
    bam = out(work, sample, f"methylation/{sample}.{ALIGNER}.cpg.modbam.bam")
    rows = check_calls_qc(work, sample, ALIGNER, "cpg", bam, tmp_path)
    assert {r["threshold_source"] for r in rows} == {"given"}
    assert {r["threshold_setting"] for r in rows} == {"methylation.call_threshold 2.0 (LLR)"}
    assert float(rows[0]["threshold"]) == pytest.approx(llr_probability(2.0), abs=1e-7)
    data = figure_data(work, sample, "cpg.calls_qc")
    assert data["pass"] == rows
    assert data["thresholds"] == {"C": float(rows[0]["threshold"])}
    histogram = out(work, sample, f"qc/{sample}.{ALIGNER}.cpg.probabilities.tsv")
    drawn = sum(sum(h["count"]) for h in data["histograms"].values())
    assert drawn == sum(int(x.split("\t")[4]) for x in histogram.read_text().splitlines()[1:])
    assert drawn == sum(int(r["all_calls"]) for r in rows)


CLICK = "((t) => { const a = [...document.querySelectorAll('a')]"
CLICK += ".find(e => e.textContent.trim() === t); if (a) a.click(); return !!a; })(%s)"
# Open an item: by its row, or, when the items of a subcategory differ only in their label (the
# report then offers the labels as a choice above one row), by choosing its label first.
OPEN_ITEM = """((t) => {
  const choice = [...document.querySelectorAll('label')].find(e => e.textContent.trim() === t);
  if (choice) choice.click();
  const rows = [...document.querySelectorAll('tr')].filter(r => r.querySelector('a[iconname=eye]'));
  const row = choice ? rows[0] : rows.find(r => r.textContent.includes(t));
  row.querySelector('a[iconname=eye]').click();
  return true;
})(%s)"""
SHOWN = "[...document.querySelectorAll('img,iframe')].map(e => e.src)"


@pytest.fixture(scope="module")
def chromium():
    """One headless Chromium for this file's pages (a start costs seconds of CPU)."""
    with Browser() as browser:
        yield browser


@pytest.fixture
def browser(chromium):
    """The module's Chromium on a blank page, no errors or events of an earlier test kept."""
    chromium.call("Page.navigate", session=True, url="about:blank")
    chromium.drain(0.5)
    chromium.errors.clear()
    return chromium


def test_snakemake_report_opens_in_chromium_with_every_sample(report_run, browser):
    """Each sample's section holds its figures: the images shown are the rule outputs' bytes."""
    work, _ = report_run
    shots = work / "screenshots"
    shots.mkdir(exist_ok=True)
    browser.open(work / "results/report.html")
    assert browser.errors == []
    text = browser.evaluate("document.body.innerText")
    assert all(sample in text.split("\n") for sample in SAMPLES)
    browser.screenshot(shots / "report.png")
    for sample in SAMPLES:
        items = ITEMS + [("Accuracy (simulated)", "accuracy", "accuracy.png")] * (sample == "demo")
        for subcategory, figure, suffix in items:
            # Back to the results (a breadcrumb once an item is shown), then the sample's
            # section and the subcategory in it.
            browser.evaluate(CLICK % json.dumps("Results"))
            for link in (sample, subcategory):
                browser.drain(0.3)
                assert browser.evaluate(CLICK % json.dumps(link)), link
            browser.drain(0.3)
            browser.evaluate(OPEN_ITEM % json.dumps(figure))
            browser.drain(1.0)
            name = f"{sample}.{ALIGNER}.{suffix}"
            shown = [s for s in browser.evaluate(SHOWN) if f"filename={name};" in s]
            assert len(shown) == 1, (sample, subcategory, browser.evaluate(SHOWN))
            embedded = base64.b64decode(shown[0].split("base64,", 1)[1])
            assert embedded == out(work, sample, f"report/{name}").read_bytes()
            browser.screenshot(shots / f"{sample}.{suffix.split('.')[0]}.png")
    assert browser.errors == []
    print(f"screenshots: {shots}")


def rule_graph(html: str) -> list[str]:
    """The rule names of the rule graph a Snakemake report draws (its Vega spec's nodes)."""
    start = html.index('"node-data", "values": ') + len('"node-data", "values": ')
    nodes, _ = json.JSONDecoder().raw_decode(html[start:])
    return [node["rule"] for node in nodes]


def test_report_lands_on_the_results_with_each_rule_once(report_run, browser):
    """The report opens on the summary with every result a click away (not on the rule graph),
    and its rule graph names each rule once: the demo's reads are simulated, one job deeper than
    the E. coli sample's files, yet its first jobs sit at the same depth (after the reference's
    check) as the sample's."""
    work, _ = report_run
    html = work / "results/report.html"
    names = rule_graph(html.read_text())
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
    assert {"simulate_reads", "stage_reads", "signal_census", "nanopolish_index"} <= set(names)
    browser.open(html)
    # The rule graph is drawn in div#rulegraph (its spec is script#rulegraph): not here.
    assert browser.evaluate("document.querySelector('div#rulegraph') === null")
    text = browser.evaluate("document.body.innerText")
    assert "numapore run report" in text and "2 samples (demo, ecoli)" in text
    links = browser.evaluate("[...document.querySelectorAll('a')].map(a => a.href)")
    for sample in SAMPLES:
        assert f"javascript:app.showCategory('{sample}')" in links
        for _, _, suffix in ITEMS:
            path = f"results/{sample}/report/{sample}.{ALIGNER}.{suffix}"
            assert f"javascript:app.showResultInfo('{path}')" in links, path
    browser.screenshot(work / "report.landing.png")
    # One click on a result: its caption and view button.
    assert browser.evaluate(CLICK % json.dumps("accuracy"))
    browser.drain(0.5)
    assert "ROC curve" in browser.evaluate("document.body.innerText")
    assert browser.errors == []


def test_multiqc_report_opens_in_chromium_with_every_sample(report_run, browser):
    work, _ = report_run
    browser.open(work / "results/multiqc/numapore_multiqc.html")
    text = browser.evaluate("document.body.innerText")
    sections = ["numapore: read accounting", "numapore: base modifications", "Samtools"]
    for section in sections + ["numapore: QC of the calls", "numapore: call probabilities"]:
        assert section in text
    for section_id in ("numapore_calls_qc", "numapore_calls_qc_probabilities"):
        assert browser.evaluate(f"document.getElementById('{section_id}') !== null"), section_id
    for sample in SAMPLES:
        assert f"{sample}.{ALIGNER}" in text
    browser.screenshot(work / "multiqc.png")
    browser.evaluate("document.getElementById('numapore_methylation').scrollIntoView()")
    browser.drain(0.5)
    browser.screenshot(work / "multiqc.methylation.png")
    assert browser.errors == []


def test_roc_curve_area_is_the_rank_auc():
    """The plotted ROC curve's area equals numapore.methylation.accuracy's Mann-Whitney AUC, ties
    included."""
    rng = np.random.default_rng(3)
    labels = rng.random(500) < 0.4
    scores = np.round(rng.normal(labels * 1.5, 1.0), 1)  # rounded: many ties
    fpr, tpr = roc_curve(scores, labels)
    assert (fpr[0], tpr[0], fpr[-1], tpr[-1]) == (0, 0, 1, 1)
    assert np.trapezoid(tpr, fpr) == pytest.approx(roc_auc(scores, labels), abs=1e-12)


def test_log_and_terminal_writes_both_streams():
    log, terminal = io.StringIO(), io.StringIO()
    stream = LogAndTerminal(log, terminal)
    print("[numapore.convert] 5/10 files (50%)", file=stream, flush=True)
    assert log.getvalue() == terminal.getvalue() == "[numapore.convert] 5/10 files (50%)\n"


def test_methylation_progress_counts_nanopolish_output(report_run, tmp_path):
    """The progress lines of a real nanopolish run (every 0.5 s here, 30 s in the workflow)
    count the reads in its output so far, ending at the reads of the finished table."""
    work, _ = report_run
    prefix = work / "results/ecoli"
    calls = tmp_path / "calls.tsv"
    # The alignments of a quarter of the reads (every record of each): a run of a few seconds
    bam = tmp_path / "quarter.bam"
    with pysam.AlignmentFile(str(prefix / f"align/ecoli.{ALIGNER}.bam")) as whole:
        records = list(whole)
        names = sorted({r.query_name for r in records})[::4]
        with pysam.AlignmentFile(str(bam), "wb", template=whole) as part:
            for record in records:
                if record.query_name in names:
                    part.write(record)
    pysam.index(str(bam))
    command = call_methylation_command(
        prefix / "reads/fast5/ecoli.fasta",
        bam,
        work / "results/references/region/region.fa",
        calls,
        threads=1,
        min_mapq=20,
    )
    total = reads_to_call(bam, 20)
    assert total >= 10
    process = Process(0, None, 1, f"bash -o pipefail -c {shlex.quote(command)}", work, calls, work)
    progress = CalledReads(total)
    log = tmp_path / "log.txt"
    with open(log, "w") as handle:
        run_processes([process], handle, progress, interval=0.5)
    lines = [ln for ln in log.read_text().splitlines() if ln.startswith("[progress after")]
    assert lines and all("reads called so far" in ln for ln in lines)
    assert f"of {total} reads" in lines[-1]
    # A last count after the end: every read of the finished table.
    assert progress([process]).startswith(
        f"nanopolish: {pd.read_csv(calls, sep=chr(9))['read_name'].nunique()} of {total} reads"
    )
