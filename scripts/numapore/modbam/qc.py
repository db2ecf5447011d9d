"""The QC of the calls a pileup read (the workflow's rule calls_qc): the tables `numapore
summary` and `numapore sample-probs --hist` write of the pileup's modBAM, and per modification
code the calls passing the pileup's own threshold.

The calls are those the pileup sampled to estimate its threshold: the same sampling options
(its threshold record, numapore.pileup.thresholds.threshold_record) and --mapped-only (the
pileup samples calls on aligned bases). The summary counts them at the threshold the pileup
used (--filter-threshold with the record's values), so its pass counts are the pileup's; the
percentiles of sample-probs include the pileup's filter percentile, which is the pileup's
estimate when it estimated one. Both commands' arguments are parsed by their own parsers and
their tables written by their own functions, from one sample of the calls; the job's log gives
the equivalent command lines.

Under pileup.modkit "0.4" the pileup skips reads whose MM entries are implicit (modkit 0.4.4
does), which the summary (0.6.1's) reads: their calls are then in the QC's sample, not the
pileup's; the threshold shown is still the pileup's.

pass.tsv: per canonical base and code ('-' canonical) the threshold, its origin, the calls
whose most likely state is the code, those reaching the threshold, their fraction, the reads
sampled, and the config setting that decided the threshold.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from numapore.base.atomic import atomic_output
from numapore.methylation.bedmethyl import f32, f32_text
from numapore.modbam import sample_probs, summary
from numapore.modbam.calls import sample, sampling_options
from numapore.modbam.command import CommandError
from numapore.pileup.common import BASES

PASS_COLUMNS = [
    "base", "code", "threshold", "threshold_source", "pass_calls", "all_calls", "pass_fraction",
    "reads_sampled", "threshold_setting",
]  # fmt: skip
DEFAULT_PERCENTILES = (0.1, 0.5, 0.9)


def sampling_arguments(record: dict) -> list[str]:
    """The sampling options (modkit's) of a pileup's threshold record, --mapped-only first."""
    sampling = record["sampling"]
    args = ["--mapped-only", "--sampling-threads", str(sampling["sampling_threads"])]
    if sampling["sampling_frac"] is not None:
        args += ["--sampling-frac", repr(sampling["sampling_frac"])]
    elif sampling["num_reads"] != 10_042:
        args += ["--num-reads", str(sampling["num_reads"])]
    if sampling["interval_size"] != 1_000_000:
        args += ["--interval-size", str(sampling["interval_size"])]
    if sampling["ignore"]:
        args += ["--ignore", sampling["ignore"]]
    if sampling["edge_filter"]:
        args += ["--edge-filter", sampling["edge_filter"]]
        args += ["--invert-edge-filter"] if sampling["invert_edge_filter"] else []
    return args


def summary_arguments(record: dict) -> list[str]:
    """`numapore summary`'s options (after IN.bam): the pileup's sampling and threshold."""
    if record["per_mod"]:
        raise CommandError("per-code thresholds (--mod-thresholds): numapore summary takes none")
    args = sampling_arguments(record)
    if record["filter_threshold"] is None:
        return args + ["--no-filtering"]
    for value in record["filter_threshold"]:
        args += ["--filter-threshold", value]
    return args


def percentiles_of(record: dict) -> str:
    """sample-probs' -p: modkit's default percentiles and the pileup's filter percentile."""
    values = sorted({*DEFAULT_PERCENTILES, float(record["filter_percentile"])})
    return ",".join(f"{v:g}" for v in values)


def sample_probs_arguments(record: dict) -> list[str]:
    """`numapore sample-probs`'s options (after IN.bam, before -o DIR --hist)."""
    return [*sampling_arguments(record), "--percentiles", percentiles_of(record)]


def pass_rows(calls, per_base, default, counts, source: str, setting: str) -> list[list[str]]:
    """pass.tsv's rows: per base and code the calls at the threshold (summary's counts)."""
    rows = []
    for b in sorted(calls.bases):
        threshold = f32_text(per_base.get(b, default))
        by_state = counts[b]
        states = sorted(by_state, key=lambda s: summary.state_key(calls, s))
        for state in states:
            n_pass, n_fail = by_state[state]
            total = n_pass + n_fail
            fraction = f32_text(f32(n_pass / total)) if total else "0"
            rows.append([BASES[b], calls.state_code(state), threshold, source, str(n_pass),
                         str(total), fraction, str(calls.reads), setting])  # fmt: skip
    return rows


def write_text(path: str | Path, text: str) -> None:
    """One output, complete or absent."""
    with atomic_output(path) as tmp:
        Path(tmp).write_text(text)


def command_line(name: str, bam: str, args: list[str]) -> str:
    """An equivalent `numapore` command line, for the log."""
    return shlex.join(["numapore", name, bam, *args])


def calls_qc(
    bam: str, record_path: str, outputs: dict[str, str], setting: str = ""
) -> list[list[str]]:
    """Write the QC of the calls of a modBAM the pileup read (outputs: 'summary', 'tsv',
    'thresholds', 'histogram', 'passing'; setting: the config setting that decided the
    pileup's threshold, for pass.tsv); pass.tsv's rows. Without calls (the pileup had
    none, or none was sampled) each table says so."""
    record = json.loads(Path(record_path).read_text())
    summary_args = summary_arguments(record)
    probs_args = sample_probs_arguments(record)
    print(f"pileup's pass thresholds ({record_path}): {record['source']}")
    if record["source"] != "no calls":
        out_dir = str(Path(outputs["thresholds"]).parent)
        for name, args in (
            ("summary", summary_args),
            ("summary", [*summary_args, "--tsv"]),
            ("sample-probs", [*probs_args, "-o", out_dir, "--hist"]),
        ):
            print(f"equivalent: {command_line(name, bam, args)}")
    args = summary.make_parser().parse_args([bam, *summary_args])
    probs = sample_probs.make_parser().parse_args([bam, *probs_args])
    calls = sample(bam, sampling_options(args)) if record["source"] != "no calls" else None
    if calls is None or not calls.bases:
        why = "no call in the sampled reads"
        if calls is None:  # an empty sample the run let through (allow_empty_samples)
            why = "the pileup had none (allow_empty_samples: its log says why)"
        note = f"# no base modification calls: {why} ({bam})\n"
        for kind in ("summary", "tsv", "thresholds", "histogram"):
            write_text(outputs[kind], note)
        write_text(outputs["passing"], "\t".join(PASS_COLUMNS) + "\n")
        return []
    per_base, default, shown = summary.thresholds_of(calls, args)
    counts = summary.counts_of(calls, per_base, default)
    percentiles = sample_probs.parse_percentiles(probs.percentiles)
    texts = {
        "summary": summary.table_text(calls, per_base, shown, counts, None),
        "tsv": summary.tsv_text(calls, counts),
        "thresholds": sample_probs.thresholds_text(calls, percentiles),
        "histogram": sample_probs.histogram_text(calls),
    }
    for kind, text in texts.items():
        write_text(outputs[kind], text)
    rows = pass_rows(calls, per_base, default, counts, record["source"], setting)
    lines = ["\t".join(PASS_COLUMNS)] + ["\t".join(row) for row in rows]
    write_text(outputs["passing"], "\n".join(lines) + "\n")
    return rows
