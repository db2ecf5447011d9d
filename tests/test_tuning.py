"""Host tuning (config tune; numapore.compare.tuning, rules/tune.smk): the decision's rule, the
slice's size and the cap, the cache, the adoptable host file; the measuring on a slice of the
real E. coli reads with the real tools; and in signal_fast5_run (tune: on), the tuning's record,
its place in the run record and on the provenance data, and a second run that reuses it; a
sample too small to pay back its tuning, told before any job."""

from __future__ import annotations

import gzip
import html
import json
import re
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pyslow5
import pysam
import pytest
import yaml
from conftest import SHARED, run_workflow
from project import REPO

from numapore.base.errors import InputError
from numapore.compare import tune_pileup, tune_strategy, tuning
from numapore.compare.recommend import beats
from numapore.compare.measure import MIN_MEASURABLE_S
from numapore.execution.aligners import ALIGNERS
from numapore.execution.hosts import host_config_from_dict, load_host_config
from numapore.execution.steps import run_alignment, run_methylation
from numapore.execution.topology import Node, Topology, parse_cpulist
from numapore.report.provenance import provenance_page, tuning_line
from numapore.signal.convert import convert
from numapore.signal.fast5 import list_fast5, read_layout

MODES = ["fast5", "fast5-pool", "slow5"]
# signal_fast5_run's call_methylation job record
RECORD = "results/logs/call_methylation/clean.minimap2.cpg.1-of-1.run.json"


@pytest.mark.parametrize(
    "walls, chosen, why",
    [
        # slow5 faster in every repeat, by far more than the spread and 5 %: it wins
        ({"fast5": [10.0, 10.4], "fast5-pool": [9.9, 10.3], "slow5": [2.1, 2.3]}, "slow5", "x4"),
        # faster medians but the repeats overlap: the simpler one runs
        ({"fast5": [10.0, 12.0], "slow5": [9.0, 11.0]}, "fast5", "spread"),
        # every repeat faster, beyond the spread, but by under 5 %: the simpler one runs
        ({"fast5": [10.0, 10.01], "slow5": [9.7, 9.71]}, "fast5", "5%"),
        # the baseline ran too short to measure: nothing is a reason
        ({"fast5": [1.0, 1.1], "slow5": [0.2, 0.21]}, "fast5", "too short"),
        # the fastest of two winners
        ({"fast5": [10.0, 10.1], "fast5-pool": [6.0, 6.1], "slow5": [4.0, 4.1]}, "slow5", "x2"),
    ],
)
def test_decide_by_the_comparisons_honest_rule(walls, chosen, why):
    mode, reason = tuning.decide(walls, MIN_MEASURABLE_S)
    assert mode == chosen
    assert why in reason


def test_slice_sized_from_the_first_cell_and_capped():
    # 0.5 s on 100 reads: a cell must run 3 s (1.5 x 2 s), 600 reads; 6 cells of them and the
    # first take 18.5 s of a 50 s run (10,000 reads): under half a 100 % cap, over half a 50 % one.
    want, why = tuning.slice_size(0.5, 100, 10_000, 6, 1.0, 2.0)
    assert want == 600 and "6 cells of 600 reads" in why
    want, why = tuning.slice_size(0.5, 100, 10_000, 6, 0.5, 2.0)
    assert want == 0 and "more than 50% of the 50% cap on the whole run's 50.0 s" in why
    # a first cell long enough: the slice stays
    assert tuning.slice_size(4.0, 100, 200_000, 6, 0.05, 2.0)[0] == 100
    # never more reads than the sample has: then measuring costs more than the run itself
    want, why = tuning.slice_size(0.1, 10, 50, 2, 1.0, 2.0)
    assert want == 0 and "2 cells of 50 reads" in why


def test_the_cap_weighs_the_saving_the_storage_probe_predicts():
    """1,500 reads behind 5 ms storage: a first cell of 2.5 s on 10 reads puts the run at
    375 s; 6 cells of 10 reads (17.5 s) are more than half its 5 % cap. The storage probe
    predicts 1,500 x 34 requests x 5 ms = 255 s of reading that an I/O mode may save: half of
    that is the cap, and the cells are measured. Without a prediction (or a small one: local
    storage), the run's 5 % stays the cap."""
    saving = tuning.reading_seconds(1500, 0.005)
    assert saving == pytest.approx(255.0)
    want, why = tuning.slice_size(2.5, 10, 1500, 6, 0.05, 2.0)
    assert want == 0 and why.startswith("measuring 6 cells of 10 reads would take about 17.5 s")
    assert "more than 50% of the 5% cap on the whole run's 375.0 s" in why
    want, why = tuning.slice_size(2.5, 10, 1500, 6, 0.05, 2.0, saving)
    assert want == 10 and why == (
        "6 cells of 10 reads, about 17.5 s of the run's 375.0 s, within 50% of the cap of "
        "127.5 s (50% of the 255.0 s the storage probe predicts the baseline spends reading; "
        "5% of the whole run's 375.0 s is less)"
    )
    # local storage in the page cache: 0.005 ms a request, 2.6 s of reading; the run's cap
    local = tuning.reading_seconds(1500, 0.000005)
    assert tuning.slice_size(2.5, 10, 1500, 6, 0.05, 2.0, local) == (
        tuning.slice_size(2.5, 10, 1500, 6, 0.05, 2.0)
    )
    # a saving too small for the cells even at its share: not measured, the probe's cap said
    want, why = tuning.slice_size(2.5, 10, 1500, 6, 0.05, 2.0, 60.0)
    assert want == 0 and "more than 50% of the cap of 30.0 s (50% of the 60.0 s" in why


