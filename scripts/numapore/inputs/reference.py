"""Reference FASTA preparation: checks the tools would not catch, then a place of our own."""

from __future__ import annotations

import gzip
import os
import shutil
from pathlib import Path

import pysam

from numapore.base.atomic import atomic_outputs
from numapore.base.textfiles import open_maybe_gzip
from numapore.inputs.sheet import InputError
from numapore.inputs.seqcheck import check_sequences, write_normalised


def contig_names(fasta: Path) -> list[str]:
    """The contig names of a (possibly gzip-compressed) FASTA file, in file order."""
    with open_maybe_gzip(fasta, "rt") as handle:
        return [line[1:].split(maxsplit=1)[0] for line in handle if line.startswith(">")]


def check_contigs(fasta: Path) -> list[str]:
    """Fail on a FASTA without contigs or with duplicate contig names; return the names."""
    names = contig_names(fasta)
    if not names:
        raise InputError(f"reference {fasta}: no FASTA records")
    seen: set[str] = set()
    duplicates = sorted({n for n in names if n in seen or seen.add(n)})
    if duplicates:
        raise InputError(f"reference {fasta}: duplicate contig name(s): {', '.join(duplicates)}")
    return names


def prepare_reference(source: Path, target: Path) -> None:
    """Link (or, if gzip-compressed, decompress) the reference to target and index it (.fai)."""
    fmt = "fasta.gz" if source.name.lower().endswith(".gz") else "fasta"
    tidy = check_sequences(source, "reference", fmt).needs_copy("reference")
    check_contigs(source)
    fai = target.with_name(target.name + ".fai")
    # Both appear under their final names only when both are complete (numapore.base.atomic).
    with atomic_outputs([target, fai]) as (tmp, _tmp_fai):
        if tidy:  # CR line ends or blank lines: htslib's index needs clean lines
            write_normalised(source, tmp, "reference", fmt)
        elif source.suffix == ".gz":
            # htslib random access needs bgzip; decompressing works for plain gzip too.
            with gzip.open(source, "rb") as src, open(tmp, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
        else:
            os.symlink(source.resolve(), tmp)
        pysam.faidx(str(tmp))  # writes tmp + ".fai", which is _tmp_fai
