"""Rule compare_cell: one benchmark cell, run alone under /usr/bin/time -v
(numapore.compare.run); prints one progress line (cell, wall, CPU utilisation) to the terminal
when done."""

import sys
from pathlib import Path

from numapore.compare.cells import Cell
from numapore.compare.run import measure_cell
from numapore.base.rulelog import redirect_to_log

smk = snakemake  # noqa: F821 (injected by the script directive)
terminal = sys.stdout
redirect_to_log(smk)
cell = Cell.parse(smk.wildcards.cell)
# Methylation: the reads whose read index points at this I/O mode's signal files.
methylation = cell.step == "methylation"
request = {
    "cell": cell.name,
    "host": smk.params.host,
    "reads": smk.input[f"signal_{cell.io_mode}"][0] if methylation else smk.input.reads,
    "reads2": smk.input.get("reads2", ""),  # pairs' R2 (kind short)
    "kind": smk.params.kind,
    "sample": smk.params.sample,
    "mark_duplicates": smk.params.duplicates,
    "batch": smk.params.batch,  # bwa's -K (config short_reads.bwa_batch_bases)
    "genome": smk.input.genome,
    "bam": smk.input.get("bam", ""),
    "index": "" if methylation else smk.params.index,
    "index_files": list(smk.input.get(f"index_{cell.aligner}", [])),
    "min_mapq": smk.params.min_mapq,
    "storage": dict(smk.params.storage),
    # Where the cell ran in the seeded shuffled order (cells.matrix): kept in its record.
    "order": {"position": smk.params.position, "seed": smk.params.seed},
}
data = measure_cell(request, Path(smk.output.record), Path(smk.output.time))
utilisation = data["cpu_seconds"] / (data["wall_seconds"] * cell.threads)
print(
    f"compare: cell {smk.params.position}/{smk.params.cells} {cell.name}: "
    f"wall {data['wall_seconds']:.2f} s, CPU utilisation {utilisation:.2f}",
    file=terminal,
    flush=True,
)