def test_cells_scaled_to_the_whole_run_part_by_part():
    """10 reads of 1 of 3 files, to 3,000 reads: nanopolish's start (a call on one read) once
    per call job, each further read's call by reads (0.1 s); fast5's index of the FAST5 by
    files (x3); slow5's conversion start once, then 0.1 s a read: its first task (255 more
    reads) alone, the rest over the readers; its BLOW5 index's start once, the rest by reads."""
    fast5 = {"index_s": 2.0, "call_start_s": 2.1, "call_s": 3.0}
    # 6.0 (index x3) + 2.1 + 0.1 x 2,999
    assert tuning.whole_run_seconds(fast5, 10, 1, 3000, 3) == pytest.approx(308.0)
    # two call jobs: two starts, 2,998 reads after them
    assert tuning.whole_run_seconds(fast5, 10, 1, 3000, 3, 2, 2) == pytest.approx(310.0)
    # the readers do not share fast5's calls (fast5-pool's are in its cells)
    assert tuning.whole_run_seconds(fast5, 10, 1, 3000, 3, 4) == pytest.approx(308.0)
    slow5 = {
        "convert_start_s": 1.5, "convert_s": 2.4, "index_start_s": 0.2, "index_s": 0.209,
        "call_start_s": 2.0, "call_s": 2.18,
    }  # fmt: skip
    # calls 2.0 + 0.02 x 2,999; index 0.2 + 0.001 x 2,999; conversion 1.5 + 0.1 x 2,999
    assert tuning.whole_run_seconds(slow5, 10, 1, 3000, 3) == pytest.approx(366.579)
    # two readers: of the 2,999 reads after the start, 255 alone, 2,744 two at a time
    assert tuning.whole_run_seconds(slow5, 10, 1, 3000, 3, 2) == pytest.approx(229.379)
    # a run smaller than the conversion's first task: nothing to share
    assert tuning.whole_run_seconds(slow5, 10, 1, 200, 3, 2) == tuning.whole_run_seconds(
        slow5, 10, 1, 200, 3, 1
    )
    # the rule weighs the estimates: slow5's slice walls overlap fast5's, its whole run does not
    walls = {"fast5": [5.0, 5.6], "slow5": [4.0, 5.4]}
    estimates = {"fast5": [308.0, 340.0], "slow5": [229.4, 238.0]}
    assert tuning.decide(walls, 2.0)[0] == "fast5"
    mode, why = tuning.decide(walls, 2.0, estimates)
    assert mode == "slow5" and why.endswith("(x1.39 on the whole run, estimated)")


def test_candidates_order_and_files():
    assert tuning.io_candidates(["fast5", "fast5"]) == MODES
    assert tuning.io_candidates(["fast5", "pod5"]) == ["slow5"]
    assert tuning.order(["a", "b"], 3) == [
        ("a", 1),
        ("b", 1),
        ("b", 2),
        ("a", 2),
        ("a", 3),
        ("b", 3),
    ]
    layout = [("a", True), ("b", False), ("c", True), ("d", True)]
    assert tuning.first_groups(layout, 2) == (3, ["a", "c"])
    assert tuning.first_groups(layout, 9) == (4, ["a", "c", "d"])
    assert tuning.first_groups(layout, 1, {"b", "d"}) == (4, ["d"])  # the sample's reads only
    assert tuning.tuning_files("r")["host"] == f"r/{tuning.host_name()}.yaml"


def test_a_sample_too_small_to_pay_back_is_not_measured(tmp_path, ecoli_dir):
    """Before any job, from the reads and the storage's time per request: the reads counted
    as pysam counts them (FASTA, gzipped, FASTQ); 112 reads x 34 requests at 5 ms (emulated)
    cost 19 s of reading, more than 6 cells of 2 s: measured; at 0.5 ms, 1.9 s: not measured."""
    import gzip

    import pysam

    fasta = ecoli_dir / "reads.fasta"
    with pysam.FastxFile(str(fasta)) as fastx:
        records = list(fastx)
    fastq, packed = tmp_path / "reads.fastq", tmp_path / "reads.fasta.gz"
    fastq.write_text(
        "".join(f"@{r.name}\n{r.sequence}\n+\n{'I' * len(r.sequence)}\n" for r in records)
    )
    packed.write_bytes(gzip.compress(fasta.read_bytes()))
    assert (
        [tuning.count_reads(p) for p in (fasta, packed, fastq)] == [len(records)] * 3 == [112] * 3
    )
    signal = [ecoli_dir / "fast5"]
    files = tuning.first_signal_files(signal, 8)
    assert files == list_fast5(signal)[:8]
    assert tuning.request_seconds(files) > 0
    worth, why, saving = tuning.worth_measuring(fasta, signal, 5, 6, MIN_MEASURABLE_S)
    assert worth and "reading the signal of 112 reads costs about 19.0 s" in why
    assert saving == pytest.approx(112 * 34 * 0.005)  # what the tuning job's cap weighs
    worth, why, _ = tuning.worth_measuring(fasta, signal, 0.5, 6, MIN_MEASURABLE_S)
    assert not worth and why.startswith("not measured: the signal answers a read request in 0.500")
    assert "costs about 1.9 s, less than the least measurement (6 cells of at least 2 s" in why
    # files a run makes: nothing to count yet, the first cell decides
    assert tuning.worth_measuring(tmp_path / "sim.fastq", signal, 0, 6, 2.0)[0]


def test_cache_reused_only_for_the_same_key(tmp_path):
    key = tuning.cache_key({"nanopolish": "0.14.0"}, "minimap2", "ref.fa", ["f5"], {}, MODES)
    record = tmp_path / "host.json"
    assert tuning.cached(record, key)[0] is None
    record.write_text(json.dumps({"key": key, "io_mode": "slow5", "measured": "today"}))
    reuse, why = tuning.cached(record, key)
    assert reuse["io_mode"] == "slow5" and "no measurement" in why
    other = tuning.cache_key({"nanopolish": "0.13.2"}, "bwa", "ref.fa", ["f5"], {}, MODES)
    reuse, why = tuning.cached(record, other)
    assert reuse is None and why.startswith("tools, aligner changed")
    # a plan's cache check (compare.tuner.Tuner.cache): the reused choice in the tuner's words
    record.write_text(json.dumps({"key": key, "io_mode": "slow5", "why": "x2"}))
    reuse, why, again = tuning.IO.cache(record, key, "on")
    assert why.endswith("no measurement; I/O mode slow5 (x2)") and again == 0
    pileup = tmp_path / "host.pileup.json"
    pileup.write_text(json.dumps({"key": key, "pileup": {"regions": 2, "threads": 1}, "why": "w"}))
    assert tune_pileup.PILEUP.cache(pileup, key, "on")[1].endswith("; 2 regions x 1 thread (w)")
    reuse, why, again = tune_pileup.PILEUP.cache(pileup, key, "again")
    assert reuse is not None and why == "tune=again: measuring anew" and again > 0


