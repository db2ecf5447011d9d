"""Rule compare_summary: the summary table of every cell, from the cells' raw files only."""

import json
from pathlib import Path

from numapore.compare.matrix import (
    Cell,
    cell_row,
    parse_benchmark,
    parse_time_v,
    summarise,
    write_tsv,
)
from numapore.run.rulelog import redirect_to_log

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
rows = []
for record, time_report, benchmark in zip(
    smk.input.records, smk.input.times, smk.input.benchmarks, strict=True
):
    cell = Cell.parse(Path(record).name.removesuffix(".run.json"))
    rows.append(
        cell_row(
            cell,
            json.loads(Path(record).read_text()),
            parse_time_v(Path(time_report).read_text()),
            parse_benchmark(Path(benchmark).read_text()),
        )
    )
write_tsv(summarise(rows), Path(smk.output[0]))
print(f"{len(rows)} cells -> {smk.output[0]}")
