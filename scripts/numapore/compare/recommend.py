"""The recommendation: which configuration of each step to adopt on this host, chosen from the
summary table only where the difference stands out of the noise (beyond the repeats' spread and
MIN_EFFECT, in cells long enough to measure, never a strategy that ran exactly as none), each
aligner's index size set against the nodes' memory (the advisor's rule, the study's: instances
when the index fits one node), and the host-file fragment that says so (recommended-host.yaml)."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from numapore.compare.cells import NOT_APPLICABLE, STEPS
from numapore.compare.measure import MIN_MEASURABLE_S
from numapore.compare.summary import BASELINE, config_of
from numapore.execution.advisor import advise
from numapore.execution.strategies import STRATEGIES
from numapore.execution.topology import Topology

# The smallest effect a recommendation stands on, as a fraction of the simpler one's time.
MIN_EFFECT = 0.05


def fastest(rows: Iterable[Mapping[str, Any]], step: str) -> dict[str, Any] | None:
    """The fastest median configuration of a step at its highest thread count measured."""
    medians = [r for r in rows if r["repeat"] == "median" and r["step"] == step]
    if not medians:
        return None
    top = max(r["threads"] for r in medians)
    return dict(min((r for r in medians if r["threads"] == top), key=lambda r: r["wall_s"]))


def simpler_configs(row: Mapping[str, Any]) -> list[tuple]:
    """The configurations a row's one simplifies to: strategy none and/or I/O mode fast5
    (same step, aligner and threads), without the row's own."""
    step, aligner, strategy, io_mode, threads = config_of(row)
    plain_io = NOT_APPLICABLE if io_mode == NOT_APPLICABLE else BASELINE["io_mode"]
    variants = {
        (step, aligner, s, i, threads)
        for s in {strategy, BASELINE["strategy"]}
        for i in {io_mode, plain_io}
    }
    return sorted(variants - {config_of(row)})


def clearly_faster(rows: Sequence[Mapping[str, Any]], config: tuple, than: tuple) -> bool:
    """Whether one configuration was faster than another beyond noise: every repeat faster
    than every repeat of the other (ranges do not overlap), a difference of medians larger
    than either's spread over repeats and at least MIN_EFFECT of the other's median, and no
    cell of either too short to measure."""
    runs = {
        c: [r for r in rows if r["repeat"] != "median" and config_of(r) == c]
        for c in (config, than)
    }
    if any(r["too_short"] for c in runs.values() for r in c):
        return False
    return beats([r["wall_s"] for r in runs[config]], [r["wall_s"] for r in runs[than]])


def beats(walls: Sequence[float], than: Sequence[float]) -> bool:
    """The honest rule on two sets of repeated wall times (the comparison's and the tuner's,
    numapore.compare.tuning): every repeat faster than every repeat of the other, a difference
    of medians larger than either's spread over repeats and at least MIN_EFFECT of the other's
    median. False when either has no repeat."""
    if not walls or not than:
        return False
    effect = statistics.median(than) - statistics.median(walls)
    spread = max(max(w) - min(w) for w in (walls, than))
    return (
        max(walls) < min(than)
        and effect > spread
        and effect >= MIN_EFFECT * statistics.median(than)
    )


def choose(
    walls: Mapping[str, Sequence[float]],
    baseline: str,
    noun: str,
    min_measurable: float,
    estimates: Mapping[str, Sequence[float]] | None = None,
) -> tuple[str, str]:
    """The tuner's choice among measured candidates (I/O modes, strategies: noun) and why: the
    fastest median among those that beat the baseline by the honest rule (beats), else the
    baseline. The baseline's cells must each run min_measurable s on the slice; estimates (each
    cell scaled to the whole run), when given, are what the rule weighs instead of the walls."""
    if not walls.get(baseline):
        return baseline, f"{baseline} was not measured"
    if min(walls[baseline]) < min_measurable:
        return baseline, (
            f"{baseline} ran under {min_measurable:g} s on the slice: too short to tell "
            f"{noun}s apart; the simpler {noun} runs"
        )
    times = estimates or walls
    base, where = list(times[baseline]), "the whole run, estimated" if estimates else "the slice"
    winners = [c for c, w in times.items() if c != baseline and beats(list(w), base)]
    if not winners:
        return baseline, (
            f"no {noun} beat {baseline} in every repeat by more than the repeats' spread and by "
            f">= {MIN_EFFECT:.0%} (on {where}): the simpler {noun} runs"
        )
    best = min(winners, key=lambda c: statistics.median(times[c]))
    gain = statistics.median(base) / statistics.median(times[best])
    return best, (
        f"{best} beat {baseline} in every repeat by more than the spread and >= "
        f"{MIN_EFFECT:.0%} (x{gain:.2f} on {where})"
    )