def test_strategies_adopted_into_the_host_file():
    """The adoptable host file takes each step's chosen strategy, and the first thread split."""
    record = {
        "strategy": {"strategy": "instances:4"},
        "methylation_strategy": {"strategy": "instances:2"},
    }
    base = {"io_mode": "fast5", "strategy": {"alignment": "none"}}
    adopted = tune_strategy.adopted(base, record)
    assert adopted["strategy"] == {"alignment": "instances", "methylation": "instances"}
    assert adopted["instances_per_node"] == 4 and base["strategy"] == {"alignment": "none"}
    assert tune_strategy.adopted(base, {"strategy": {"strategy": None}}) == base


def test_conversion_of_a_slices_first_read_groups(tmp_path, f2s_dir):
    """The slow5 cells convert only the slice's reads: a multi-read file's first 3 of 10."""
    source = f2s_dir / "raw/end_reason_fast5/end_reason0.fast5"
    blow5 = tmp_path / "slice.blow5"
    convert([source], blow5, progress=None, first_groups={str(source): 3})
    ids = [read["read_id"] for read in pyslow5.Open(str(blow5), "r").seq_reads()]
    assert ids == [read for read, _ in read_layout(source)][:3]
    # the slice's read ids from the group names alone: those of read_layout
    assert tuning.group_names(source) == read_layout(source)


def test_bad_tune_setting_names_the_key():
    with pytest.raises(InputError, match="^config tune: 'maybe' is not one of off, on, again"):
        tuning.settings({"tune": "maybe", "tuning": {}})


def test_measured_on_a_slice_with_the_real_tools(tmp_path, ecoli_dir):
    """Every mode measured on 2 real reads (their FAST5 files, minimap2, nanopolish; slow5
    converts them first), the rule applied to those walls; the host file written is one
    numapore loads as it is."""
    region = ecoli_dir / "region.fa"
    index = tmp_path / "region.mmi"
    subprocess.run(["minimap2", "-d", str(index), str(region)], check=True, capture_output=True)
    host_path = tmp_path / "host.yaml"
    host_path.write_text(yaml.safe_dump({"topology": "auto", "io_mode": "fast5"}))
    host = load_host_config(host_path)

    def align(reads, bam):
        run_alignment(host, "minimap2", str(index), [index], reads, bam, 1, tmp_path / "a.json")

    def cut_at(n):
        return tuning.aligned_slice(
            tmp_path / f"slice{n}", ecoli_dir / "reads.fasta", [str(ecoli_dir / "fast5")], n,
            align, read_layout,
        )  # fmt: skip

    def calls(reads, bam, mode, folder):
        run_methylation(
            host, reads, bam, region, folder / "calls.tsv", 1, 20, mode, 2, folder / "record.json"
        )

    # No floor on a cell's time: on 2 reads every cell is short; the cap (all of the run) holds.
    # One repeat: the order of repeats is order()'s (test_candidates_order_and_files).
    # a sample whose reads are some of its signal's (the last 5 of the 112): the slice holds
    # them only, cut from the files that hold them; none of them there: one line saying so
    with pysam.FastxFile(str(ecoli_dir / "reads.fasta")) as fastx:
        last = [f">{r.name}\n{r.sequence}\n" for r in fastx][-5:]
    (tmp_path / "last.fasta").write_text("".join(last))
    (tmp_path / "some").mkdir()
    some = tuning.cut_slice(tmp_path / "some", tmp_path / "last.fasta",
                            [str(ecoli_dir / "fast5")], 2, read_layout)  # fmt: skip
    assert (some.count, some.total) == (2, 5) and all(n == 1 for n in some.groups.values())
    assert {r.name for r in pysam.FastxFile(str(some.reads))} <= {x[1:].split()[0] for x in last}
    (tmp_path / "other.fasta").write_text(">not_a_read\nACGT\n")
    with pytest.raises(InputError, match="none of its 1 reads is in its sample's signal files"):
        tuning.cut_slice(tmp_path / "none", tmp_path / "other.fasta",
                         [str(ecoli_dir / "fast5")], 2, read_layout)  # fmt: skip
    # A cap of 1 % of the run, which the cells exceed, raised by a saving the storage probe
    # predicts (1,000 s of reading): measured, and the sizing says why.
    result = tuning.tune(
        cut_at, 2, MODES, 1, 0.01, 0.0, calls, 1, log=lambda line: None, total_files=112,
        saving_s=1000.0,
    )  # fmt: skip
    assert "within 50% of the cap of 500.0 s (50% of the 1000.0 s the storage probe" in (
        result["sizing"]
    )
    cut = result["slice"]
    assert (cut.count, cut.total, len(cut.files)) == (2, 112, 2)
    assert [(c["io_mode"], c["repeat"]) for c in result["cells"]] == tuning.order(MODES, 1)
    parts = ["convert_start_s", "convert_s", "index_start_s", "index_s", "call_start_s", "call_s"]
    for cell in result["cells"]:
        assert cell["wall_s"] == pytest.approx(sum(cell.get(p, 0) for p in parts), abs=0.01)
        slow5 = cell["io_mode"] == "slow5"
        assert [p for p in parts if p in cell] == (parts if slow5 else parts[3:])
        whole = tuning.whole_run_seconds(cell, 2, 2, 112, 112, 1)
        starts = sum(cell.get(p, 0) for p in ("convert_start_s", "index_start_s", "call_start_s"))
        assert cell["run_s"] == round(whole, 1) and whole >= starts
        assert slow5 or cell["run_s"] > cell["wall_s"]  # the index of 2 FAST5 files, x56
        folder = cut.workdir / f"{cell['io_mode']}.r{cell['repeat']}"
        # the calls on the slice, and nanopolish's start: the same calls on its first read
        for where, reads in ((folder, 2), (folder / "start", 1)):
            assert json.loads((where / "record.json").read_text())["io_mode"] == cell["io_mode"]
            calls_tsv = (where / "calls.tsv").read_text()
            assert len({line.split("\t")[4] for line in calls_tsv.splitlines()[1:]}) == reads
    assert [c["run_s"] for c in result["cells"] if c["io_mode"] == "slow5"] == (
        result["estimates"]["slow5"]
    )
    decided = tuning.decide(result["walls"], 0.0, result["estimates"])
    assert (
        result["io_mode"],
        result["why"],
    ) == decided and "on the whole run, estimated" in decided[1]
    text = tuning.host_yaml(
        {"topology": "auto", "io_mode": "fast5"},
        {**result, "host": "h", "measured": "now", "slice": None, "strategies_why": "-"},
        str(host_path),
    )
    adopted = host_config_from_dict(yaml.safe_load(text), source="tuned")
    assert adopted.io_mode == result["io_mode"]
    assert f"# I/O mode: {result['io_mode']}: {result['why']}" in text
    # nanopolish calling's strategies under an I/O mode (tune_strategy.tune_calling's
    # measuring): none and localalloc (numactl) on a slice whose signal is indexed as slow5
    # reads it; the same calls in each cell

    def calling_slice(n):
        cut = tuning.aligned_slice(
            tmp_path / "calling" / f"slice{n}", ecoli_dir / "reads.fasta",
            [str(ecoli_dir / "fast5")], n, align, read_layout,
        )  # fmt: skip
        reads = tuning.indexed_reads(cut, "slow5", cut.workdir / "slow5", 1)
        assert (cut.workdir / "slow5/slice.blow5").is_file()
        return SimpleNamespace(reads=reads, bam=cut.bam, count=cut.count, total=cut.total,
                               workdir=cut.workdir)  # fmt: skip

    def call(piece, folder, strategy):
        run_methylation(tune_strategy.with_strategy(host, strategy, "methylation"), piece.reads,
                        piece.bam, region, folder / "calls.tsv", 1, 20, "slow5", 2,
                        folder / "record.json")  # fmt: skip

    strategies = ["none", "localalloc"]
    settings = {"reads": 2, "repeats": 1, "share": 1.0}
    called = tune_strategy.tune_calling(host, calling_slice, region, 1, 1, settings, 0.0, call,
                                        log=lambda line: None,
                                        strategies=strategies)  # fmt: skip
    assert (called["step"], called["nodes"], called["reads"]) == ("methylation", 1, 2)
    assert [(c["strategy"], c["repeat"]) for c in called["cells"]] == tuning.order(strategies, 1)
    assert (called["strategy"], called["why"]) == tune_strategy.decide(called["walls"], 0.0)
    texts = {s: (called["folder"] / f"{s}.r1/calls.tsv").read_text() for s in strategies}
    assert texts["none"] == texts["localalloc"] and texts["none"].count("\n") > 2
    record = json.loads((called["folder"] / "localalloc.r1/record.json").read_text())
    assert record["io_mode"] == "slow5" and record["strategy"] == "localalloc"
    assert record["processes"][0]["command"].startswith("numactl --localalloc ")
    assert "on the slice; the whole run, estimated: " in text


