"""Checkpoint tune_pileup: measure the pileup's settings (regions x threads) on a window of the
tuned sample's modBAM with the real engine, decide by the honest rule, write the pileup's tuning
record (read by the pileup jobs) and its adoptable host file (numapore.compare.tune_pileup)."""

import sys
import time
from pathlib import Path

from numapore.base.atomic import scratch_dir
from numapore.base.rulelog import redirect_to_log
from numapore.compare import tune_pileup, tuner
from numapore.compare.measure import MIN_MEASURABLE_S
from numapore.pileup.settings import numapore_arguments

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
p = smk.params
settings = p.settings
candidates = [tuple(c) for c in p.candidates]
started = time.monotonic()
record = tune_pileup.PILEUP.record(smk.output.record, smk.input.host, p.key) | {
    "sample": p.sample,
    "jobs": p.jobs,
    "dropped": p.dropped,
}


def log(line):
    print(line, file=sys.stderr, flush=True)


# The run's options but its threads (each candidate's own): numapore_arguments ends with them.
arguments = numapore_arguments(p.pileup)[:-2]
with scratch_dir(smk.output.record) as work:
    measured = tune_pileup.tune(
        str(smk.input.bam), arguments, candidates, smk.threads, p.jobs, settings["repeats"],
        settings["share"], MIN_MEASURABLE_S, Path(work), log,
    )  # fmt: skip
record |= measured
choice = measured["choice"] or measured["candidates"][0]
record["pileup"] = tune_pileup.setting_of(choice, candidates)
log(f"tuning: pileup: {choice}: {record['why']}")
tuner.write(smk.output, record, tune_pileup.host_yaml, smk.input.host, started)
