"""The strategy comparison: one command runs the matrix on the real E. coli reads and writes the
summary (checked here against the cells' raw files), plots, report and a recommendation; a
short-read sample (real lambda pairs) compared in its alignment with bwa and bowtie2, its index
sizes set against node memory; and the comparison's helpers."""

from __future__ import annotations

import json
import math
import statistics
import subprocess
from pathlib import Path

import pysam
import pytest
import yaml
from conftest import REPO, ecoli_row, run_workflow

from numapore.compare import measure, recommend, subsample, summary
from numapore.report import comparison as compare_report
from numapore.report import comparison_plots
from numapore.compare import run as cell_run
from numapore.base.errors import InputError
from numapore.compare.cells import STEPS, Cell, cell_host, matrix, measured_steps
from numapore.execution.hosts import IO_MODES, STRATEGIES, HostConfigError, host_config_from_dict
from numapore.execution.topology import Node, Topology, detect_topology
from project import write_project

# The compare route's small runnable config, as a user runs it from the repository root: the
# demo's simulated reads; strategies none and instances at 1 and 2 threads for each aligner and
# I/O mode, twice; emulated storage on (1 ms per request: the FUSE path in every methylation
# cell). config/config.yaml's full matrix is expanded without running a cell
# (test_the_full_matrix_expands_to_every_combination).
TEST_CONFIG = str(REPO / ".test" / "config-compare.yaml")
MATRIX = yaml.safe_load(Path(TEST_CONFIG).read_text())["compare"]
FULL_MATRIX = yaml.safe_load((REPO / "config" / "config.yaml").read_text())["compare"]


def config_cells(compare: dict) -> int:
    """How many cells a compare block runs: aligners (alignment) and I/O modes (methylation)
    by strategies by thread counts, each once per repeat."""
    configs = len(compare["aligners"]) + len(compare["io_modes"])
    return configs * len(compare["strategies"]) * len(compare["threads"]) * compare["repeats"]


def compare_project(work: Path) -> Path:
    """A project folder where `snakemake compare --configfile .test/config-compare.yaml` runs
    as it does from the repository root (its .test/ and resources/ linked in)."""
    write_project(work, [])
    for name in (".test", "resources"):
        (work / name).symlink_to(REPO / name)
    return work