def test_tuning_in_a_run_and_its_reuse(signal_fast5_run, tmp_path):
    """tune: on in signal_fast5_run: the tuning ran before the heavy steps, its first cell said
    not to measure (the 5 % cap), the host file's fast5 ran, and the record, the run record and
    the provenance data say so; a second run reuses the record without measuring."""
    work = signal_fast5_run
    name = tuning.host_name()
    record = json.loads((work / f"results/tuning/{name}.json").read_text())
    assert record["io_mode"] == "fast5" and record["candidates"] == MODES
    assert record["probe"]["reads"] == 4 and "of the 5% cap on the whole run" in record["why"]
    # the storage probe (local files, 112 reads) predicts too little reading to raise the cap
    assert "storage probe" not in record["why"]
    # nanopolish's start timed apart in the first cell too: a call on the slice's first read
    probe = record["probe"]
    assert probe["wall_s"] == pytest.approx(
        probe["index_s"] + probe["call_start_s"] + probe["call_s"], abs=0.01
    )
    assert record["slice"]["sample"] == "clean" and record["slice"]["total_reads"] == 112
    # one NUMA node here: no strategy measured, the align job as before tuning
    assert record["strategies_why"] == tune_strategy.ONE_NODE and "strategy" not in record
    adopted = load_host_config(work / f"results/tuning/{name}.yaml")
    assert adopted.io_mode == "fast5"
    run = json.loads((work / RECORD).read_text())
    assert run["io_mode"] == "fast5"
    assert run["tuning"]["why"] == record["why"]
    assert run["tuning"]["record"] == f"results/tuning/{name}.json"
    # the provenance page of the run's records shows the tuning behind the I/O mode
    page, data = tmp_path / "provenance.html", tmp_path / "provenance.json"
    records = {"call_methylation": [work / RECORD]}
    provenance_page("clean", work / "host.yaml", records, page, data)
    (job,) = json.loads(data.read_text())["steps"]["call_methylation"]
    assert job["tuning"] == run["tuning"]
    assert "I/O mode chosen by host tuning" in page.read_text()
    assert html.escape(record["why"]) in page.read_text()
    # the run's log: the tuning's reason, before any heavy step
    stderr = (work / "run.stderr").read_text()
    assert f"numapore: tuning: nothing measured yet: no results/tuning/{name}.json" in stderr
    assert f"numapore: tuning: strategies: {tune_strategy.ONE_NODE}" in stderr
    assert stderr.index("checkpoint tune_host") < stderr.index("rule align")
    # the pileup's tuning (clean's bedMethyl): the first sample that runs the pileup, its
    # modBAM of nanopolish's calls; one pileup job of 112 reads is less than the least
    # measurement, so the run's setting (scatter.pileup 1, the job's 2 threads) runs, and the
    # record, the adoptable host file (host tuning's with the pileup) and the job say so
    pileup = json.loads((work / f"results/tuning/{name}.pileup.json").read_text())
    assert pileup["sample"] == "clean" and pileup["jobs"] == 3  # 3 samples x cpg
    modbam = "results/clean/methylation/clean.minimap2.cpg.modbam.bam"
    assert pileup["key"]["modbam"] == str(work / modbam)
    assert pileup["candidates"] == ["1 region x 2 threads", "1 region x 1 thread",
                                    "2 regions x 1 thread"]  # fmt: skip
    assert pileup["choice"] is None and pileup["pileup"] == {"regions": 1, "threads": 2}
    assert pileup["why"].startswith("not measured: the whole pileup, estimated at ")
    assert "x 3 pileup jobs), is less than the least measurement (6 cells of at least 2 s" in (
        pileup["why"]
    )
    assert len(pileup["sizing"]) == 1 and pileup["cells"] == [] and pileup["total_records"] > 80
    said = f"numapore: tuning: pileup: nothing measured yet: no results/tuning/{name}.pileup.json"
    assert stderr.index(said) < stderr.index("rule align")
    assert stderr.index("checkpoint tune_pileup") < stderr.index("rule pileup")
    adopted = load_host_config(work / f"results/tuning/{name}.pileup.yaml")
    assert adopted.pileup == {"regions": 1, "threads": 2} and adopted.io_mode == "fast5"
    assert pileup["host_file"] == f"results/tuning/{name}.yaml"
    job_log = (work / "results/logs/pileup/clean.minimap2.cpg.log").read_text()
    assert "equivalent modkit command: modkit pileup " in job_log and "--threads 2" in job_log
    said = f"pileup setting by host tuning (results/tuning/{name}.pileup.json): 1 region x 2 "
    assert f"{said}threads: {pileup['why']}" in job_log
    # the provenance page shows it, beside the I/O mode's
    provenance_page("clean", work / "host.yaml", records, page, data,
                    pileup_tuning=work / f"results/tuning/{name}.pileup.json")  # fmt: skip
    shown = json.loads(data.read_text())["pileup_tuning"]
    assert shown["pileup"] == pileup["pileup"] and shown["why"] == pileup["why"]
    text = page.read_text()
    assert "Pileup setting chosen by host tuning" in text and "<b>1 region x 2 threads</b>" in text
    assert html.escape(pileup["why"]) in text and "I/O mode chosen by host tuning" in text
    assert not (work / "results/logs/pileup_shard").exists()
    # a second run: the record reused (its log says so), nothing measured again; its
    # provenance page waits for the pileup's tuning record, which it shows
    target = "results/clean/methylation/clean.minimap2.cpg.calls.tsv"
    provenance = "results/clean/report/clean.minimap2.provenance.html"
    again = run_workflow(work, "-n", target, provenance, "--config", f"host={work / 'host.yaml'}")
    output = again.stdout + again.stderr
    assert f"numapore: tuning: reusing results/tuning/{name}.json" in output
    assert "no measurement; I/O mode fast5" in output
    jobs = re.findall(r"^(?:rule|checkpoint) (\w+):", again.stdout, re.M)
    assert "report_provenance" in jobs and not {"tune_host", "tune_pileup", "align"} & set(jobs)
    (block,) = re.findall(r"^rule report_provenance:\n((?:    .*\n)+)", again.stdout, re.M)
    assert f"results/tuning/{name}.pileup.json" in block
    # the pileup's tuning: reused too (said before any job, whatever the targets)
    said = f"numapore: tuning: pileup: reusing results/tuning/{name}.pileup.json (measured "
    assert said in output and "no measurement; 1 region x 2 threads (not measured: " in output
    # the pileup's host file as a tuning that chose a split writes it, adopted, tuning off:
    # the pileup runs so (2 shard jobs), with no tuning
    adopt = tmp_path / "adopted.yaml"
    data = yaml.safe_load((work / f"results/tuning/{name}.pileup.yaml").read_text())
    adopt.write_text(yaml.safe_dump(data | {"pileup": {"regions": 2, "threads": 1}}))
    bed = "results/clean/methylation/clean.minimap2.cpg.bedmethyl.gz"
    split = run_workflow(work, "-n", bed, "--config", f"host={adopt}", "tune=off")
    output = split.stdout + split.stderr
    assert "shard=1-of-2" in output and "shard=2-of-2" in output
    assert "tune_pileup" not in output and "tuning: pileup" not in output
    # measuring asked of a sample too small to pay it back (another slice setting: the record
    # is not reused): said before any job, and no tuning job; the host file's fast5 runs
    settings = tmp_path / "small.yaml"  # merged into the run's config (Snakemake's --configfile)
    settings.write_text("tuning: {reads: 4, repeats: 3, check_payback: true}\n")
    small = run_workflow(
        work, "-n", target, "--configfile", str(settings), "--config", f"host={work / 'host.yaml'}"
    )
    output = small.stdout + small.stderr
    said = "numapore: tuning: not measured: the signal answers a read request in "
    assert said in output and "reading the signal of 112 reads costs about " in output
    assert "less than the least measurement (9 cells of at least 2 s: 18 s)" in output
    assert "; I/O mode fast5 (host file)" in output and "tune_host" not in output


