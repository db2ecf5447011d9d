"""`numapore summary`: a modBAM's calls counted per base and code, passing and failing the
threshold, as modkit 0.6.1's `modkit modbam summary` prints them:

    numapore summary IN.bam [--no-sampling] [--filter-threshold X | --no-filtering] [--tsv]

The calls are those of the sampled reads (every call, soft-clipped ones included, unless
--mapped-only), under their canonical base (a G- call of a duplex read counts under C); each is
its most likely state, passing when its probability reaches the threshold: --filter-threshold's,
or the -p percentile of the sampled calls' probabilities per base (`# pass_threshold_B`).

Where modkit's order comes from hash maps (the bases, their blocks, the TSV's lines), numapore
writes bases in A, C, G, T order and codes as modkit sorts them: the same lines on every run.

Where 0.6.1 contradicts its documentation: the threshold row is named pass_threshold_B, as
0.6.1 writes it (the docs' filter_threshold_B is stale); --tsv writes no warning about a
--table option that does not exist. --region counts only the calls whose reference position
is in the region, as the help says ("process only the specified region"): 0.6.1 counts every
call of the reads overlapping it; numapore's counts are 0.6.1's own with --include-bed of the
region (tests/data/modkit061_summary_region).
"""

from __future__ import annotations

import sys

from numapore.methylation.bedmethyl import code_key, f32, f32_text
from numapore.modbam.calls import SampledCalls, add_sampling_arguments, sample, sampling_options
from numapore.modbam.command import CommandError, Parser, add_unsupported, run_main
from numapore.pileup.common import BASES
from numapore.pileup.inputs import open_bam
from numapore.pileup.regions import parse_region
from numapore.pileup.thresholds import parse_thresholds, percentile_linear_interp


def table_lines(cells: list[list[str]], prefix: str = "") -> list[str]:
    """prettytable's lines as modkit prints them: one space either side of each cell, cells
    padded to their column's width except the last column's."""
    widths = [max(len(row[k]) for row in cells) for k in range(len(cells[0]))]
    lines = []
    for row in cells:
        head = "".join(f" {cell.ljust(widths[k])} " for k, cell in enumerate(row[:-1]))
        lines.append(f"{prefix}{head} {row[-1]} \n")
    return lines


def thresholds_of(calls: SampledCalls, args) -> tuple[dict[int, float], float, bool]:
    """(per-base thresholds, default, whether the per-base ones are written)."""
    if args.filter_threshold:
        caller = parse_thresholds(args.filter_threshold, {})
        return caller.per_base, caller.default, True
    if args.no_filtering:
        return {}, 0.0, False
    per_base = {}
    for b, base in calls.bases.items():
        per_base[b] = percentile_linear_interp(base.sorted_values(), base.n, args.filter_percentile)
    return per_base, 0.0, True


def counts_of(calls: SampledCalls, thresholds: dict[int, float], default: float):
    """Per base: {state: [pass, fail]} of the states with a passing call, and the pass and
    fail totals."""
    return {b: base.counts(thresholds.get(b, default)) for b, base in calls.bases.items()}


def state_key(calls: SampledCalls, state: int) -> tuple:
    """modkit's order of states: canonical first, then codes."""
    return (0,) if state == 0 else (1, *code_key(calls.state_code(state)))


def table_text(calls: SampledCalls, per_base: dict, shown: bool, counts, region) -> str:
    """modkit's default output: the totals, then the calls table."""
    bases = sorted(calls.bases)
    meta = [["bases", ",".join(BASES[b] for b in bases)], ["total_reads_used", str(calls.reads)]]
    meta += [[f"count_reads_{BASES[b]}", str(calls.bases[b].reads)] for b in bases]
    if shown:
        meta += [[f"pass_threshold_{BASES[b]}", f32_text(per_base[b])] for b in sorted(per_base)]
    if region:
        meta.append(["region", region])
    rows = [["base", "code", "pass_count", "pass_frac", "all_count", "all_frac"]]
    for b in bases:
        letter, by_state = BASES[b], counts[b]
        passed = {s: c for s, c in by_state.items() if c[0]}  # modkit lists passing states
        total_pass = sum(c[0] for c in by_state.values())
        total = total_pass + sum(c[1] for c in by_state.values())
        for state in sorted(passed, key=lambda s: state_key(calls, s)):
            n_pass, n_fail = passed[state]
            rows.append([letter, calls.state_code(state), str(n_pass),
                         f32_text(f32(n_pass / total_pass)), str(n_pass + n_fail),
                         f32_text(f32((n_pass + n_fail) / total))])  # fmt: skip
        listed = {calls.state_code(s) for s in passed}
        unlisted = (["-"] if "-" not in listed else []) + sorted(
            calls.bases[b].codes - listed, key=code_key
        )
        rows += [[letter, code, "0", "0", "0", "0"] for code in unlisted]
    return "".join(table_lines(meta, "#") + table_lines(rows))


