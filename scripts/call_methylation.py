"""Rule call_methylation: nanopolish call-methylation under the host's strategy and I/O mode
(the host tuning's choices, when tuned: their measurements and reasons go into the run
record)."""

from pathlib import Path

from numapore.compare import tune_strategy
from numapore.execution.cluster import node_host_file
from numapore.execution.hosts import load_host_config
from numapore.execution.steps import run_methylation
from numapore.compare.tuning import add_to_record
from numapore.base.rulelog import redirect_to_log
from numapore.workflow import layout

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
# the host file and the tuning of the node type the job runs on (config hosts:), else the run's
host = load_host_config(node_host_file(smk.params.host), overrides=smk.params.get("overrides"))
tuned, tuning = tune_strategy.node_tuning(  # host tuning's choice of strategy, if measured
    smk.params.get("tuned_strategy"), smk.input.get("strategy_tuning"), "methylation",
    layout.TUNING,
)  # fmt: skip
if tuned:
    host = tune_strategy.with_strategy(host, tuned, "methylation")
run_methylation(
    host=host,
    reads=Path(smk.input.reads),
    bam=Path(smk.input.bam),
    genome=Path(smk.input.genome),
    output=Path(smk.output[0]),
    threads=smk.threads,
    min_mapq=smk.params.min_mapq,
    io_mode=smk.params.io_mode,
    io_processes=smk.params.io_processes,
    record=Path(smk.log.record),
    motif=smk.wildcards.motif,
)
if smk.params.tuning:
    add_to_record(Path(smk.log.record), Path(smk.params.tuning))
if tuned is not None:  # the strategies were tuned: the tuning behind the strategy, recorded
    tune_strategy.add_to_record(Path(smk.log.record), Path(tuning), "methylation")