def reference_config(config: tuple) -> tuple | None:
    """The configuration a configuration's effect is measured against: strategy none with the
    same step, aligner, I/O mode and threads (a strategy's effect); for strategy none, I/O mode
    fast5 (an I/O mode's effect); None for the baseline itself."""
    step, aligner, strategy, io_mode, threads = config
    if strategy != BASELINE["strategy"]:
        return (step, aligner, BASELINE["strategy"], io_mode, threads)
    if io_mode not in (NOT_APPLICABLE, BASELINE["io_mode"]):
        return (step, aligner, strategy, BASELINE["io_mode"], threads)
    return None


def difference(rows: Sequence[Mapping[str, Any]], config: tuple) -> str:
    """How a configuration's time compares with its reference's (reference_config), as the
    plots mark it: 'baseline' (it is the reference), 'too short' (a cell of either ran under
    MIN_MEASURABLE_S: not measurable), 'identical' (it ran as strategy none did: the same
    command on this host), 'within spread' (neither clearly_faster than the other), 'faster',
    'slower'; '' when the matrix lacks it or its reference."""
    reference = reference_config(config)
    if reference is None:
        return "baseline"
    runs = [r for r in rows if r["repeat"] != "median" and config_of(r) in (config, reference)]
    if {config_of(r) for r in runs} != {config, reference}:
        return ""
    if any(r["identical_to"] for r in runs if config_of(r) == config):
        return "identical"
    if any(r["too_short"] for r in runs):
        return "too short"
    if clearly_faster(rows, config, reference):
        return "faster"
    if clearly_faster(rows, reference, config):
        return "slower"
    return "within spread"


def recommended(rows: Sequence[Mapping[str, Any]], step: str) -> dict[str, Any] | None:
    """The configuration to adopt for a step: the fastest median at the highest thread count
    among those clearly faster (clearly_faster) than each simpler configuration measured
    (strategy none, I/O mode fast5), leaving out strategies that ran exactly as none; a
    difference within the repeats' spread, under 5 % or in too short cells is not a reason."""
    best = fastest(rows, step)
    if best is None:
        return None
    measured = {config_of(r) for r in rows}
    candidates = [
        r
        for r in rows
        if r["repeat"] == "median"
        and r["step"] == step
        and r["threads"] == best["threads"]
        and not r["identical_to"]
        and all(clearly_faster(rows, config_of(r), s) for s in simpler_configs(r) if s in measured)
    ]
    # Empty only when the matrix lacks the baseline and every configuration overlaps another.
    return dict(min(candidates, key=lambda r: r["wall_s"])) if candidates else best


def index_fit(
    index_bytes: Mapping[str, int], topology: Topology, instances_per_node: int = 1
) -> list[dict[str, Any]]:
    """Per aligner, its index's size against the nodes' memory, as the advisor weighs it
    (numapore.execution.advisor.advise): index MiB, the smallest node with CPUs and memory (MiB),
    the share of it the index copies of one node take, whether they fit one node, and the
    strategy the rule gives (instances when the index fits one node, interleave when not, none
    on one node) with its reason."""
    fits = []
    for aligner, size in index_bytes.items():
        strategy, reasons = advise(topology, size, instances_per_node)
        fits.append(
            {
                "aligner": aligner,
                "index_mib": reasons["index_mib"],
                "node_mib": reasons["smallest_node_memory_mib"],
                "share": reasons["index_share_of_node"],
                "fits": reasons["index_copies_per_node_mib"] <= reasons["fit_limit_mib"],
                "nodes": reasons["nodes_with_cpus_and_memory"],
                "strategy": strategy,
                "why": reasons["why"],
            }
        )
    return fits


