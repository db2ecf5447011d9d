"""Rule compare_cell: one benchmark cell, run alone under /usr/bin/time -v; prints one progress
line (cell, wall, CPU utilisation) to the terminal when done."""

import json
import os
import subprocess
import sys
from pathlib import Path

from numapore.run.atomic import scratch_dir
from numapore.compare.matrix import Cell
from numapore.run.rulelog import redirect_to_log

smk = snakemake  # noqa: F821 (injected by the script directive)
terminal = sys.stdout
redirect_to_log(smk)
cell = Cell.parse(smk.wildcards.cell)
record, time_report = Path(smk.output.record), Path(smk.output.time)
with scratch_dir(record) as workdir:
    request = {
        "cell": cell.name,
        "host": smk.params.host,
        "workdir": str(workdir),
        "record": str(workdir / "record.json"),
        "reads": smk.input.reads,
        "genome": smk.input.genome,
        "bam": smk.input.get("bam", ""),
        "index": smk.params.index if cell.step == "alignment" else "",
        "index_files": list(smk.input.get(f"index_{cell.aligner}", [])),
        "min_mapq": smk.params.min_mapq,
        "storage": dict(smk.params.storage),
    }
    if cell.step == "methylation":  # the reads whose read index points at this mode's files
        request["reads"] = smk.input[f"signal_{cell.io_mode}"][0]
    (workdir / "request.json").write_text(json.dumps(request, indent=2))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent)}
    command = ["/usr/bin/time", "-v", "-o", str(workdir / "time.txt")]
    command += [sys.executable, "-m", "numapore.compare.matrix", str(workdir / "request.json")]
    print(" ".join(command), flush=True)
    subprocess.run(command, stdout=sys.stderr, stderr=sys.stderr, env=env, check=True)
    # Outputs appear complete or not at all: renamed into place only now.
    os.replace(workdir / "time.txt", time_report)
    data = json.loads((workdir / "record.json").read_text())
    os.replace(workdir / "record.json", record)
utilisation = data["cpu_seconds"] / (data["wall_seconds"] * cell.threads)
print(
    f"compare: cell {smk.params.position}/{smk.params.cells} {cell.name}: "
    f"wall {data['wall_seconds']:.2f} s, CPU utilisation {utilisation:.2f}",
    file=terminal,
    flush=True,
)
