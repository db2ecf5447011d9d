"""Rule compare_report: the comparison as Markdown, and the recommended host-file fragment."""

from pathlib import Path

from numapore.compare.recommend import index_fit, recommendation
from numapore.report.comparison import identical_note, reads_advice, report_markdown, steps_note
from numapore.compare.subsample import count_reads
from numapore.compare.summary import read_tsv
from numapore.execution.hosts import check_host_against_machine, load_host_config
from numapore.base.atomic import atomic_outputs
from numapore.base.rulelog import redirect_to_log

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
rows = read_tsv(Path(smk.input.summary))
# Each compared aligner's index against the memory of the nodes the cells ran on.
host = load_host_config(smk.params.host)
index_bytes = {
    key.removeprefix("index_"): sum(Path(p).stat().st_size for p in smk.input[key])
    for key in smk.input.keys()
    if key.startswith("index_")
}
fits = index_fit(index_bytes, check_host_against_machine(host), host.instances_per_node)
advice = recommendation(rows, smk.params.host, fits)
# How many reads the cells ran on (counted only when a cell was too short: sizing advice).
cells_reads = count_reads(Path(smk.input.reads)) if any(r["too_short"] for r in rows) else 0
notes = "\n".join(
    n
    for n in (
        identical_note(rows),
        reads_advice(rows, cells_reads, "pairs" if smk.params.paired else "reads"),
        steps_note(smk.params.sample, smk.params.kind, smk.params.steps),
    )
    if n
)
text = report_markdown(
    rows, advice, smk.params.sample, smk.params.reads, smk.params.host, notes, fits,
    smk.params.paired,
)  # fmt: skip
with atomic_outputs([smk.output.report, smk.output.host]) as (report, host_file):
    report.write_text(text)
    host_file.write_text(advice)
print(advice)
