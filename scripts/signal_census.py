"""Rule signal_census: the reads of the sample's FAST5 or POD5 files (read id, file, whether it
holds a signal) and the unreadable files, for the read accounting; made from the files' layout
alone, in a job of its own, so that it runs beside nanopolish index rather than after the calls."""

from numapore.signal.census import fast5_census, pod5_census, write_census
from numapore.base.rulelog import redirect_to_log

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
census = (pod5_census if smk.params.signal_format == "pod5" else fast5_census)(smk.input.signal)
write_census(census, smk.output.reads, smk.output.files)
files = f"{census.files} {smk.params.signal_format} files"
print(
    f"numapore: {files} ({len(census.unreadable)} unreadable), "
    f"{census.total} reads -> {smk.output.reads}"
)
