"""The comparison's report (report.md): the pivot tables per step, what can be compared
(strategies identical to none, cells too short to measure and the `compare.reads` that sizes
them, steps the sample's kind does not run), each aligner's index size against the nodes'
memory, the storage the signal was read from, and the recommendation."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from numapore.compare.cells import NOT_APPLICABLE, measured_steps
from numapore.compare.measure import MIN_MEASURABLE_S
from numapore.compare.summary import BASELINE, identical_strategies
from numapore.execution.advisor import FIT_FRACTION

# What `compare.reads` is sized for when cells are too short: the baseline cell's seconds.
TARGET_CELL_S = 5.0
FIT_PERCENT = f"{FIT_FRACTION:.0%}"


def identical_note(rows: Sequence[Mapping[str, Any]]) -> str:
    """The report's lines on strategies that ran as strategy none did ('' if there are none)."""
    lines = []
    for step, strategies in identical_strategies(rows).items():
        names = ", ".join(f"`{s}`" for s in strategies)
        lines.append(
            f"- {step}: {names} ran exactly as `{BASELINE['strategy']}` on this host (the same "
            "processes, threads, CPUs and memory placement, as on a host with one NUMA node): "
            "the same command, so their times differ by noise only. They are identical; none "
            "is recommended over another."
        )
    return "\n".join(lines)


