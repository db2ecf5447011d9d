"""Rule align: the chosen aligner | samtools sort, under the host's alignment strategy. When the
alignment is not scattered, this job makes the sample's BAM and finishes it as the merge job
would (index, JSON flagstat, the alignment check): no second job for one shard."""

import sys
from pathlib import Path

from numapore.compare import tune_strategy
from numapore.execution.cluster import node_host_file
from numapore.execution.hosts import load_host_config
from numapore.execution.shards import finish_sample_bam
from numapore.execution.steps import run_alignment
from numapore.base.errors import InputError
from numapore.base.rulelog import redirect_to_log
from numapore.inputs.modbam_reads import StagingFailed, check_streamed_staging
from numapore.workflow import layout

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
bam = Path(smk.output.bam)
reads2 = Path(smk.input.reads2) if smk.input.get("reads2") else None  # pairs' R2 (kind short)
# The file of read ids the check counts; none when a modBAM sample's reads stream in.
counted = Path(smk.input.counted) if smk.input.get("counted") else None
# the host file and the tuning of the node type the job runs on (config hosts:), else the run's
host = load_host_config(node_host_file(smk.params.host), overrides=smk.params.get("overrides"))
tuned, tuning = tune_strategy.node_tuning(  # host tuning's choice (config tune), if measured
    smk.params.get("tuned_strategy"), smk.input.get("tuning"), "alignment", layout.TUNING
)
if tuned:
    host = tune_strategy.with_strategy(host, tuned)
sample = smk.wildcards.sample


def keep() -> None:
    """Reads that streamed in from a modBAM sample's staging: its BAM is kept only if the
    staging finished (it may fail after every read went through, or before any)."""
    if counted is None:
        log = layout.log("stage_modbam_reads", f"{sample}.log")
        check_streamed_staging(Path(layout.staged_counts(sample)), sample, log)


try:
    run_alignment(
        host=host,
        aligner=smk.wildcards.aligner,
        index=smk.params.index,
        index_files=[Path(p) for p in smk.input.index],
        reads=Path(smk.input.reads),
        output=bam,
        threads=smk.threads,
        record=Path(smk.log.record),
        kind=smk.params.kind,
        reads2=reads2,
        sample=smk.wildcards.sample,
        mark_duplicates=smk.params.duplicates,
        minimap2_preset=smk.params.minimap2_preset,
        batch=smk.params.batch,
        keep=keep,
    )
except StagingFailed as err:  # the staging's own numapore: line says why: only point at it
    sys.exit(str(err))
except InputError as err:  # one line, from the job that found it
    sys.exit(f"numapore: {err}")
if tuned is not None:  # the strategies were tuned: the tuning behind the strategy, recorded
    tune_strategy.add_to_record(Path(smk.log.record), Path(tuning))
if "summary" in smk.output.keys():  # the sample's BAM (the plan's one_align_shard)
    finish_sample_bam(
        bam, {key: Path(path) for key, path in smk.output.items()}, smk.threads, sys.stderr,
        reads=counted, sample=smk.wildcards.sample, aligner=smk.wildcards.aligner,
        reference=smk.params.reference, kind=smk.params.kind, paired=reads2 is not None,
        rewrites_sorted_bam=smk.params.rewrites_sorted_bam,
        duplicates=smk.params.duplicates, source=smk.params.reads,
        allow_empty=smk.config["allow_empty_samples"],
    )  # fmt: skip