def fit_line(fit: Mapping[str, Any]) -> str:
    """One aligner's index against node memory in words (a line of the host-file fragment)."""
    share = f"{fit['share']:.1%}" if fit["share"] is not None else "?"
    verdict = "fits one node" if fit["fits"] else "does not fit one node"
    return (
        f"{fit['aligner']} index {fit['index_mib']:g} MiB = {share} of the smallest node "
        f"({fit['node_mib']} MiB): {verdict}; by that rule: {fit['strategy']}"
    )


def recommendation(
    rows: Sequence[Mapping[str, Any]], base_host: str, fits: Sequence[Mapping[str, Any]] = ()
) -> str:
    """A host YAML fragment with the configuration to adopt per step (`recommended`),
    commented with its numbers and each aligner's index against node memory (fits, from
    index_fit) (the user copies it into config/hosts/<host>.yaml)."""
    lines = [
        "# numapore: configuration per step measured on this host "
        f"(results/compare/summary.tsv; base host file: {base_host}).",
        "# Chosen: the fastest median at the highest thread count that beat the simpler",
        "# configurations (strategy none, I/O mode fast5) in every repeat, by more than the",
        f"# repeats' spread and by >= {MIN_EFFECT:.0%}, in cells of >= {MIN_MEASURABLE_S:g} s; "
        "a strategy that",
        "# ran exactly as none (same processes, CPUs, memory: one NUMA node) is never chosen.",
        "# Copy into config/hosts/<hostname>.yaml (topology and the rest as they are there).",
    ]
    strategy = {}
    io = None
    for step in STEPS:
        best = recommended(rows, step)
        if best is None:
            lines.append(f"# {step}: not in the comparison")
            continue
        what = best["aligner"] if step == "alignment" else f"{best['io_mode']} I/O"
        lines.append(
            f"# {step}: {best['strategy']} ({what}) at {best['threads']} threads: "
            f"{best['wall_s']:.2f} s, x{best['speedup']:.2f} vs none/fast5, "
            f"CPU utilisation {best['cpu_utilisation']:.2f}"
        )
        top = fastest(rows, step)
        if top is not None and config_of(top) != config_of(best):
            what = top["aligner"] if step == "alignment" else f"{top['io_mode']} I/O"
            why = (
                f"identical to {top['identical_to']} on this host (same processes, CPUs and "
                "memory)"
                if top["identical_to"]
                else (
                    "too short to measure"
                    if top["too_short"]
                    else f"not faster than a simpler configuration by more than the repeats' "
                    f"spread and {MIN_EFFECT:.0%}"
                )
            )
            lines.append(
                f"#   (fastest median: {top['strategy']} ({what}) {top['wall_s']:.2f} s, "
                f"{why}: not recommended)"
            )
        if step == "alignment" and fits:
            lines.append("#   index size against node memory (instances when it fits one node):")
            lines += [f"#   {fit_line(f)}" for f in fits]
            chosen = next((f for f in fits if f["aligner"] == best["aligner"]), None)
            per_node = STRATEGIES[best["strategy"]].one_process_per_group  # a copy each
            if chosen and per_node and not chosen["fits"]:
                lines.append(
                    f"#   (instances measured fastest, but {best['aligner']}'s index does not "
                    "fit one node: a copy per node may swap on larger inputs)"
                )
        strategy[step] = best["strategy"]
        if step == "methylation":
            io = best["io_mode"]
    if strategy:
        lines.append("strategy:")
        lines += [f"  {step}: {value}" for step, value in strategy.items()]
    if io:
        lines.append(f"io_mode: {io}")
    return "\n".join(lines) + "\n"
