"""Rule methylation_frequency: per-site frequencies, nanopolish's own table (the bedMethyl is the
pileup of the modBAM: rule pileup)."""

from pathlib import Path

from numapore.base.atomic import atomic_output
from numapore.base.rulelog import redirect_to_log
from numapore.nanopolish.frequency import frequency_outputs
from numapore.methylation.motifs import MOTIFS

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
motif = MOTIFS[smk.wildcards.motif]
threshold = smk.params.threshold
with atomic_output(smk.output.tsv) as tsv:
    done = frequency_outputs(Path(smk.input[0]), motif, threshold, smk.params.split_groups, tsv)
print(f"{done.rows} frequency rows (|llr| >= {threshold} x num_motifs)")
if done.confident_calls:
    share = 100 * done.confident_unmethylated / done.confident_calls
    print(
        f"{motif.name}: {done.calls} calls, {done.confident_calls} with |llr| >= {threshold}, "
        f"{share:.1f}% of them unmethylated"
    )
