"""Rule methylation_frequency: per-site frequencies (nanopolish's table) and bedMethyl per site."""

from pathlib import Path

import pysam

from numapore.atomic import atomic_output, atomic_outputs
from numapore.methylation import MOTIFS, pileup, read_calls, write_bedmethyl, write_frequency_tsv
from numapore.rulelog import redirect_to_log

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
calls_path = Path(smk.input[0])
motif = MOTIFS[smk.wildcards.motif]
threshold = smk.params.threshold
with open(calls_path) as handle:
    piled = pileup(read_calls(handle, str(calls_path)), motif, threshold, smk.params.split_groups)
with atomic_output(smk.output.tsv) as tmp, open(tmp, "w") as out:
    rows = write_frequency_tsv(piled.groups, out)
with atomic_outputs([smk.output.bed, smk.output.tbi]) as (bed_gz, _tbi):
    bed_plain = bed_gz.with_suffix("")  # .bedmethyl.gz -> .bedmethyl
    with open(bed_plain, "w") as out:
        sites = write_bedmethyl(piled.positions, motif, out)
    # tabix_index bgzips bed_plain into bed_gz (removing bed_plain) and writes bed_gz.tbi,
    # which is _tbi: the temporary names keep the final ones' suffixes.
    pysam.tabix_index(str(bed_plain), preset="bed", force=True)
print(f"{rows} frequency rows (|llr| >= {threshold} x num_motifs), {sites} bedMethyl sites")
if piled.confident_calls:
    share = 100 * piled.confident_unmethylated / piled.confident_calls
    print(
        f"{motif.name}: {piled.calls} calls, {piled.confident_calls} with |llr| >= {threshold}, "
        f"{share:.1f}% of them unmethylated"
    )
