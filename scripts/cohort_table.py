"""Rule cohort_table: the bedMethyl of every sample of a reference and motif as one table of
sites x samples (numapore.methylation.cohort), bgzipped and tabix-indexed; the equivalent
`modkit bedmethyl merge` command (its first 18 columns) goes to the log."""

import shlex
import sys
from pathlib import Path

from numapore.base.atomic import atomic_outputs
from numapore.base.rulelog import redirect_to_log
from numapore.inputs.phasing import fai_lengths
from numapore.methylation.cohort import CohortError, Filters, dropped_lines, write_cohort_table
from numapore.methylation.cohort import write_sample_counts

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
samples = list(smk.params.samples)
beds = [Path(p) for p in smk.input.beds]
filters = smk.params.filters
merge = ["modkit", "bedmethyl", "merge", *map(str, beds), "-g", smk.input.fai, "-o", "out.bed"]
version = "0.6.1"
if filters != Filters():  # modkit's merge has them from 0.6.4 on
    merge += ["--min-samples", str(filters.min_samples)]
    merge += ["--min-sample-coverage", str(filters.min_sample_coverage)]
    version = "0.6.4"
groups = {s: smk.params.groups[s] or "no group" for s in samples}
print("samples: " + ", ".join(f"{s} ({group})" for s, group in groups.items()))
print(f"columns 1-18 equal: {shlex.join(merge)} (modkit {version})")
outputs = [smk.output.table, smk.output.tbi, smk.output.samples]
try:
    with atomic_outputs(outputs) as (table, _tbi, per_sample):
        written = write_cohort_table(table, list(zip(samples, beds, strict=True)),
                                     list(fai_lengths(Path(smk.input.fai))), filters)  # fmt: skip
        write_sample_counts(per_sample, written)
except CohortError as err:
    sys.exit(f"numapore: cohort table {smk.output.table}: {err}")
print(f"{written.rows} rows")
for line in dropped_lines(smk.output.table, written.read, written.kept, filters):
    print(f"numapore: {line}", file=sys.stderr)
