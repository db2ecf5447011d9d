"""The tool command lines of the heavy steps: the one place they are written.

Each function returns the unchanged tool command for one shard as a shell string; execution
strategies (numactl prefixes, per-node instances, process pools) only wrap it.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from shlex import quote

from numapore.base.errors import InputError
from numapore.execution.aligners import ALIGNERS
from numapore.inputs.kinds import DEFAULT_KIND, KINDS
from numapore.inputs.sheet import reads_format


def align_command(
    aligner: str,
    index: str,
    reads: Path,
    output: Path,
    threads: int,
    kind: str = DEFAULT_KIND,
    reads2: Path | None = None,
    sample: str = "sample",
    mark_duplicates: bool = False,
    minimap2_preset: str = "",
    batch: int = 0,
) -> str:
    """Align reads of an input kind with the chosen aligner (its command: numapore.execution.
    aligners) and sort into a
    BAM (index: file, prefix or SNAP's folder); the aligner's options for the kind come from the
    input kinds table (a read group named after sample where it has one; minimap2_preset: -x
    where the kind lets a user choose it). reads2: the second mates of pairs (R2), in the order
    of reads. mark_duplicates (kinds that mark them): samtools fixmate -m between the aligner and
    the sort, the mate tags samtools markdup reads once the BAM is merged."""
    input_kind = KINDS[kind]
    # refuses an aligner the kind lacks
    options = input_kind.aligner_preset(aligner, sample, minimap2_preset, batch)
    if reads2 is not None and not input_kind.paired:
        raise ValueError(f"{kind} samples take one reads file, not pairs")
    first = quote(str(reads))
    mates = f"-U {first}" if reads2 is None else f"-1 {first} -2 {quote(str(reads2))}"
    tool = ALIGNERS[aligner].command.format(
        options=options,
        threads=threads,
        index=quote(index),
        files=" ".join(quote(str(p)) for p in (reads, reads2) if p is not None),
        mates=mates,
        # bowtie2 reads FASTQ unless told the reads are FASTA.
        fmt="-f" if reads_format(reads).startswith("fasta") else "-q",
        mode="single" if reads2 is None else "paired",
    )
    if mark_duplicates and input_kind.marks_duplicates:
        # fixmate wants the records grouped by read name, as samtools collate would make them:
        # the aligners write each read's (each pair's) records together, so their output is.
        # -m adds the mate score (ms) and mate CIGAR (MC) that markdup needs; fixmate also
        # recomputes TLEN by its own rule (it differs from bwa's on some discordant pairs). -u:
        # the pipe into the sort needs no compression (it cost fixmate most of its CPU seconds).
        tool += f" | samtools fixmate -u -m -@ {threads} - -"
    level = " -l 1" if input_kind.rewrites_sorted_bam else ""  # read once, by the next pass
    return f"{tool} | samtools sort -@ {threads}{level} -o {quote(str(output))} -"


def check_minimap2_preset(preset: str, key: str) -> None:
    """InputError naming key when the minimap2 on PATH does not know preset (its -x); nothing
    to say when there is none (the jobs' own minimap2, e.g. a conda env, is then the judge)."""
    if not shutil.which("minimap2"):
        return
    probe = ["minimap2", "-x", preset, "-d", "/dev/null", "/dev/null"]
    done = subprocess.run(probe, capture_output=True, text=True)
    if done.returncode != 0:
        version = subprocess.run(["minimap2", "--version"], capture_output=True, text=True)
        errors = [x for x in done.stderr.splitlines() if x.startswith("[ERROR]")]
        raise InputError(
            f"{key}: minimap2 {version.stdout.strip()} refuses preset {preset!r} "
            f"({errors[0] if errors else f'exit {done.returncode}'}); lr:hq needs minimap2 2.27 "
            "or later (Debian's 2.24 runs map-ont)"
        )


def call_methylation_command(
    reads: Path,
    bam: Path,
    genome: Path,
    output: Path,
    threads: int,
    min_mapq: int,
    motif: str = "cpg",
) -> str:
    """nanopolish call-methylation of one motif (-q: cpg, gpc, dam, dcm) on one BAM, per-read
    calls to output."""
    # nanopolish does not check its writes (on a full disk it exits 0 with an empty table):
    # cat does, and fails the pipeline (every step command runs under bash -o pipefail).
    return (
        f"nanopolish call-methylation --progress -q {motif} -t {threads}"
        f" --min-mapping-quality {min_mapq} -r {quote(str(reads))} -b {quote(str(bam))}"
        f" -g {quote(str(genome))} | cat > {quote(str(output))}"
    )


def nanopolish_index_command(reads: Path, fast5_dirs: list[str], blow5: Path | None) -> str:
    """nanopolish index: map each read to its raw signal (FAST5 folders or one BLOW5)."""
    if blow5 is not None:
        signal = f"--slow5 {quote(str(blow5))}"
    else:
        signal = " ".join(f"-d {quote(d)}" for d in fast5_dirs)
    return f"nanopolish index {signal} {quote(str(reads))}"


def name_blow5_in_readdb(readdb: Path, given: Path, blow5: Path) -> None:
    """nanopolish index --slow5 always writes <BLOW5>.idx, truncating it first, while other jobs
    may be reading that BLOW5: it is given a link of its own (given) in a scratch folder, where
    that .idx stays. Its read index (readdb: one `*<TAB>path` line) then names the BLOW5 itself,
    as it would have."""
    line = f"*\t{given}\n"
    text = readdb.read_text()
    if line not in text.splitlines(keepends=True):
        raise ValueError(f"numapore: {readdb}: no line {line!r} (nanopolish index --slow5)")
    readdb.write_text(text.replace(line, f"*\t{blow5}\n"))