def tsv_text(calls: SampledCalls, counts) -> str:
    """modkit's --tsv output (its lines in numapore's fixed order)."""
    bases = sorted(calls.bases)
    lines = [f"mod_bases\t{','.join(BASES[b] for b in bases)}"]
    lines += [f"count_reads_{BASES[b]}\t{calls.bases[b].reads}" for b in bases]
    for b in bases:
        letter, by_state = BASES[b], counts[b]
        total_pass = sum(c[0] for c in by_state.values())
        for state in sorted(by_state, key=lambda s: state_key(calls, s)):
            n_pass, n_fail = by_state[state]
            if not n_pass:
                continue
            label = "unmodified" if state == 0 else f"modified_{calls.state_code(state)}"
            lines += [f"{letter}_pass_calls_{label}\t{n_pass}",
                      f"{letter}_pass_frac_{label}\t{n_pass / total_pass!r}",
                      f"{letter}_fail_calls_{label}\t{n_fail}"]  # fmt: skip
        lines.append(f"{letter}_total_mod_calls\t{total_pass}")
        lines.append(f"{letter}_total_fail_mod_calls\t{sum(c[1] for c in by_state.values())}")
    lines.append(f"total_reads_used\t{calls.reads}")
    return "".join(line + "\n" for line in lines)


def run(args) -> None:
    """Print the summary of the parsed command line."""
    if args.filter_threshold and args.no_filtering:
        raise CommandError("--filter-threshold and --no-filtering exclude each other")
    if not 0 < args.filter_percentile < 1:
        raise CommandError("--filter-percentile must be between 0 and 1")
    options = sampling_options(args)
    if args.filter_threshold:
        parse_thresholds(args.filter_threshold, {})  # its mistakes before the BAM is read
    # the documented meaning, not 0.6.1's: calls outside the region are not counted
    calls = sample(args.in_bam, options, in_region=True)
    if not calls.bases:
        where = f"--region {args.region}" if args.region else "the sampled reads"
        raise CommandError(f"{args.in_bam}: no base modification calls in {where}")
    per_base, default, shown = thresholds_of(calls, args)
    counts = counts_of(calls, per_base, default)
    region = None
    if args.region:
        name, start, end = parse_region(args.region, open_bam(args.in_bam))
        region = f"{name}:{start}-{end}"
    text = (
        tsv_text(calls, counts) if args.tsv else table_text(calls, per_base, shown, counts, region)
    )
    sys.stdout.write(text)


def main(argv: list[str] | None = None, prog: str = "numapore summary") -> int:
    """Parse argv (default sys.argv[1:]) and run."""
    return run_main(make_parser(prog), argv, run)


def make_parser(prog: str = "numapore summary") -> Parser:
    """The command's parser (the workflow's QC of the calls parses its arguments with it)."""
    parser = Parser(prog=prog, description=__doc__.split("\n\n")[0])
    parser.add_argument("in_bam", help="indexed modBAM (MM/ML tags)")
    parser.add_argument("--tsv", action="store_true", help="key<TAB>value lines")
    filt = parser.add_argument_group("filtering")
    filt.add_argument("--no-filtering", action="store_true")
    filt.add_argument("-p", "--filter-percentile", type=float, default=0.1)
    filt.add_argument("--filter-threshold", action="append", metavar="[BASE:]X")
    add_unsupported(parser, "--mod-threshold", "--mod-thresholds")
    add_sampling_arguments(parser)
    return parser


if __name__ == "__main__":
    sys.exit(main())
