"""Rule methylation_frequency: per-site frequencies as TSV and as bgzipped, indexed bedMethyl."""

from pathlib import Path

import pysam

from numapore.atomic import atomic_output, atomic_outputs
from numapore.methylation import read_calls, site_frequencies, write_bedmethyl, write_frequency_tsv
from numapore.rulelog import redirect_to_log

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
calls_path = Path(smk.input[0])
with open(calls_path) as handle:
    sites = site_frequencies(
        read_calls(handle, str(calls_path)), smk.params.threshold, smk.params.split_groups
    )
with atomic_output(smk.output.tsv) as tmp, open(tmp, "w") as out:
    rows = write_frequency_tsv(sites, out)
with atomic_outputs([smk.output.bed, smk.output.tbi]) as (bed_gz, _tbi):
    bed_plain = bed_gz.with_suffix("")  # .bedmethyl.gz -> .bedmethyl
    with open(bed_plain, "w") as out:
        write_bedmethyl(sites, out)
    # tabix_index bgzips bed_plain into bed_gz (removing bed_plain) and writes bed_gz.tbi,
    # which is _tbi: the temporary names keep the final ones' suffixes.
    pysam.tabix_index(str(bed_plain), preset="bed", force=True)
print(f"{rows} sites with calls (|llr| >= {smk.params.threshold})")