def reads_advice(rows: Sequence[Mapping[str, Any]], reads: int, unit: str = "reads") -> str:
    """The report's lines on cells too short to measure ('' if there are none), with the
    compare.reads that makes the shortest baseline cell last about TARGET_CELL_S seconds (from
    its measured seconds per read; reads: how many reads the cells ran on, counted in unit:
    'pairs' for paired samples, whose compare.reads counts pairs)."""
    cells = [r for r in rows if r["repeat"] != "median"]
    short = [r for r in cells if r["too_short"]]
    if not short:
        return ""
    lines = [
        f"- {len(short)} of {len(cells)} cells ran for less than {MIN_MEASURABLE_S:g} s "
        "(column `too_short` of summary.tsv): too short to measure, start-up noise is as large "
        "as any difference; no strategy is recommended on them."
    ]
    baselines = [
        r
        for r in rows
        if r["repeat"] == "median"
        and r["strategy"] == BASELINE["strategy"]
        and r["io_mode"] in (NOT_APPLICABLE, BASELINE["io_mode"])
    ]
    if not baselines or reads < 1:
        return "\n".join(lines)
    base = min(baselines, key=lambda r: r["wall_s"])
    per_read = max(base["wall_s"], 1e-3) / reads
    wanted = int(-(-TARGET_CELL_S // per_read))  # ceiling
    total_s = sum(r["wall_s"] for r in cells) * wanted / reads
    what = base["aligner"] if base["step"] == "alignment" else "fast5 I/O"
    lines.append(
        f"- The shortest baseline cell ({base['step']}, {what}, strategy "
        f"`{BASELINE['strategy']}`, {base['threads']} threads) took {base['wall_s']:.2f} s for "
        f"{reads} {unit} ({per_read * 1000:.2f} ms per {unit[:-1]}): set `compare.reads` to "
        f"{wanted} "
        f"so that it runs about {TARGET_CELL_S:g} s (every cell then takes about "
        f"{total_s / 60:.0f} min in all; a sample with fewer reads needs a larger sample, "
        "`compare.sample`)."
    )
    return "\n".join(lines)


def steps_note(sample: str, kind: str, steps: Sequence[str]) -> str:
    """The report's line on steps of compare.steps the sample's kind does not run ('' if none):
    a short-read sample has no methylation cells."""
    missing = [s for s in steps if s not in measured_steps(steps, kind)]
    if not missing:
        return ""
    return (
        f"- {', '.join(missing)}: not measured; sample `{sample}` is of kind `{kind}`, which "
        "does not run that step (its cells would have nothing to run)."
    )


def index_table(fits: Sequence[Mapping[str, Any]]) -> str:
    """A Markdown table of each aligner's index size against the smallest node's memory
    (numapore.compare.recommend.index_fit) and the strategy the rule gives."""
    if not fits:
        return "_no alignment cells_\n"
    lines = [
        "| aligner | index (MiB) | smallest node (MiB) | share of the node | fits one node "
        "| by the rule |",
        "|" + " --- |" * 6,
    ]
    for f in fits:
        share = f"{f['share']:.2%}" if f["share"] is not None else "?"
        lines.append(
            f"| {f['aligner']} | {f['index_mib']:g} | {f['node_mib']} | {share} | "
            f"{'yes' if f['fits'] else 'no'} | {f['strategy']} |"
        )
    return "\n".join(lines) + "\n"


def pivot_table(rows: Sequence[Mapping[str, Any]], step: str) -> str:
    """A Markdown table of a step's median seconds per thread count, one row per aligner x
    strategy (alignment) or I/O mode x strategy (methylation), with CPU utilisation and the
    speed-up at the highest thread count (the studies' aligner x policy table)."""
    medians = [r for r in rows if r["repeat"] == "median" and r["step"] == step]
    if not medians:
        return f"_{step}: not in the comparison_\n"
    threads = sorted({r["threads"] for r in medians})
    first = "aligner" if step == "alignment" else "I/O mode"
    key = "aligner" if step == "alignment" else "io_mode"
    header = [first, "strategy", *(f"{t} threads (s)" for t in threads)]
    header += [f"CPU util. at {threads[-1]}", f"speed-up at {threads[-1]}"]
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    configs = sorted({(r[key], r["strategy"]) for r in medians}, key=lambda c: (c[0], c[1]))
    for config in configs:
        cells = {r["threads"]: r for r in medians if (r[key], r["strategy"]) == config}
        top = cells.get(threads[-1])
        values = [f"{cells[t]['wall_s']:.2f}" if t in cells else "-" for t in threads]
        values += [f"{top['cpu_utilisation']:.2f}", f"x{top['speedup']:.2f}"] if top else ["-"] * 2
        same = {r["identical_to"] for r in cells.values()}
        strategy = f"{config[1]} (= {same.pop()})" if same != {""} and len(same) == 1 else config[1]
        lines.append("| " + " | ".join([config[0], strategy, *values]) + " |")
    return "\n".join(lines) + "\n"


def storage_description(rows: Sequence[Mapping[str, Any]]) -> str:
    """The storage the raw signal was read from, in words (emulated or not)."""
    if not any(r["step"] == "methylation" for r in rows):
        return "no raw signal read (no methylation cells)"
    emulated = [r for r in rows if r["step"] == "methylation" and r["storage_latency_ms"]]
    if not emulated:
        return "raw signal read directly (no storage emulation; page cache)"
    r = emulated[0]
    return (
        f"raw signal on emulated storage: {r['storage_latency_ms']:g} ms per read request, "
        f"{int(r['storage_disks'])} disks (requests served at once)"
    )


def report_markdown(
    rows: Sequence[Mapping[str, Any]],
    advice: str,
    sample: str,
    reads: int,
    host: str,
    notes: str,
    fits: Sequence[Mapping[str, Any]] = (),
    paired: bool = False,
) -> str:
    """The report's Markdown: the sample and reads the cells ran on (reads: compare.reads, 0 for
    all; pairs when paired), the base host file, the storage, the pivot tables, each aligner's
    index against node memory (fits: recommend.index_fit), the notes on what can be compared,
    the plots and the recommended host-file fragment (advice)."""
    unit = "pairs" if paired else "reads"
    subset = f"first {reads} {unit}" if reads else f"all {unit}"
    return f"""# numapore: strategy comparison on this host

Sample `{sample}` ({subset}); base host file `{host}`;
{storage_description(rows)}. Seconds are the median over repeats of the tool processes' wall time;
speed-up is against strategy `none` (and I/O mode `fast5`) at the same threads.
Every cell: `results/compare/summary.tsv`.

## Alignment: aligner x strategy

{pivot_table(rows, "alignment")}
## Index size against node memory

The advisor's rule (the NUMA study's): one instance per node, each with its own copy of the
index, when the index fits one node (at most {FIT_PERCENT} of the smallest node's memory),
else one index interleaved over the nodes; on one node there is nothing to place.

{index_table(fits)}
## Methylation calling: I/O mode x strategy

{pivot_table(rows, "methylation")}
## What can be compared

{notes or "- Every cell ran long enough to measure, and every strategy ran its own way."}

## Plots

![time vs threads](time_vs_threads.png)
![CPU utilisation and core-hours](utilisation_core_hours.png)
![I/O modes](io_modes.png)

## Recommendation (`recommended-host.yaml`)

```yaml
{advice}```
"""