# --- the alignment's strategy (numapore.compare.tune_strategy): candidates, rule, measuring ----


def layout(*nodes: tuple[str, int]) -> Topology:
    """A topology of nodes (CPU list, memory MiB), distances 10 and 20."""
    n = len(nodes)
    return Topology(tuple(
        Node(i, parse_cpulist(cpus), mib, tuple(10 if j == i else 20 for j in range(n)))
        for i, (cpus, mib) in enumerate(nodes)
    ))  # fmt: skip


@pytest.mark.parametrize(
    ("nodes", "index_mib", "kept", "dropped"),
    [
        # one node: every strategy runs as none does
        ((("0-1", 8000),), 10, ["none"], {"interleave": "none", "localalloc": "none",
                                          "instances": "none"}),
        # two nodes, the index fits one: all differ; the 4 threads split 2 instances a node
        # too (1 thread each)
        ((("0-1", 8000), ("2-3", 8000)), 10, ["none", "interleave", "localalloc", "instances",
                                              "instances:2"], {}),
        # an index only both nodes hold: instances is one process over both, as interleave;
        # two such instances over both nodes differ from it
        ((("0-1", 1000), ("2-3", 1000)), 600, ["none", "interleave", "localalloc",
                                               "instances:2"], {"instances": "interleave"}),
        # a node without memory: memory goes to node 0 whatever the policy; instances binds
        # node 0's CPUs only (one compute node: no thread split)
        ((("0-1", 8000), ("2-3", 0)), 10, ["none", "instances"],
         {"interleave": "none", "localalloc": "none"}),
    ],
)  # fmt: skip
def test_strategy_candidates_are_those_that_run_otherwise_than_none(
    nodes, index_mib, kept, dropped
):
    host = host_config_from_dict({"topology": "auto"}, source="test")
    got, left = tune_strategy.candidates(host, layout(*nodes), 4, index_mib * 2**20, "minimap2")
    assert got == kept
    assert {k: v.split("runs as ")[1].split(" does")[0] for k, v in left.items()} == dropped
    # a thread split for instances only when each instance keeps a thread of its own
    fewer, _ = tune_strategy.candidates(host, layout(*nodes), 3, index_mib * 2**20, "minimap2")
    assert "instances:2" not in fewer
    if "instances:2" in kept:  # as a host file runs it: 2 instances a node (or group)
        chosen = tune_strategy.with_strategy(host, "instances:2")
        assert (chosen.strategy_for("alignment"), chosen.instances_per_node) == ("instances", 2)


