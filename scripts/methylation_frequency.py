"""Rule methylation_frequency: per-site frequencies (nanopolish's table) and bedMethyl per site."""

from pathlib import Path

from numapore.base.atomic import atomic_outputs
from numapore.methylation.frequency import frequency_outputs
from numapore.methylation.motifs import MOTIFS
from numapore.base.rulelog import redirect_to_log

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
calls_path = Path(smk.input[0])
motif = MOTIFS[smk.wildcards.motif]
threshold = smk.params.threshold
with atomic_outputs([smk.output.tsv, smk.output.bed, smk.output.tbi]) as (tsv, bed_gz, _tbi):
    # bed_gz is written bgzipped with its index bed_gz.tbi, which is _tbi: the temporary names
    # keep the final ones' suffixes.
    done = frequency_outputs(calls_path, motif, threshold, smk.params.split_groups, tsv, bed_gz)
print(
    f"{done.rows} frequency rows (|llr| >= {threshold} x num_motifs), {done.sites} bedMethyl sites"
)
if done.confident_calls:
    share = 100 * done.confident_unmethylated / done.confident_calls
    print(
        f"{motif.name}: {done.calls} calls, {done.confident_calls} with |llr| >= {threshold}, "
        f"{share:.1f}% of them unmethylated"
    )
