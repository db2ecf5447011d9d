"""Rule report_tracks: the report's page of a sample's bigWig tracks and its IGV session."""

from numapore.base.rulelog import redirect_to_log
from numapore.report.tracks import tracks_page

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
tracks_page(
    smk.wildcards.sample,
    list(smk.input.tracks),
    smk.input.session,
    smk.output.page,
    smk.output.data,
)