@pytest.mark.parametrize(
    ("walls", "chosen", "why"),
    [
        ({"none": [3.0, 3.1], "interleave": [2.0, 2.1]}, "interleave", "x1.49 on the slice"),
        ({"none": [3.0, 3.1], "interleave": [2.9, 3.2]}, "none", "the simpler strategy runs"),
        ({"none": [1.0, 1.1], "instances": [0.2, 0.2]}, "none", "ran under 2 s"),
        ({"none": [3.0, 3.1], "interleave": [2.0, 2.1], "instances": [1.5, 1.6]}, "instances",
         "x1.97"),
    ],
)  # fmt: skip
def test_strategy_decided_by_the_honest_rule(walls, chosen, why):
    got, reason = tune_strategy.decide(walls, MIN_MEASURABLE_S)
    assert got == chosen and why in reason


def test_strategies_measured_on_a_slice_with_the_real_tools(tmp_path, ecoli_dir):
    """none and localalloc (numactl) measured on 3 real reads with minimap2 as the align step
    runs it; the first cell is none's first repeat; each cell's BAM has the same records; and on
    this machine's one node, tune_alignment measures nothing and says why."""
    region = ecoli_dir / "region.fa"
    index = tmp_path / "region.mmi"
    subprocess.run(["minimap2", "-d", str(index), str(region)], check=True, capture_output=True)
    host = host_config_from_dict({"topology": "auto"}, source="test")

    def align(reads, bam, strategy):
        run_alignment(tune_strategy.with_strategy(host, strategy), "minimap2", str(index),
                      [index], reads, bam, 1, bam.with_suffix(".run.json"))  # fmt: skip

    def cut_at(n):
        return tune_strategy.first_reads(tmp_path / f"slice{n}", ecoli_dir / "reads.fasta", n)

    strategies = ["none", "localalloc"]
    result = tune_strategy.tune(cut_at, 3, strategies, 2, 1e9, 0.0, align, log=lambda s: None)
    assert result["probe"]["reads"] == result["reads"] == 3
    assert [(c["strategy"], c["repeat"]) for c in result["cells"]] == tuning.order(strategies, 2)
    assert result["cells"][0]["wall_s"] == result["probe"]["wall_s"]
    assert (result["strategy"], result["why"]) == tune_strategy.decide(result["walls"], 0.0)
    folder = result["folder"]
    texts = {
        (s, r): pysam.view(str(folder / f"{s}.r{r}/slice.bam"))
        for s, r in tuning.order(strategies, 2)
    }
    assert len(set(texts.values())) == 1 and texts["none", 1].count("\n") >= 3
    record = json.loads((folder / "localalloc.r1/slice.run.json").read_text())
    assert record["processes"][0]["command"].startswith("numactl --localalloc ")
    settings = {"reads": 3, "repeats": 2, "share": 1.0}
    block = tune_strategy.tune_alignment(host, "minimap2", str(index), [index],
                                         ecoli_dir / "reads.fasta", 1, tmp_path / "t", settings,
                                         0.0)  # fmt: skip
    assert block == {"step": "alignment", "nodes": 1, "candidates": ["none"], "strategy": None,
                     "why": tune_strategy.ONE_NODE}  # fmt: skip


def test_strategies_measured_on_each_kinds_slice(tmp_path):
    """Every input kind's alignment tuned as its align job runs: bowtie2-examples' pairs with
    bwa (the slice's R2 mates are its R1's), and modkit's unaligned modBAM with minimap2 (the
    slice staged as the staging does, tags in the headers, kept by minimap2 -y); none and
    localalloc (numactl) measured on each, the cells' records the same."""
    examples = Path("/usr/share/doc/bowtie2/examples")
    modbam = REPO.parent / "shared/data/modkit_pileup/inputs/bc_anchored_10_reads.unmapped.bam"
    ladder = modbam.with_name("CGI_ladder_3.6kb_ref.fa")
    host = host_config_from_dict({"topology": "auto"}, source="test")
    settings = {"reads": 20, "repeats": 1, "share": 1e9}
    reference = tmp_path / "lambda.fa"
    reference.write_bytes(gzip.decompress((examples / "reference/lambda_virus.fa.gz").read_bytes()))
    subprocess.run(["bwa", "index", str(reference)], check=True, capture_output=True)
    mmi = tmp_path / "ladder.mmi"
    subprocess.run(["minimap2", "-d", str(mmi), str(ladder)], check=True, capture_output=True)
    cases = {
        "short": ("bwa", str(reference), [Path(f) for f in ALIGNERS["bwa"].index_files(
                  str(reference), "")], examples / "reads/reads_1.fq.gz",
                  examples / "reads/reads_2.fq.gz"),
        "modbam": ("minimap2", str(mmi), [mmi], modbam, None),
    }  # fmt: skip
    for kind, (aligner, index, files, reads, reads2) in cases.items():
        result = tune_strategy.tune_alignment(
            host, aligner, index, files, reads, 1, tmp_path / kind, settings, 0.0, kind=kind,
            log=lambda s: None, reads2=reads2, reference=ladder,
            strategies=["none", "localalloc"],
        )  # fmt: skip
        assert (result["strategy"], result["why"]) == tune_strategy.decide(result["walls"], 0.0)
        cells = result["folder"]
        texts = {s: pysam.view(str(cells / f"{s}.r1/slice.bam")) for s in ("none", "localalloc")}
        assert texts["none"] == texts["localalloc"], kind
        records = [line.split("\t") for line in texts["none"].splitlines()]
        record = json.loads((cells / "localalloc.r1/slice.run.json").read_text())
        assert record["processes"][0]["command"].startswith("numactl --localalloc ")
        if kind == "short":
            assert (result["reads"], result["probe"]["reads"]) == (20, 20)
            mates = [pysam.FastxFile(str(cells / f"slice.{m}fastq")) for m in ("", "2.")]
            names = [[r.name.removesuffix(f"/{i}") for r in m] for i, m in enumerate(mates, 1)]
            assert len(names[0]) == 20 and names[0] == names[1]
            # each read of each pair aligned as a pair (flag 0x1), duplicates marked as the
            # align job marks them for short reads
            assert len(records) == 40 and all(int(r[1]) & 1 for r in records)
            assert {r[0] for r in records} == set(names[0])
        else:  # the unaligned modBAM's 10 reads, all in the slice, their tags in the headers
            assert result["reads"] == 10
            headers = (cells / "slice.fastq").read_text().splitlines()[::4]
            assert len(headers) == 10 and all("\tMM:Z:" in h for h in headers)
            primary = [r for r in records if not int(r[1]) & 0x900]
            assert len(primary) == 10
            assert all(any(f.startswith("MM:Z:") for f in r) for r in primary)
    # a slice counts the sample's reads (the whole run the cap is set against)
    cut = tune_strategy.first_reads(tmp_path / "cut", modbam, 4, reference=ladder)
    assert (cut.count, cut.total) == (4, 10)
    # a modBAM samtools cannot read: one line naming the file and samtools' reason
    cut_short = tmp_path / "cut.bam"
    cut_short.write_bytes(modbam.read_bytes()[:3000])
    with pytest.raises(InputError, match=f"^reads file {cut_short}: samtools fastq: Failed"):
        tune_strategy.first_reads(tmp_path / "bad", cut_short, 4)
    r1, r2 = cases["short"][3:]
    cut = tune_strategy.first_reads(tmp_path / "pairs", r1, 5, r2)
    assert (cut.count, cut.total) == (5, 10_000) and cut.reads2.read_text().count("\n@") == 4