@pytest.fixture(scope="module")
def compared(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """`snakemake --profile hpc-numa compare --configfile .test/config-compare.yaml` in a
    project holding an earlier run's MultiQC report; its folder and result."""
    work = compare_project(tmp_path_factory.mktemp("compare"))
    (work / STALE_MULTIQC).parent.mkdir(parents=True)
    (work / STALE_MULTIQC).write_text("<html>an earlier run's report</html>\n")
    return work, run_workflow(work, "compare", "--configfile", TEST_CONFIG)


STALE_MULTIQC = "results/multiqc/numapore_multiqc.html"


def test_one_command_writes_summary_plots_report(compared):
    work, result = compared
    out = work / "results/compare"
    cells = matrix(MATRIX, "minimap2")
    # Aligners x strategies + I/O modes x strategies, at each thread count, each repeat.
    assert len(cells) == config_cells(MATRIX)
    for name in ("time_vs_threads", "utilisation_core_hours", "io_modes"):
        assert (out / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    report = (out / "report.md").read_text()
    assert "| minimap2 | instances" in report and "| slow5 | none |" in report
    # 12 reads: alignment cells far too short to measure (but on a machine loaded many times
    # over: the flags follow the measured times, test_summary_arithmetic_from_raw_files), and
    # the report sizes the subset when they are.
    rows = summary.read_tsv(out / "summary.tsv")
    too_short = any(r["too_short"] for r in rows if r["step"] == "alignment")
    assert ("set `compare.reads` to " in report) == too_short
    # One progress line per finished cell, in matrix order (never two cells at once).
    progress = [ln for ln in result.stdout.splitlines() if ln.startswith("compare: cell ")]
    assert [ln.split()[3].rstrip(":") for ln in progress] == [c.name for c in cells]
    # The run's last line of its own says where the comparison is; no pointer to the earlier
    # run's MultiQC report (this run did not make it).
    own = [ln for ln in result.stderr.splitlines() if ln.startswith("numapore: ")]
    assert own[-1].startswith(f"numapore: strategy comparison: {out / 'report.md'} (plots beside")
    assert "MultiQC" not in result.stderr


def test_cells_ran_in_the_seeded_shuffled_order(compared):
    """Each cell's row says where it ran in the order (its record's), and the seed: the order is
    cells.matrix's shuffle with compare.seed, not thread order."""
    work, _ = compared
    rows = summary.read_tsv(work / "results/compare/summary.tsv")
    runs = sorted((r for r in rows if r["repeat"] != "median"), key=lambda r: r["run_order"])
    ran = [
        Cell(*(r[k] for k in ("step", "aligner", "strategy", "io_mode", "threads", "repeat")))
        for r in runs
    ]
    assert ran == matrix(MATRIX, "minimap2")
    assert [r["run_order"] for r in runs] == list(range(1, len(runs) + 1))
    assert {r["seed"] for r in rows} == {MATRIX["seed"]}
    # Shuffled: each repeat in an order of its own, the steps mixed (one thread count here: the
    # full matrix's thread counts are mixed too, test_matrix_order_is_a_seeded_shuffle_...).
    first, second = ([config_key(c) for c in ran if c.repeat == r] for r in (1, 2))
    assert first != second
    steps = [key[0] for key in first]
    assert steps != sorted(steps) and steps != sorted(steps, reverse=True)


def test_plots_mark_what_is_noise(compared):
    """What the plots drew (plots.data.json, read back from the figures' artists): a colour and
    a marker of its own per series, the repeats' range as error bars around the median, the
    strategies that ran as none did marked as such (on this one-node host: instances, but in
    fast5-pool at 2 threads), no-difference points hollow, and too-short cells faded."""
    work, _ = compared
    drawn = json.loads((work / "results/compare/plots.data.json").read_text())["panels"]
    rows = summary.read_tsv(work / "results/compare/summary.tsv")
    assert {(p["figure"], p["step"]) for p in drawn} == {
        (f, s) for f in ("time_vs_threads", "utilisation_core_hours") for s in STEPS
    } | {("io_modes", "methylation")}
    for panel in drawn:
        series = panel["series"]
        strategies = len(MATRIX["strategies"])
        count = {"alignment": len(MATRIX["aligners"]) * strategies,
                 "methylation": len(MATRIX["io_modes"]) * strategies}[panel["step"]]  # fmt: skip
        count = len(MATRIX["io_modes"]) if panel["figure"] == "io_modes" else count
        # No two series alike: as many colours and as many markers as series.
        assert len(series) == count
        assert len({s["colour"] for s in series}) == len({s["marker"] for s in series}) == count
        for s in series:
            medians = []
            for point in s["points"]:
                median, *runs = configuration_rows(rows, panel["step"], s["label"], point)
                medians.append(median)
                values = [r[panel["column"]] for r in runs]
                assert len(values) == MATRIX["repeats"]
                low, high = point["error_bar"]
                assert low == pytest.approx(min(values)) and high == pytest.approx(max(values))
                assert point["median"] == pytest.approx(median[panel["column"]])
                assert point["too_short"] == any(r["too_short"] for r in runs)
                assert point["faded"] == point["too_short"]
                no_difference = ("identical", "within spread", "too short")
                assert point["hollow"] == (point["verdict"] in no_difference)
                assert (point["verdict"] == "identical") == bool(median["identical_to"])
            identical = all(m["identical_to"] for m in medians)
            assert s["legend"].endswith("(= none on this host)") == identical
            assert (s["linestyle"] == ":") == identical
            one_node = len(detect_topology().compute_nodes) == 1
            if one_node and s["label"].endswith(" instances") and "fast5-pool" not in s["label"]:
                # The same command as none on one node: marked, never shown as an effect.
                assert identical and all(p["hollow"] for p in s["points"])
        if panel["step"] == "alignment":  # 12 reads: far too short, faded (as flagged)
            assert all(p["faded"] == p["too_short"] for s in series for p in s["points"])


def configuration_rows(rows, step, label, point) -> list[dict]:
    """The summary's median row and repeat rows of a plotted point (its series' label: aligner
    or I/O mode, and strategy)."""

    def drawn_here(r):
        cell = Cell(*(r[k] for k in ("step", "aligner", "strategy", "io_mode", "threads")), 1)
        return (r["step"], cell.label, r["threads"]) == (step, label, point["threads"])

    chosen = [r for r in rows if drawn_here(r)]
    return [r for r in chosen if r["repeat"] == "median"] + [
        r for r in chosen if r["repeat"] != "median"
    ]


def test_summary_arithmetic_from_raw_files(compared):
    work, _ = compared
    rows = summary.read_tsv(work / "results/compare/summary.tsv")
    assert list(rows[0]) == measure.SUMMARY_COLUMNS
    cells = matrix(MATRIX, "minimap2")
    runs = [r for r in rows if r["repeat"] != "median"]
    assert len(runs) == len(cells)
    for row in runs:
        cell = Cell(*(row[k] for k in ("step", "aligner", "strategy", "io_mode", "threads")), 0)
        name = Cell(**{**cell.__dict__, "repeat": row["repeat"]}).name
        record = json.loads((work / f"results/compare/cells/{name}.run.json").read_text())
        time_v = measure.parse_time_v((work / f"results/compare/cells/{name}.time.txt").read_text())
        bench = (work / f"results/benchmarks/compare_cell/{name}.tsv").read_text().splitlines()
        wall, cpu = record["wall_seconds"], record["cpu_seconds"]
        assert row["wall_s"] == pytest.approx(wall, abs=1e-3)
        assert row["cpu_s"] == pytest.approx(cpu, abs=1e-3)
        assert row["cpu_utilisation"] == pytest.approx(cpu / (wall * row["threads"]), abs=2e-3)
        assert row["core_hours"] == pytest.approx(row["threads"] * wall / 3600, abs=1e-6)
        assert row["max_rss_mb"] == pytest.approx(time_v["max_rss_kb"] / 1024, abs=0.1)
        assert row["job_wall_s"] == pytest.approx(float(bench[1].split("\t")[0]), abs=1e-3)
        assert row["placement"] == measure.placement(record)
        assert row["too_short"] == int(wall < measure.MIN_MEASURABLE_S)
        # The record is the cell's: its strategy and, for methylation, its I/O mode's processes.
        assert record["cell"]["strategy"] == row["strategy"]
        if row["step"] == "methylation":
            storage = MATRIX["storage"]
            assert row["storage_latency_ms"] == storage["latency_ms"] == 1
            assert row["storage_disks"] == storage["disks"]
            assert row["storage_requests"] > 0
            pool = row["io_mode"] == "fast5-pool" and row["strategy"] != "instances"
            assert len(record["processes"]) == (row["threads"] if pool else 1)
    medians = [r for r in rows if r["repeat"] == "median"]
    assert len(medians) == len(cells) // MATRIX["repeats"]
    if len(detect_topology().compute_nodes) == 1:
        # One NUMA node: every strategy runs as none does, but instances in fast5-pool at 2
        # threads (one process with both threads, against a pool of one-thread processes).
        for m in medians:
            pool_instances = (m["strategy"], m["io_mode"], m["threads"]) == (
                "instances",
                "fast5-pool",
                2,
            )
            plain = m["strategy"] == "none" or pool_instances
            assert m["identical_to"] == ("" if plain else "none"), m
    for m in medians:
        key = [m[k] for k in ("step", "aligner", "strategy", "io_mode", "threads")]
        members = [
            r
            for r in runs
            if [r[k] for k in ("step", "aligner", "strategy", "io_mode", "threads")] == key
        ]
        assert m["wall_s"] == pytest.approx(statistics.median(r["wall_s"] for r in members))
        base = next(
            b
            for b in medians
            if (b["step"], b["aligner"], b["threads"], b["strategy"]) == (*key[:2], key[4], "none")
            and b["io_mode"] in ("na", "fast5")
        )
        for r in [m, *members]:
            # summary.tsv keeps three decimals of the ratio of its own (rounded) wall times.
            assert r["speedup"] == pytest.approx(base["wall_s"] / r["wall_s"], abs=5e-4 + 1e-9)


def test_recommendation_is_a_valid_host_file_fragment(compared):
    work, _ = compared
    fragment = yaml.safe_load((work / "results/compare/recommended-host.yaml").read_text())
    rows = summary.read_tsv(work / "results/compare/summary.tsv")
    best = recommend.recommended(rows, "methylation")
    assert fragment["io_mode"] == best["io_mode"]
    assert fragment["strategy"]["alignment"] == recommend.recommended(rows, "alignment")["strategy"]
    host = host_config_from_dict({**fragment, "strategy": {**fragment["strategy"]}})
    assert host.io_mode == best["io_mode"]


def test_snakemake_report_collects_the_comparison(compared):
    work, _ = compared
    html = work / "results/compare/report.html"
    run_workflow(work, "compare", "--report", str(html), "--configfile", TEST_CONFIG)
    text = html.read_text()
    assert "CPU utilisation" in text and "recommended-host.yaml" in text


def test_unknown_compare_sample_is_refused(tmp_path, ecoli_dir, dh10b):
    work = write_project(tmp_path, [ecoli_row(ecoli_dir, dh10b)], {"compare": {"sample": "nope"}})
    result = run_workflow(work, "compare", "-n", check=False)
    assert result.returncode != 0
    message = "numapore: compare.sample: 'nope' is not a sample (samples: ecoli)"
    assert message in result.stdout + result.stderr


def test_overlapping_cells_are_refused(tmp_path):
    # A --resources of one's own replaces profiles/default's compare=1: cells would overlap.
    work = compare_project(tmp_path)
    result = run_workflow(
        work, "compare", "-n", "--resources", "mem_mb=1000", "--configfile", TEST_CONFIG,
        check=False,
    )  # fmt: skip
    assert result.returncode != 0
    message = "numapore: the comparison's cells must run one at a time: give --resources compare=1"
    assert message in result.stdout + result.stderr


# Helpers ---------------------------------------------------------------------------------------


def test_cell_name_round_trip():
    cell = Cell("methylation", "minimap2", "instances", "fast5-pool", 16, 2)
    assert cell.name == "methylation.minimap2.instances.fast5-pool.t16.r2"
    assert Cell.parse(cell.name) == cell
    assert cell.label == "fast5-pool instances"
    with pytest.raises(ValueError, match="not a benchmark cell"):
        Cell.parse("alignment.minimap2.none.t1")


def test_matrix_interleaves_repeats():
    one = {**FULL_MATRIX, "steps": ["alignment"], "strategies": ["none"], "repeats": 3}
    cells = matrix(one, "bwa")
    assert [c.repeat for c in cells] == [1] * 4 + [2] * 4 + [3] * 4
    assert {(c.aligner, c.threads) for c in cells[:4]} == {
        (a, t) for a in ("minimap2", "bwa") for t in (1, 2)
    }


def test_matrix_order_is_a_seeded_shuffle_of_each_repeat():
    shuffled = {**FULL_MATRIX, "seed": MATRIX["seed"]}  # every thread count, the tests' seed
    cells = matrix(shuffled, "minimap2")
    configs = [c for c in cells if c.repeat == 1]
    # Each repeat runs every configuration once, in an order of its own.
    for repeat in range(1, shuffled["repeats"] + 1):
        block = [c for c in cells if c.repeat == repeat]
        assert cells[(repeat - 1) * len(configs) : repeat * len(configs)] == block
        assert sorted(map(config_key, block)) == sorted(map(config_key, configs))
    assert [config_key(c) for c in cells if c.repeat == 2] != list(map(config_key, configs))
    # Not in thread order (the load drift the issue saw biased 1 against 2 threads).
    threads = [c.threads for c in configs]
    assert threads != sorted(threads) and threads != sorted(threads, reverse=True)
    # The same seed, the same order; another seed, another order.
    assert matrix(dict(shuffled), "minimap2") == cells
    assert matrix({**shuffled, "seed": 8}, "minimap2") != cells
    assert sorted(matrix({**shuffled, "seed": 8}, "minimap2"), key=str) == sorted(cells, key=str)


def config_key(cell: Cell) -> tuple:
    """A cell's configuration: the cell without its repeat."""
    return (cell.step, cell.aligner, cell.strategy, cell.io_mode, cell.threads)


def test_the_full_matrix_expands_to_every_combination():
    """config/config.yaml's matrix (every strategy and I/O mode: what a user compares), expanded
    without running a cell: each aligner x strategy x threads of the alignment and each I/O mode
    x strategy x threads of the methylation (on the workflow's aligner) once in every repeat,
    each cell named for what it is. The tests run .test/config-compare.yaml's grid of it."""
    assert set(FULL_MATRIX["strategies"]) == set(STRATEGIES) - {"auto"}
    assert set(FULL_MATRIX["io_modes"]) == set(IO_MODES)
    cells = matrix(FULL_MATRIX, "minimap2")
    threads, strategies = FULL_MATRIX["threads"], FULL_MATRIX["strategies"]
    expected = {
        ("alignment", a, s, "na", t) for a in FULL_MATRIX["aligners"] for s in strategies
        for t in threads
    } | {
        ("methylation", "minimap2", s, io, t) for io in FULL_MATRIX["io_modes"]
        for s in strategies for t in threads
    }  # fmt: skip
    assert len(cells) == len(expected) * FULL_MATRIX["repeats"] == config_cells(FULL_MATRIX)
    for repeat in range(1, FULL_MATRIX["repeats"] + 1):
        block = cells[(repeat - 1) * len(expected) : repeat * len(expected)]
        assert {c.repeat for c in block} == {repeat}
        assert sorted(map(config_key, block)) == sorted(expected)
    assert len({c.name for c in cells}) == len(cells)
    assert all(Cell.parse(c.name) == c for c in cells)
    # The tests' grid is part of it: the same steps, aligners and I/O modes, fewer strategies.
    small = {config_key(c) for c in matrix(MATRIX, "minimap2")}
    assert small < expected and {k[2] for k in small} == set(MATRIX["strategies"])


def test_series_styles_differ_at_any_count():
    styles = [comparison_plots.series_style(i) for i in range(144)]
    assert len(set(styles)) == 144
    first = styles[:12]  # the most series a panel has: each its own colour and marker
    assert len({c for c, _ in first}) == len({m for _, m in first}) == 12


def test_difference_against_the_reference():
    rows = summary.summarise(
        [row("none", "fast5", 2, r, w) for r, w in ((1, 10.0), (2, 10.2))]
        + [row("localalloc", "fast5", 2, r, w) for r, w in ((1, 8.0), (2, 8.1))]
        + [row("interleave", "fast5", 2, r, w) for r, w in ((1, 9.9), (2, 10.4))]
        + [row("instances", "fast5", 2, r, w) for r, w in ((1, 12.0), (2, 12.2))]
        + [row("none", "slow5", 2, r, w) for r, w in ((1, 1.0), (2, 1.1))]
        + [row("interleave", "slow5", 2, 1, 3.0)]
    )
    verdict = {
        (s, i): recommend.difference(rows, ("methylation", "bwa", s, i, 2))
        for s, i in {(r["strategy"], r["io_mode"]) for r in rows}
    }
    assert verdict == {
        ("none", "fast5"): "baseline",
        ("localalloc", "fast5"): "faster",
        ("interleave", "fast5"): "within spread",
        ("instances", "fast5"): "slower",
        ("none", "slow5"): "too short",
        ("interleave", "slow5"): "too short",  # its reference (none, slow5) is too short
    }
    assert recommend.difference(rows, ("methylation", "bwa", "none", "fast5-pool", 2)) == ""
    identical = summary.summarise(
        [placed_row("none", r, w, ONE_NODE_NONE) for r, w in ((1, 10.0), (2, 10.2))]
        + [placed_row("instances", r, w, ONE_NODE_INSTANCES) for r, w in ((1, 7.0), (2, 7.1))]
    )
    config = ("alignment", "minimap2", "instances", "na", 2)
    assert recommend.difference(identical, config) == "identical"


def test_cell_host_sets_strategy_and_io_mode():
    base = {"topology": "auto", "strategy": {"alignment": "auto"}, "io_processes": 3}
    host = cell_host(base, Cell("methylation", "bwa", "interleave", "slow5", 2, 1))
    assert host["strategy"] == {"alignment": "auto", "methylation": "interleave"}
    assert host["io_mode"] == "slow5" and "io_processes" not in host
    assert base["strategy"] == {"alignment": "auto"}  # the base is not changed


def test_cell_host_config_is_the_base_host_with_the_cells_settings(tmp_path):
    base = tmp_path / "base.yaml"
    base.write_text(yaml.safe_dump({"topology": "auto", "io_mode": "fast5", "io_processes": 3}))
    host = cell_run.cell_host_config(base, Cell("methylation", "bwa", "interleave", "slow5", 2, 1))
    assert host.strategy["methylation"] == "interleave" and host.io_mode == "slow5"
    assert host.io_processes is None and host.path == base
    with pytest.raises(HostConfigError, match=f"{base} \\(benchmark cell alignment.bwa.bogus"):
        cell_run.cell_host_config(base, Cell("alignment", "bwa", "bogus", "na", 1, 1))


def test_parse_time_v_reads_gnu_time(tmp_path):
    report = tmp_path / "time.txt"
    subprocess.run(["/usr/bin/time", "-v", "-o", str(report), "sleep", "0.2"], check=True)
    parsed = measure.parse_time_v(report.read_text())
    assert parsed["wall_s"] >= 0.2 and parsed["max_rss_kb"] > 0 and parsed["exit_status"] == 0
    with pytest.raises(ValueError, match="GNU time"):
        measure.parse_time_v("Command being timed: x\n")


def test_parse_benchmark():
    text = "s\th:m:s\tmax_rss\tcpu_time\n1.50\t0:00:01\t12.5\t-\n"
    parsed = measure.parse_benchmark(text)
    assert parsed["s"] == 1.5 and parsed["max_rss"] == 12.5 and math.isnan(parsed["cpu_time"])


ORDER = {"position": 1, "seed": 1}  # a cell's place in the run order, in its record


def row(strategy, io_mode, threads, repeat, wall, step="methylation"):
    """A summary row with the given coordinates and wall time (CPU = wall x threads)."""
    cell = Cell(step, "bwa", strategy, io_mode, threads, repeat)
    record = {"wall_seconds": wall, "cpu_seconds": wall * threads / 2, "order": ORDER}
    return measure.cell_row(cell, record, {"max_rss_kb": 2048}, {"s": wall + 1})


def test_cell_row_and_summarise_arithmetic():
    rows = summary.summarise(
        [
            row("none", "fast5", 2, 1, 10.0),
            row("none", "fast5", 2, 2, 12.0),
            row("none", "slow5", 2, 1, 4.0),
            row("none", "slow5", 2, 2, 6.0),
        ]
    )
    first = rows[0]
    assert first["cpu_utilisation"] == 0.5 and first["max_rss_mb"] == 2.0
    assert first["core_hours"] == pytest.approx(2 * 10 / 3600, abs=1e-6)
    assert first["job_wall_s"] == 11.0
    medians = {r["io_mode"]: r for r in rows if r["repeat"] == "median"}
    assert medians["fast5"]["wall_s"] == 11.0 and medians["slow5"]["wall_s"] == 5.0
    assert medians["slow5"]["speedup"] == pytest.approx(11 / 5, rel=1e-3)
    assert rows[2]["speedup"] == pytest.approx(11 / 4, rel=1e-3)
    assert recommend.fastest(rows, "methylation")["io_mode"] == "slow5"
    assert recommend.fastest(rows, "alignment") is None


def test_summary_without_baseline_has_no_speedup():
    rows = summary.summarise([row("interleave", "slow5", 1, 1, 3.0)])
    assert all(math.isnan(r["speedup"]) for r in rows)
    assert summary.baseline_of(rows[0], rows[1:]) is None


def test_tsv_round_trip(tmp_path):
    rows = summary.summarise([row("none", "fast5", 1, 1, 2.5)])
    summary.write_tsv(rows, tmp_path / "s.tsv")
    back = summary.read_tsv(tmp_path / "s.tsv")
    assert back[0]["wall_s"] == 2.5 and back[1]["repeat"] == "median" and back[0]["threads"] == 1


def test_recommendation_and_tables():
    rows = summary.summarise(
        [row("none", "fast5", 2, 1, 10.0), row("interleave", "slow5", 2, 1, 2.0)]
        + [
            row("none", "na", 2, 1, 30.0, "alignment"),
            row("instances", "na", 2, 1, 10.0, "alignment"),
        ]
    )
    text = recommend.recommendation(rows, "config/hosts/x.yaml")
    data = yaml.safe_load(text)
    assert data == {
        "strategy": {"alignment": "instances", "methylation": "interleave"},
        "io_mode": "slow5",
    }
    assert "# methylation: interleave (slow5 I/O) at 2 threads: 2.00 s, x5.00" in text
    table = compare_report.pivot_table(rows, "alignment")
    assert "| bwa | instances | 10.00 | 0.50 | x3.00 |" in table
    assert compare_report.storage_description(rows).startswith("raw signal read directly")


def test_recommendation_ignores_differences_within_the_repeats_spread():
    rows = summary.summarise(
        [row("none", "fast5", 2, r, w) for r, w in ((1, 10.0), (2, 12.0))]
        + [row("none", "slow5", 2, r, w) for r, w in ((1, 4.0), (2, 6.0))]
        # Faster median than none/slow5, but its slower repeat is within none/slow5's range.
        + [row("interleave", "slow5", 2, r, w) for r, w in ((1, 3.0), (2, 4.5))]
        # Faster than none/fast5 in every repeat, but slower than slow5: not the choice.
        + [row("interleave", "fast5", 2, r, w) for r, w in ((1, 8.0), (2, 9.0))]
    )
    assert recommend.fastest(rows, "methylation")["strategy"] == "interleave"
    best = recommend.recommended(rows, "methylation")
    assert (best["strategy"], best["io_mode"]) == ("none", "slow5")
    text = recommend.recommendation(rows, "config/hosts/x.yaml")
    assert yaml.safe_load(text) == {"strategy": {"methylation": "none"}, "io_mode": "slow5"}
    assert (
        "fastest median: interleave (slow5 I/O) 3.75 s, not faster than a simpler configuration "
        "by more than the repeats' spread and 5%: not recommended" in text
    )
    # Nothing beats the baseline clearly: the baseline is kept.
    noisy = summary.summarise(
        [row("none", "fast5", 2, r, w) for r, w in ((1, 10.0), (2, 12.0))]
        + [row("localalloc", "fast5", 2, r, w) for r, w in ((1, 9.0), (2, 10.5))]
    )
    assert recommend.recommended(noisy, "methylation")["strategy"] == "none"
    assert recommend.simpler_configs(noisy[-1]) == [("methylation", "bwa", "none", "fast5", 2)]


# What a process's policy probe (numactl --show + /proc/self/status) prints on a one-node host
# under strategy none and under instances (numactl --cpunodebind=0 --membind=0), and under
# interleave on a two-node host.
ONE_NODE_NONE = (
    "policy: default\npreferred node: current\nphyscpubind: 0 1 \ncpubind: 0 \nnodebind: 0 \n"
    "membind: 0 \npreferred: \nCpus_allowed_list:\t0-1\nMems_allowed_list:\t0\n"
)
ONE_NODE_INSTANCES = ONE_NODE_NONE.replace("policy: default", "policy: bind").replace(
    "preferred node: current", "preferred node: 0"
)
TWO_NODES_NONE = (
    "policy: default\npreferred node: current\nphyscpubind: 0 1 2 3 \ncpubind: 0 1 \n"
    "nodebind: 0 1 \nmembind: 0 1 \npreferred: \nCpus_allowed_list:\t0-3\n"
    "Mems_allowed_list:\t0-1\n"
)
TWO_NODES_INTERLEAVE = TWO_NODES_NONE.replace("policy: default", "policy: interleave").replace(
    "preferred: ", "preferred: \ninterleavemask: 0 1 \ninterleavenode: 0 "
)


def placed_row(strategy, repeat, wall, policy, processes=1, step="alignment", io_mode="na"):
    """A summary row of a cell whose processes ran under the given policy probe output."""
    cell = Cell(step, "minimap2", strategy, io_mode, 2, repeat)
    record = {
        "wall_seconds": wall,
        "cpu_seconds": wall,
        "processes": [{"threads": 2 // processes, "policy": policy}] * processes,
        "order": ORDER,
    }
    return measure.cell_row(cell, record, {"max_rss_kb": 2048}, {"s": wall + 1})


def test_placement_from_the_policy_in_force():
    one = {"processes": [{"threads": 2, "policy": ONE_NODE_NONE}]}
    assert measure.placement(one) == "2t cpus 0-1 mem node 0"
    bound = {"processes": [{"threads": 2, "policy": ONE_NODE_INSTANCES}]}
    assert measure.placement(bound) == measure.placement(one)  # one memory node: moot
    two = measure.placement({"processes": [{"threads": 2, "policy": TWO_NODES_NONE}]})
    spread = measure.placement({"processes": [{"threads": 2, "policy": TWO_NODES_INTERLEAVE}]})
    assert two == "2t cpus 0-3 mem default" and spread == "2t cpus 0-3 mem interleave 0-1"
    assert measure.placement({"processes": [{"threads": 2, "policy": None}]}) == "unknown"


def test_one_node_strategies_are_identical_and_never_recommended():
    # instances measured faster in every repeat (by far more than 5 %), but it ran exactly as
    # none did: the same command on a one-node host.
    rows = summary.summarise(
        [placed_row("none", r, w, ONE_NODE_NONE) for r, w in ((1, 10.0), (2, 10.2))]
        + [placed_row("instances", r, w, ONE_NODE_INSTANCES) for r, w in ((1, 7.0), (2, 7.1))]
        # Two processes of 1 thread: not the same as none's one process of 2 threads.
        + [placed_row("localalloc", r, w, ONE_NODE_NONE, 2) for r, w in ((1, 11.0), (2, 11.1))]
    )
    medians = {r["strategy"]: r for r in rows if r["repeat"] == "median"}
    assert medians["instances"]["identical_to"] == "none"
    assert medians["localalloc"]["identical_to"] == "" and medians["none"]["identical_to"] == ""
    assert all(r["identical_to"] == "none" for r in rows if r["strategy"] == "instances")
    assert recommend.recommended(rows, "alignment")["strategy"] == "none"
    assert summary.identical_strategies(rows) == {"alignment": ["instances"]}
    text = recommend.recommendation(rows, "x.yaml")
    assert yaml.safe_load(text) == {"strategy": {"alignment": "none"}}
    assert "instances (minimap2) 7.05 s, identical to none on this host" in text
    assert "`instances` ran exactly as `none`" in compare_report.identical_note(rows)
    assert "| minimap2 | instances (= none) |" in compare_report.pivot_table(rows, "alignment")
    # On two nodes, interleave is another placement: compared (and here recommended).
    two = summary.summarise(
        [placed_row("none", r, w, TWO_NODES_NONE) for r, w in ((1, 10.0), (2, 10.2))]
        + [placed_row("interleave", r, w, TWO_NODES_INTERLEAVE) for r, w in ((1, 7.0), (2, 7.1))]
    )
    assert recommend.recommended(two, "alignment")["strategy"] == "interleave"
    assert compare_report.identical_note(two) == ""


def test_recommendation_needs_an_effect_beyond_spread_and_five_percent():
    def best(none_walls, other_walls):
        rows = summary.summarise(
            [row("none", "fast5", 2, r, w) for r, w in enumerate(none_walls, 1)]
            + [row("localalloc", "fast5", 2, r, w) for r, w in enumerate(other_walls, 1)]
        )
        return recommend.recommended(rows, "methylation")["strategy"]

    assert best([10.0, 10.1], [9.0, 9.1]) == "localalloc"  # 10 %, spread 0.1
    assert best([10.0, 10.1], [9.7, 9.75]) == "none"  # 3 %: under 5 %
    assert best([10.0, 13.0], [8.0, 9.5]) == "none"  # ranges apart, effect 2.75 < spread 3


def test_too_short_cells_are_flagged_and_sized():
    # The case: 0.27 s against 0.36 s alignments of 100 reads.
    rows = summary.summarise(
        [row("none", "na", 2, r, w, "alignment") for r, w in ((1, 0.36), (2, 0.37))]
        + [row("instances", "na", 2, r, w, "alignment") for r, w in ((1, 0.27), (2, 0.28))]
        + [row("none", "fast5", 2, r, w) for r, w in ((1, 30.0), (2, 31.0))]
    )
    flags = {(r["strategy"], r["repeat"]): r["too_short"] for r in rows if r["step"] == "alignment"}
    assert set(flags.values()) == {1}
    assert all(r["too_short"] == 0 for r in rows if r["step"] == "methylation")
    assert recommend.recommended(rows, "alignment")["strategy"] == "none"
    advice = compare_report.reads_advice(rows, 100)
    assert "4 of 6 cells ran for less than 2 s" in advice
    # 0.365 s / 100 reads = 3.65 ms per read: 5 s takes 1370 reads.
    assert "took 0.36 s for 100 reads (3.65 ms per read): set `compare.reads` to 1370" in advice
    assert compare_report.reads_advice([r for r in rows if r["step"] == "methylation"], 100) == ""


def test_subsample_reads_and_alignments(tmp_path, ecoli_dir, minimap2_run):
    names = subsample.subsample_reads(ecoli_dir / "reads.fasta", tmp_path / "r.fasta", 5)
    assert len(names) == 5
    bam = minimap2_run / "results/ecoli/align/ecoli.minimap2.bam"
    count = subsample.subsample_alignments(bam, tmp_path / "r.fasta", tmp_path / "r.bam")
    with pysam.AlignmentFile(str(tmp_path / "r.bam")) as handle:
        kept = [r.query_name for r in handle]
    assert count == len(kept) > 0 and set(kept) <= set(names)
    everything = subsample.subsample_reads(ecoli_dir / "reads.fasta", tmp_path / "all.fasta", 0)
    assert len(everything) == 112
    assert subsample.count_reads(tmp_path / "r.fasta") == 5


def test_signal_view_relocates_the_read_index(tmp_path, minimap2_run):
    reads = minimap2_run / "results/ecoli/reads/fast5/ecoli.fasta"
    files = cell_run.signal_files(Path(f"{reads}.index.readdb"))
    assert files and all(f.suffix == ".fast5" for f in files)
    view = cell_run.signal_view(reads, tmp_path / "view", lambda p: Path("/elsewhere") / p.name)
    lines = Path(f"{view}.index.readdb").read_text().splitlines()
    assert len(lines) == 112 and all(ln.split("\t")[1].startswith("/elsewhere/") for ln in lines)
    assert Path(f"{view}.index.fai").resolve() == Path(f"{reads}.index.fai").resolve()


# A short-read sample (issue 29): the lambda-phage pairs of Debian's bowtie2-examples ---------

EXAMPLES = Path("/usr/share/doc/bowtie2/examples")
PAIRS = (EXAMPLES / "reads" / "reads_1.fq.gz", EXAMPLES / "reads" / "reads_2.fq.gz")
# The grid of the long-read comparison's: 2 aligners x 2 strategies (thread counts and repeats
# are the long reads' matter: the same code for every kind).
SHORT_MATRIX = {
    "sample": "pe",
    "reads": 500,  # pairs
    "steps": ["alignment", "methylation"],  # methylation: not a step of short reads
    "aligners": ["bwa", "bowtie2"],
    "strategies": ["none", "instances"],
    "io_modes": ["fast5"],
    "threads": [2],
    "repeats": 1,
}


def short_row() -> dict[str, str]:
    """A sheet row of the lambda pairs (kind short, R2 in reads2)."""
    return {
        "sample": "pe",
        "signal": "",
        "reads": str(PAIRS[0]),
        "reference": str(EXAMPLES / "reference" / "lambda_virus.fa.gz"),
        "kind": "short",
        "reads2": str(PAIRS[1]),
    }


@pytest.fixture(scope="module")
def short_compared(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """`snakemake compare` on the first lambda pairs (SHORT_MATRIX reads) with bwa and
    bowtie2."""
    work = write_project(
        tmp_path_factory.mktemp("short_compare"), [short_row()], {"compare": SHORT_MATRIX}
    )
    return work, run_workflow(work, "compare")


def test_short_sample_is_compared_in_its_alignment(short_compared):
    """Aligner x strategy x threads for bwa and bowtie2, no methylation cells (the kind has no
    such step, and the report says so); each cell runs the align job's command for pairs."""
    work, result = short_compared
    seed = yaml.safe_load((REPO / "config" / "config.yaml").read_text())["compare"]["seed"]
    cells = matrix({**SHORT_MATRIX, "seed": seed, "steps": ["alignment"]}, "bwa")
    grid = len(SHORT_MATRIX["aligners"]) * len(SHORT_MATRIX["strategies"])
    assert len(cells) == grid * len(SHORT_MATRIX["threads"]) * SHORT_MATRIX["repeats"]
    assert {c.step for c in cells} == {"alignment"}
    progress = [ln for ln in result.stdout.splitlines() if ln.startswith("compare: cell ")]
    assert [ln.split()[3].rstrip(":") for ln in progress] == [c.name for c in cells]
    inputs = work / "results/compare/input"
    for cell in cells:
        record = json.loads((work / f"results/compare/cells/{cell.name}.run.json").read_text())
        (process,) = record["processes"]  # one node: one instance
        if cell.aligner == "bwa":
            preset = "bwa mem -K 10000000 -R '\"'\"'@RG\\tID:pe\\tSM:pe'\"'\"'"
            mates = f"{inputs / 'pe.1.fastq'} {inputs / 'pe.2.fastq'}"
        else:
            preset = "bowtie2 --end-to-end"
            mates = f"-1 {inputs / 'pe.1.fastq'} -2 {inputs / 'pe.2.fastq'}"
        command = process["command"].replace(f"{work}/", "")
        assert preset in command and mates.replace(f"{work}/", "") in command, command
        assert "samtools fixmate -u -m" in command  # duplicates marked, as the align job does
    rows = summary.read_tsv(work / "results/compare/summary.tsv")
    assert {r["step"] for r in rows} == {"alignment"}
    report = (work / "results/compare/report.md").read_text()
    assert f"Sample `pe` (first {SHORT_MATRIX['reads']} pairs)" in report
    assert "- methylation: not measured; sample `pe` is of kind `short`" in report
    assert "| bwa | none |" in report and "| bowtie2 | instances" in report


def test_short_subsample_keeps_mates_together(short_compared):
    """The cells' reads: the first pairs (SHORT_MATRIX reads), R2 record i the mate of R1
    record i."""
    work, _ = short_compared
    staged = [work / f"results/pe/reads/paired/pe.{m}.fastq.gz" for m in (1, 2)]
    subset = [work / f"results/compare/input/pe.{m}.fastq" for m in (1, 2)]
    names = []
    for full, part in zip(staged, subset, strict=True):
        with pysam.FastxFile(str(full)) as a, pysam.FastxFile(str(part)) as b:
            kept = [r.name for r in b]
            assert kept == [r.name for _, r in zip(range(len(kept)), a, strict=False)]
        names.append(kept)
    assert len(names[0]) == SHORT_MATRIX["reads"] and names[0] == names[1]


def test_short_report_sets_each_index_against_node_memory(short_compared):
    """Each aligner's index size (its files) against the smallest node's memory, with the
    advisor's rule (instances when it fits one node), in the report and the host fragment."""
    work, _ = short_compared
    nodes = detect_topology().compute_nodes
    smallest = min(n.memory_mib for n in nodes)
    report = (work / "results/compare/report.md").read_text()
    fragment = (work / "results/compare/recommended-host.yaml").read_text()
    references = work / "results/references/lambda_virus"
    for aligner in ("bwa", "bowtie2"):
        size = sum(p.stat().st_size for p in (references / aligner).iterdir())
        mib = round(size / 2**20, 1)
        rule = "none" if len(nodes) == 1 else "instances"
        assert f"| {aligner} | {mib:g} | {smallest} | " in report
        assert f"| yes | {rule} |" in report
        assert f"#   {aligner} index {mib:g} MiB = " in fragment
        assert f"of the smallest node ({smallest} MiB): fits one node; by that rule: {rule}" in (
            fragment
        )
    assert yaml.safe_load(fragment) == {"strategy": {"alignment": "none"}}


def test_short_sample_without_alignment_is_refused(tmp_path):
    work = write_project(
        tmp_path, [short_row()], {"compare": {**SHORT_MATRIX, "steps": ["methylation"]}}
    )
    result = run_workflow(work, "compare", "-n", check=False)
    assert result.returncode != 0
    message = "numapore: compare.steps: sample 'pe' (short reads) runs none of methylation"
    assert message in result.stdout + result.stderr


def test_measured_steps_follow_the_kind():
    both = ["alignment", "methylation"]
    assert measured_steps(both, "signal") == both
    assert measured_steps(both, "short") == ["alignment"]
    assert measured_steps(["methylation"], "modbam") == []


def test_subsample_pairs(tmp_path):
    r1, r2 = tmp_path / "r1.fq", tmp_path / "r2.fq"
    r1.write_text("".join(f"@p{i}/1\nACGT\n+\nIIII\n" for i in range(5)))
    r2.write_text("".join(f"@p{i}/2\nTTGA\n+\nIIII\n" for i in range(5)))
    out = [tmp_path / "o1.fq", tmp_path / "o2.fq"]
    assert subsample.subsample_pairs(r1, r2, *out, 3) == 3
    assert [r.name for r in pysam.FastxFile(str(out[1]))] == ["p0/2", "p1/2", "p2/2"]
    assert subsample.subsample_pairs(r1, r2, *out, 0) == 5
    r2.write_text("@p0/2\nTTGA\n+\nIIII\n@q1/2\nTTGA\n+\nIIII\n")
    with pytest.raises(
        InputError, match=f"reads file {r2}, record 2: q1/2 is not the mate of p1/1"
    ):
        subsample.subsample_pairs(r1, r2, *out, 0)


def two_nodes(memory_mib: int) -> Topology:
    """A two-node layout of 2 CPUs per node with memory_mib each."""
    return Topology(
        (Node(0, (0, 1), memory_mib, (10, 20)), Node(1, (2, 3), memory_mib, (20, 10))), "test"
    )


def test_index_fit_and_its_lines():
    # 29 GB (the study's SNAP index) against 16 GiB nodes; a 5 GB bwa index fits.
    fits = recommend.index_fit({"bwa": 5 * 10**9, "snap": 29 * 10**9}, two_nodes(16384))
    assert [(f["aligner"], f["fits"], f["strategy"]) for f in fits] == [
        ("bwa", True, "instances"),
        ("snap", False, "interleave"),
    ]
    assert fits[0]["index_mib"] == round(5 * 10**9 / 2**20, 1) and fits[0]["node_mib"] == 16384
    table = compare_report.index_table(fits)
    assert "| snap | 27656.6 | 16384 | 168.80% | no | interleave |" in table
    # instances measured fastest with an index that does not fit: said beside the choice.
    rows = summary.summarise(
        [row("none", "na", 2, r, w, "alignment") for r, w in ((1, 30.0), (2, 30.5))]
        + [row("instances", "na", 2, r, w, "alignment") for r, w in ((1, 10.0), (2, 10.2))]
    )
    fits = recommend.index_fit({"bwa": 10 * 10**9}, two_nodes(16384))
    text = recommend.recommendation(rows, "x.yaml", fits)
    assert "bwa index 9536.7 MiB = 58.2% of the smallest node (16384 MiB): does not fit" in text
    assert "instances measured fastest, but bwa's index does not fit one node" in text
    assert yaml.safe_load(text) == {"strategy": {"alignment": "instances"}}
