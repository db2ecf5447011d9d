"""The QC of the calls (numapore.modbam.qc, rule calls_qc) checked on a run's outputs: its
tables equal what `numapore summary` and `numapore sample-probs` (tested equal to modkit 0.6.1
in test_modkit_commands_a.py) write of the same modBAM with the pileup's options, its
threshold is the one the pileup's log and record give, and each code's pass fraction is the
summary's pass count over the code's calls. For the runs' tests (test_report's demo run,
test_modbam_kind's modBAM run)."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

from numapore.modbam import sample_probs, summary


def command_output(command, argv: list[str]) -> str:
    """What a numapore modbam command prints (its exit status 0)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert command.main(argv) == 0, argv
    return out.getvalue()


def tsv_values(text: str) -> dict[str, str]:
    """`numapore summary --tsv`'s key<TAB>value lines."""
    return dict(line.split("\t") for line in text.splitlines())


def pass_table(path: Path) -> list[dict[str, str]]:
    """pass.tsv's rows by column."""
    header, *lines = path.read_text().splitlines()
    return [dict(zip(header.split("\t"), line.split("\t"), strict=True)) for line in lines]


def check_calls_qc(
    work: Path, sample: str, aligner: str, motif: str, bam: Path, scratch: Path
) -> list[dict[str, str]]:
    """Assert the QC of a sample's calls of a motif against the commands and the pileup's
    log; pass.tsv's rows."""

    def qc(name: str) -> Path:
        return work / "results" / sample / "qc" / f"{sample}.{aligner}.{motif}.{name}"

    stem = f"{sample}.{aligner}.{motif}"
    record = json.loads((work / f"results/{sample}/methylation/{stem}.pileup_thresholds.json")
                        .read_text())  # fmt: skip
    logged = [
        line.split("pass thresholds: ", 1)[1]
        for line in (work / f"results/logs/pileup/{stem}.log").read_text().splitlines()
        if line.startswith("numapore pileup: pass thresholds: ")
    ]
    assert len(logged) == 1, logged
    rows = pass_table(qc("pass.tsv"))
    assert rows, qc("pass.tsv")
    # The threshold shown is the pileup's, as its log says it and its record keeps it.
    for row in rows:
        shown = f"{row['base']} {row['threshold']}" if record["per_base"] else row["threshold"]
        assert logged[0].startswith(shown + " ") or f", {shown} " in logged[0], (row, logged)
        assert row["threshold_source"] == record["source"]
    ending = {"given": "(given)", "estimated": "calls' probabilities)"}[record["source"]]
    assert logged[0].endswith(ending), logged
    # numapore summary and sample-probs on the modBAM: the calls the pileup samples (mapped
    # bases only) at the pileup's threshold.
    args = [str(bam), "--mapped-only"]
    for value in record["filter_threshold"]:
        args += ["--filter-threshold", value]
    assert qc("summary.txt").read_text() == command_output(summary, args)
    tsv = command_output(summary, [*args, "--tsv"])
    assert qc("summary.tsv").read_text() == tsv
    percentiles = "0.1,0.5,0.9"
    argv = [str(bam), "--mapped-only", "-p", percentiles, "-o", str(scratch), "--hist"]
    assert sample_probs.main(argv) == 0
    assert qc("thresholds.tsv").read_text() == (scratch / "thresholds.tsv").read_text()
    assert qc("probabilities.tsv").read_text() == (scratch / "probabilities.tsv").read_text()
    # Each code's pass fraction: the summary's pass count over the code's calls.
    values = tsv_values(tsv)
    for row in rows:
        label = "unmodified" if row["code"] == "-" else f"modified_{row['code']}"
        n_pass = int(values.get(f"{row['base']}_pass_calls_{label}", 0))
        n_fail = int(values.get(f"{row['base']}_fail_calls_{label}", 0))
        assert (int(row["pass_calls"]), int(row["all_calls"])) == (n_pass, n_pass + n_fail)
        assert abs(float(row["pass_fraction"]) - n_pass / (n_pass + n_fail)) < 1e-6
        assert row["reads_sampled"] == values["total_reads_used"]
    assert {r["code"] for r in rows} >= {"-"}
    return rows