def test_provenance_names_what_each_tuning_chose():
    """The provenance page's line for a strategy's tuning (an align or call job's run record,
    tune_strategy.add_to_record), for a mode's and for the pileup's: what each chose."""
    strategy = {"record": "r.json", "measured": "now", "strategy": "interleave",
                "why": "x1.20 on the slice", "walls": {"none": [3.0, 3.1],
                "interleave": [2.5, 2.6]}, "candidates": ["none", "interleave"]}  # fmt: skip
    line = tuning_line(strategy)
    assert line.startswith("<p>Strategy chosen by host tuning (<code>r.json</code>")
    assert "<b>interleave</b>, x1.20 on the slice; on the slice, median wall: none 3.05 s" in line
    kept = tuning_line(strategy | {"strategy": None, "walls": {}, "why": "not measured"})
    assert "<b>the host file&#x27;s</b>, not measured; nothing measured" in kept
    mode = tuning_line({"io_mode": "slow5", "why": "x3.3", "walls": {"slow5": [1.0]}})
    assert "I/O mode chosen by host tuning" in mode and "<b>slow5</b>" in mode


# --- the pileup (numapore.compare.tune_pileup): candidates, window, estimate, rule, measuring ---

# modkit's real modBAM of 129 reads with calls in every context, on 32 contigs of 155 bases
ALL_CONTEXTS = SHARED / "data" / "modkit_pileup" / "inputs" / "testing_all_context_calls.bam"


def test_pileup_candidates_simpler_first_and_no_same_command_twice():
    # the run untuned (scatter.pileup 1, the job's 2 threads), one job of one thread, 2 x 1
    kept, dropped = tune_pileup.candidates(1, 2, 2)
    assert kept == [(1, 2), (1, 1), (2, 1)] and dropped == {}
    assert [tune_pileup.label(c) for c in kept] == [
        "1 region x 2 threads", "1 region x 1 thread", "2 regions x 1 thread"
    ]  # fmt: skip
    # one core: every setting is the baseline's command
    kept, dropped = tune_pileup.candidates(1, 1, 1)
    assert kept == [(1, 1)]
    assert dropped == {"1 region x 1 thread": "the same command as an earlier candidate"}
    # scatter.pileup 4 on 8 cores: its jobs hold 8 threads each, so they run one at a time
    kept, _ = tune_pileup.candidates(4, 8, 8)
    assert kept == [(4, 8), (1, 1), (8, 1)]
    assert tune_pileup.at_once((4, 8), 8) == 1 and tune_pileup.at_once((8, 1), 8) == 8
    # a job never holds more threads than the run has cores (Snakemake caps them)
    assert tune_pileup.candidates(2, 16, 4)[0][0] == (2, 4)


def test_pileup_window_and_its_split_tile_the_genome():
    contigs = [("a", 150), ("b", 100)]
    assert tune_pileup.window_regions(contigs, 200) == [("a", 0, 150), ("b", 0, 50)]
    assert tune_pileup.window_regions(contigs, 400) == [("a", 0, 150), ("b", 0, 100)]
    assert tune_pileup.window_regions(contigs, 80, (0, 100)) == [("a", 100, 150), ("b", 0, 30)]
    window = [("a", 0, 150), ("b", 0, 50)]
    assert tune_pileup.split(window, 2) == [["a:0-100"], ["a:100-150", "b:0-50"]]
    assert tune_pileup.split(window, 1) == [["a:0-150", "b:0-50"]]
    # more shares than bases to give: the last ones empty
    assert tune_pileup.split([("a", 0, 2)], 3) == [["a:0-1"], ["a:1-2"], []]


def test_pileup_whole_estimated_from_the_sizing_cells():
    """Two windows: 1 s of start and 5 ms a record (1.5 s on 100 records, 2.5 s on 300), to
    10,000 records: 51 s a job, 3 jobs; one window: its start counted in its records."""
    whole, how = tune_pileup.whole_seconds([(100, 1.5), (300, 2.5)], 10_000, 3)
    assert whole == pytest.approx(153.0)
    assert "51.0 s a job (1.00 s start, 5.000 ms a record x 10,000 mapped records)" in how
    assert "x 3 pileup jobs" in how
    assert tune_pileup.whole_seconds([(100, 1.0)], 1000, 2)[0] == pytest.approx(20.0)
    # a window without records: all of it the start
    assert tune_pileup.whole_seconds([(0, 0.5)], 1000, 1)[0] == pytest.approx(0.5)


