"""`numapore sample-probs`: percentiles of the sampled calls' probabilities per base, and with
--hist their histograms per base and code, as modkit 0.6.1's `modkit modbam sample-probs`
writes them:

    numapore sample-probs IN.bam [-p 0.1,0.5,0.9] [--no-sampling] [-o DIR [--hist] [--prefix P]]

The calls are those `numapore summary` counts (the sampled reads', soft-clipped ones included
unless --mapped-only), each its most likely state's probability. Without -o the table goes to
stdout; with -o DIR to DIR/thresholds.tsv, and --hist adds DIR/probabilities.tsv (bins of 1/256,
non-empty ones, per base and code). modkit's echarts pages (counts.html, proportion.html) are
not written. Bases come in A, C, G, T order (modkit's order varies between runs).

Where 0.6.1 contradicts its documentation ("a tab-separated file of threshold values"), the
table is space-aligned as 0.6.1 writes it: its users' parsers read that.
"""

from __future__ import annotations

import os
import sys

from numapore.methylation.bedmethyl import code_key, f32, f32_text
from numapore.modbam.calls import SampledCalls, add_sampling_arguments, sample, sampling_options
from numapore.modbam.command import CommandError, Parser, add_unsupported, run_main
from numapore.modbam.summary import table_lines
from numapore.pileup.common import BASES
from numapore.pileup.thresholds import parse_float32, percentile_linear_interp


def parse_percentiles(raw: str) -> list[float]:
    """-p's comma-separated fractions (each in [0, 1])."""
    try:
        values = [parse_float32(text, "percentile") for text in raw.split(",")]
    except Exception:
        raise CommandError(f"--percentiles {raw!r}: give fractions like 0.1,0.5,0.9") from None
    if not all(0 <= v <= 1 for v in values):
        raise CommandError(f"--percentiles {raw!r}: each must be between 0 and 1")
    return values


def thresholds_text(calls: SampledCalls, percentiles: list[float]) -> str:
    """The base / percentile / threshold table."""
    rows = [["base", "percentile", "threshold"]]
    for b in sorted(calls.bases):
        xs = calls.bases[b].sorted_values()
        for q in percentiles:
            value = percentile_linear_interp(xs, len(xs), q)
            rows.append([BASES[b], f32_text(f32(f32(q) * 100.0)), f32_text(value)])
    return "".join(table_lines(rows))


def histogram_text(calls: SampledCalls) -> str:
    """probabilities.tsv: per base and state (canonical, then codes) the non-empty bins."""
    lines = ["code\tprimary_base\trange_start\trange_end\tcount\tfrac\tpercentile_rank"]
    for b in sorted(calls.bases):
        histogram = calls.bases[b].histogram()
        states = sorted(histogram, key=lambda s: (s != 0, code_key(calls.state_code(s))))
        for state in states:
            counts = histogram[state]
            total = f32(float(sum(counts)))
            cumulative = 0.0
            for q in (q for q in range(256) if counts[q]):
                n = f32(float(counts[q]))
                cumulative = f32(cumulative + n)
                rank = f32(f32(f32(cumulative - f32(0.5 * n)) / total) * 100.0)
                lines.append("\t".join([
                    calls.state_code(state), BASES[b], f32_text(f32(q / 256)),
                    f32_text(f32((q + 1) / 256)), str(int(counts[q])), f32_text(f32(n / total)),
                    f32_text(rank),
                ]))  # fmt: skip
    return "".join(line + "\n" for line in lines)


def run(args) -> None:
    """Write the tables of the parsed command line."""
    if args.hist and not args.out_dir:
        raise CommandError("--hist needs -o DIR")
    if (args.prefix or args.force) and not args.out_dir:
        raise CommandError("--prefix and --force need -o DIR")
    percentiles = parse_percentiles(args.percentiles)
    options = sampling_options(args)
    outputs = {}
    if args.out_dir:
        prefix = f"{args.prefix}_" if args.prefix else ""
        outputs = {"thresholds": os.path.join(args.out_dir, f"{prefix}thresholds.tsv")}
        if args.hist:
            outputs["histogram"] = os.path.join(args.out_dir, f"{prefix}probabilities.tsv")
        if os.path.exists(args.out_dir) and not os.path.isdir(args.out_dir):
            raise CommandError(f"-o {args.out_dir}: not a folder")
        for path in outputs.values():
            if os.path.exists(path) and not args.force:
                raise CommandError(f"{path} exists (--force to overwrite)")
    calls = sample(args.in_bam, options)
    if not calls.bases:
        raise CommandError(f"{args.in_bam}: no base modification calls in the sampled reads")
    table = thresholds_text(calls, percentiles)
    if not outputs:
        sys.stdout.write(table)
        return
    os.makedirs(args.out_dir, exist_ok=True)
    texts = {"thresholds": table}
    if args.hist:
        texts["histogram"] = histogram_text(calls)
    for kind, path in outputs.items():
        with open(path, "w") as out:
            out.write(texts[kind])


def main(argv: list[str] | None = None, prog: str = "numapore sample-probs") -> int:
    """Parse argv (default sys.argv[1:]) and run."""
    return run_main(make_parser(prog), argv, run)


def make_parser(prog: str = "numapore sample-probs") -> Parser:
    """The command's parser (the workflow's QC of the calls parses its arguments with it)."""
    parser = Parser(prog=prog, description=__doc__.split("\n\n")[0])
    parser.add_argument("in_bam", help="indexed modBAM (MM/ML tags)")
    out = parser.add_argument_group("output")
    out.add_argument("-p", "--percentiles", default="0.1,0.5,0.9")
    out.add_argument("-o", "--out-dir", help="folder for thresholds.tsv (and the histograms)")
    out.add_argument("--prefix", help="with -o: the files' names start PREFIX_")
    out.add_argument("--force", action="store_true", help="with -o: overwrite")
    out.add_argument("--hist", action="store_true", help="with -o: probabilities.tsv")
    add_unsupported(parser, "--dna-color", "--mod-color", nargs=2)
    add_sampling_arguments(parser)
    return parser


if __name__ == "__main__":
    sys.exit(main())
