"""Checkpoint tune_pileup: measure the pileup's settings (regions x threads) on a window of the
tuned sample's modBAM with the real engine, decide by the honest rule, write the pileup's tuning
record (read by the pileup jobs) and its adoptable host file (numapore.compare.tune_pileup)."""

import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import yaml

from numapore.base.atomic import atomic_output, scratch_dir
from numapore.base.rulelog import redirect_to_log
from numapore.compare import tune_pileup, tuning
from numapore.compare.measure import MIN_MEASURABLE_S
from numapore.pileup.settings import pileup_arguments

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
p = smk.params
settings = p.settings
candidates = [tuple(c) for c in p.candidates]
started = time.monotonic()
record = {
    "format": tune_pileup.FORMAT,
    "host": tuning.host_name(),  # the machine that measured (on a cluster, a partition's node)
    "name": Path(smk.output.record).name.removesuffix(".pileup.json"),  # tuning.tuning_name
    "measured": datetime.now(UTC).isoformat(timespec="seconds"),
    "host_file": smk.input.host,
    "key": p.key,
    "sample": p.sample,
    "jobs": p.jobs,
    "dropped": p.dropped,
}


def log(line):
    print(line, file=sys.stderr, flush=True)


# The run's options but its threads (each candidate's own): pileup_arguments ends with them.
arguments = pileup_arguments(p.pileup, str(smk.input.reference), 1)[:-2]
with scratch_dir(smk.output.record) as work:
    measured = tune_pileup.tune(
        str(smk.input.bam), arguments, candidates, smk.threads, p.jobs, settings["repeats"],
        settings["share"], MIN_MEASURABLE_S, Path(work), log,
    )  # fmt: skip
record |= measured
choice = measured["choice"] or measured["candidates"][0]
record["pileup"] = tune_pileup.setting_of(choice, candidates)
record["seconds"] = round(time.monotonic() - started, 2)
log(f"tuning: pileup: {choice}: {record['why']}")
base = yaml.safe_load(Path(smk.input.host).read_text()) or {}
with atomic_output(Path(smk.output.host)) as tmp:
    tmp.write_text(tune_pileup.host_yaml(base, record, smk.input.host))
with atomic_output(Path(smk.output.record)) as tmp:
    tmp.write_text(json.dumps(record, indent=2) + "\n")