@pytest.mark.parametrize(
    "walls, chosen, why",
    [
        # the split beats one job of 2 threads in every repeat, beyond the spread and 5 %
        ({"1x2": [10.0, 10.2], "1x1": [11.0, 11.1], "2x1": [6.0, 6.1]}, "2x1", "x1.6"),
        # faster medians but overlapping repeats: the run's setting stays
        ({"1x2": [10.0, 12.0], "2x1": [9.0, 11.0]}, "1x2", "spread"),
        # the baseline under the floor: too short to tell them apart
        ({"1x2": [1.0, 1.1], "2x1": [0.2, 0.2]}, "1x2", "too short"),
    ],
)
def test_pileup_decided_by_the_honest_rule(walls, chosen, why):
    setting, reason = tune_pileup.decide(walls, "1x2", MIN_MEASURABLE_S)
    assert setting == chosen and why in reason


def two_contigs(folder) -> str:
    """modkit's modBAM with every other read moved from its contig (the 10th) to the last of
    the same length (the calls are the reads' own: no reference is read), so that a split's
    shares both have reads."""
    folder.mkdir()
    moved = folder / "moved.bam"
    with pysam.AlignmentFile(str(ALL_CONTEXTS)) as bam:
        with pysam.AlignmentFile(str(moved), "wb", template=bam) as out:
            for i, record in enumerate(bam):
                if i % 2 and not record.is_unmapped:
                    record.reference_id = bam.nreferences - 1
                out.write(record)
    sorted_bam = str(folder / "two_contigs.bam")
    pysam.sort("-o", sorted_bam, str(moved))
    pysam.index(sorted_bam)
    return sorted_bam


def test_pileup_measured_on_a_window_with_the_real_engine(tmp_path):
    """The real engine (numapore pileup processes, each region share its own) on modkit's
    modBAM: one pileup job (about 0.3-0.7 s, as busy as the machine is) is less than the least
    measurement at a 5 s floor (not measured, after one cell); 1,000 jobs are measured at a floor
    lowered to 0.1 s so that it costs a few seconds: every candidate in every repeat, their rows
    all the baseline's, and the choice is the rule's on the walls."""
    settings, _ = tune_pileup.candidates(1, 2, 2)
    logged = []
    small = tune_pileup.tune(
        str(ALL_CONTEXTS), [], settings, 2, 1, 2, 0.05, 5.0, tmp_path / "one", logged.append
    )
    assert small["choice"] is None and len(small["sizing"]) == 1 and small["cells"] == []
    assert small["why"].startswith("not measured: the whole pileup, estimated at ")
    assert "is less than the least measurement (6 cells of at least 5 s: 30 s)" in small["why"]
    assert small["total_records"] == 129
    # the window: the genome from its first mapped record's contig (the 10th of 32 of 155
    # bases) on, its first cell 1 region x 2 threads
    assert small["slice"] == {
        "bam": str(ALL_CONTEXTS), "bases": 3565, "records": 129, "contigs": 23,
        "from": "5mers_rand_ref_adapter_10:0-155", "to": "5mers_rand_ref_adapter_32:0-155",
    }  # fmt: skip
    assert logged[0].startswith("tuning: pileup: 1 region x 2 threads on 3,565 bases (129 ")
    bam = two_contigs(tmp_path / "bam")
    result = tune_pileup.tune(bam, [], settings, 2, 1000, 2, 1.0, 0.1, tmp_path / "many", print)
    names = result["candidates"]
    assert names == ["1 region x 2 threads", "1 region x 1 thread", "2 regions x 1 thread"]
    cells = [(c["setting"], c["repeat"]) for c in result["cells"]]
    assert cells == tuning.order(names, 2)  # repeat 2 in reverse order
    assert all(len(result["walls"][n]) == 2 for n in names)
    assert result["walls"]["1 region x 2 threads"][0] == result["sizing"][-1]["wall_s"]
    # the choice is the rule's on the walls: a winner beats the baseline, else the baseline
    baseline = result["walls"][names[0]]
    if min(baseline) < 0.1:
        assert result["choice"] == names[0] and "too short" in result["why"]
    elif result["choice"] == names[0]:
        assert not any(beats(result["walls"][n], baseline) for n in names[1:])
    else:
        assert beats(result["walls"][result["choice"]], baseline)
    assert (result["choice"], result["why"]) == tune_pileup.decide(result["walls"], names[0], 0.1)
    # every candidate's cells wrote the baseline's rows (the tuner compares them; here: the
    # shares' texts of the split's last cell, concatenated, against the first cell's)
    first = (tmp_path / "many" / "window1" / "1-of-1.bed").read_bytes()
    split = tmp_path / "many" / "2regionsx1thread.r2"
    assert first.count(b"\n") == result["rows"] > 100
    assert (split / "1-of-2.bed").read_bytes() + (split / "2-of-2.bed").read_bytes() == first
    assert (split / "1-of-2.bed").read_bytes() and (split / "2-of-2.bed").read_bytes()
    # the adoptable host file: the base host file with the choice as its pileup: section
    record = result | {"host": "h", "measured": "now", "pileup": tune_pileup.setting_of(
        result["choice"], settings)}  # fmt: skip
    text = tune_pileup.host_yaml({"io_mode": "fast5"}, record, "base.yaml")
    adopted = host_config_from_dict(yaml.safe_load(text))
    assert adopted.pileup == record["pileup"] and adopted.io_mode == "fast5"
    assert f"# Pileup: {result['choice']}: {result['why']}" in text


def test_pileup_rows_that_differ_are_an_error(tmp_path, monkeypatch):
    """A split whose rows are not the baseline's stops the tuning (an error, not a choice):
    here the second share's process is given an option that changes the rows."""
    calls = []
    real = tune_pileup.run_cell

    def run_cell(bam, arguments, setting, window, cores, folder):
        calls.append(setting)
        if setting == (2, 1):
            arguments = [*arguments, "--no-filtering"]
        return real(bam, arguments, setting, window, cores, folder)

    monkeypatch.setattr(tune_pileup, "run_cell", run_cell)
    settings, _ = tune_pileup.candidates(1, 2, 2)
    with pytest.raises(RuntimeError, match="2 regions x 1 thread's bedMethyl rows differ"):
        tune_pileup.tune(str(ALL_CONTEXTS), [], settings, 2, 1000, 2, 1.0, 0.1, tmp_path, print)
