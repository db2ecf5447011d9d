"""Rule igv_session: an IGV session of a reference and every track of its samples."""

from numapore.base.rulelog import redirect_to_log
from numapore.report.tracks import write_igv_session

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
write_igv_session(smk.input.fasta, list(smk.input.tracks), smk.output[0])
print(f"{len(smk.input.tracks)} tracks in {smk.output[0]}")
