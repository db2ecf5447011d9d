"""Rule cohort_table: the bedMethyl of every sample of a reference and motif as one table of
sites x samples (numapore.methylation.cohort), bgzipped and tabix-indexed; the equivalent
`modkit bedmethyl merge` command (its first 18 columns) goes to the log."""

import shlex
import sys
from pathlib import Path

from numapore.base.atomic import atomic_outputs
from numapore.base.rulelog import redirect_to_log
from numapore.inputs.phasing import fai_lengths
from numapore.methylation.cohort import CohortError, write_cohort_table

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
samples = list(smk.params.samples)
beds = [Path(p) for p in smk.input.beds]
merge = ["modkit", "bedmethyl", "merge", *map(str, beds), "-g", smk.input.fai, "-o", "out.bed"]
groups = {s: smk.params.groups[s] or "no group" for s in samples}
print("samples: " + ", ".join(f"{s} ({group})" for s, group in groups.items()))
print(f"columns 1-18 equal: {shlex.join(merge)} (modkit 0.6.1)")
try:
    with atomic_outputs([smk.output.table, smk.output.tbi]) as (table, _tbi):
        rows = write_cohort_table(table, list(zip(samples, beds, strict=True)),
                                  list(fai_lengths(Path(smk.input.fai))))  # fmt: skip
except CohortError as err:
    sys.exit(f"numapore: cohort table {smk.output.table}: {err}")
print(f"{rows} rows")
