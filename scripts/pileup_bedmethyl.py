"""Rules pileup and pileup_shard: a modBAM's calls piled up into bedMethyl (numapore pileup,
modkit's semantics): the whole, bgzipped and indexed, or a scatter shard's regions as text; the
equivalent modkit command goes to the log. Both also write the pileup's read listing (each
mapped primary record once), which the read accounting reads instead of the BAM, and the pass
thresholds it used (a JSON record, shown by the QC of the calls; a split pileup's shards each
estimate the same, from the same sampled reads)."""

import json
import shutil
import sys
from dataclasses import replace
from pathlib import Path

import pysam

from numapore.base.atomic import atomic_output, atomic_outputs
from numapore.base.errors import empty_sample
from numapore.base.rulelog import redirect_to_log
from numapore.compare.tune_pileup import chosen, label
from numapore.pileup import cli as pileup_cli
from numapore.pileup.engine import READ_LISTING_HEADER, carries_calls, write_read_listing
from numapore.methylation.bgzf import write_indexed_bed
from numapore.pileup.modkit_versions import MODKIT_VERSIONS
from numapore.pileup.settings import emptying_filter, filter_setting, modkit_command
from numapore.pileup.settings import numapore_arguments
from numapore.pileup.thresholds import threshold_line, threshold_record
from numapore.report.empty import no_calls_reason, no_rows_reason


def write_record(path, record: dict) -> None:
    """A threshold record (threshold_record) as JSON, and its line on the log."""
    print(f"numapore pileup: {threshold_line(record)}")
    Path(path).write_text(json.dumps(record, indent=1) + "\n")


def shards_record(paths: list[str]) -> dict:
    """The thresholds of a split pileup: its shards', the same in each shard with calls."""
    records = [json.loads(Path(p).read_text()) for p in paths]
    used = [r for r in records if r["source"] != "no calls"] or records[:1]
    if any(r != used[0] for r in used):
        raise RuntimeError(f"the pileup's shards used different pass thresholds: {paths}")
    return used[0]


def has_calls(bam: str) -> bool:
    """Whether any record of the modBAM carries modification tags (read until the first)."""
    with pysam.AlignmentFile(bam, check_sq=False) as handle:
        return any(carries_calls(rec, tagged=True) for rec in handle.fetch(until_eof=True))


smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
options = replace(smk.params.options, threads=smk.threads)  # the run's plan decided the rest
bam = smk.input.bam
if "text" in smk.output.keys():  # a scatter shard: its regions' rows, in genome order
    shard, shards = map(int, smk.wildcards.shard.split("-of-"))
    regions = pileup_cli.shard_regions(bam, shard, shards)
    print(f"shard {shard} of {shards}: regions {', '.join(regions) or 'none'}")
    if regions and has_calls(bam):
        shard_outputs = pileup_cli.Outputs(
            smk.output.text, read_listing=smk.output.reads, thresholds=smk.output.thresholds
        )
        sys.exit(pileup_cli.run_options(bam, shard_outputs, options, regions))
    Path(smk.output.text).write_text("")
    write_record(smk.output.thresholds, threshold_record(None, options))
    with atomic_output(smk.output.reads) as tmp, open(tmp, "w") as listing:
        listing.write(READ_LISTING_HEADER)
        write_read_listing(bam, listing, regions)
    sys.exit(0)
sample, motif = smk.wildcards.sample, smk.wildcards.motif
allowed = smk.config["allow_empty_samples"]  # the config, not a param: no rerun when it changes
plain = str(Path(smk.output.bed).with_suffix(""))
version = MODKIT_VERSIONS[options.compat]
print(f"modkit semantics: {version}")
if smk.input.get("tuning"):  # the split and threads host tuning chose (tune_pileup)
    tuned = json.loads(Path(smk.input.tuning).read_text())
    setting = label(list(chosen(tuned).values()))
    print(f"pileup setting by host tuning ({smk.input.tuning}): {setting}: {tuned['why']}")
print(f"equivalent modkit command: {modkit_command(bam, plain, numapore_arguments(options))}")
outputs = [smk.output.bed, smk.output.tbi, smk.output.reads, smk.output.thresholds]
with atomic_outputs(outputs) as (bed_gz, _tbi, listing, thresholds):
    # bed_gz is written with its index bed_gz.tbi, which is _tbi (temporary names keep the
    # final ones' suffixes); the text is a temporary file beside them, or the shards' texts.
    shards = [Path(p) for p in smk.input.get("shards", [])]
    text = bed_gz.with_name(bed_gz.name + ".bed")
    try:
        called = bool(shards) or has_calls(bam)
        if not called:  # nanopolish called no read: nothing to pile up
            # A modBAM of nanopolish's calls (numapore.workflow.jobs.pileup_bam): its reads passed
            # methylation.min_mapping_quality (the config, not a param: no rerun)
            nanopolish = bam.endswith(".modbam.bam")
            min_mapq = smk.config["methylation"]["min_mapping_quality"] if nanopolish else None
            empty_sample(sample, no_calls_reason(bam, motif, min_mapq), allowed)
            write_record(thresholds, threshold_record(None, options))
            text.write_text("")
            with open(listing, "w") as handle:
                handle.write(READ_LISTING_HEADER)
                write_read_listing(bam, handle)
        elif not shards:
            whole = pileup_cli.Outputs(
                str(text), read_listing=str(listing), thresholds=str(thresholds)
            )
            status = pileup_cli.run_options(bam, whole, options)
            if status:
                sys.exit(status)  # the pileup said why, on the log
        else:  # the shards' thresholds, and their listings, each after its header line
            write_record(thresholds, shards_record(smk.input.shard_thresholds))
            with open(listing, "w") as handle:
                handle.write(READ_LISTING_HEADER)
                for part in smk.input.shard_listings:
                    with open(part) as shard_listing:
                        shard_listing.readline()
                        shutil.copyfileobj(shard_listing, handle)
        rows = 0

        def chunks():
            """The text of every part in order, a block at a time, counting its rows."""
            global rows
            for part in shards or [text]:
                with open(part, "rb") as handle:
                    while block := handle.read(4 << 20):
                        rows += block.count(b"\n")
                        yield block

        write_indexed_bed(bed_gz, chunks())
        print(f"{rows} bedMethyl rows")
        if rows == 0 and called:  # the calls all fell to the filters: which one
            key = emptying_filter(bam, options)
            setting = filter_setting(key, options, smk.config) if key else None
            empty_sample(sample, no_rows_reason(bam, motif, setting), allowed)
    finally:
        text.unlink(missing_ok=True)
