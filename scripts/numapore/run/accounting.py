"""Read accounting: where every read of a sample went, from the FAST5 files to the CpG calls.

    table = account(AccountingInputs(...))   # rows; raises AccountingError if totals disagree
    write_table(table, "results/s/s.minimap2.accounting.tsv")

Each basecalled read gets exactly one fate, checked in this order: methylation calls; unmapped
(no primary alignment); no raw signal (absent from the FAST5 files or in an unreadable one, its
FAST5 lacks the signal or holds an empty one - in every I/O mode -, or skipped by the conversion
with the reason from the rejected listing); mapping quality below nanopolish's threshold; else
mapped with signal but no call (no CpG in the aligned part, or nanopolish could not align the
signal to it).  The table's totals reconcile:
FAST5 reads = converted + skipped (I/O mode slow5), basecalled = aligned + unmapped, and
basecalled = with calls + every reason without; account() refuses to write a table that does not.
"""

from __future__ import annotations

import os
import struct
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl
import pysam

from numapore.methylation.frequency import table_blocks
from numapore.run.atomic import atomic_output
from numapore.signal.fast5 import list_fast5, read_layout
from numapore.signal.slow5 import INDEX_EOF, INDEX_HEADER_SIZE, INDEX_MAGIC, iter_index_entries

COLUMNS = ("stage", "what", "reads", "detail")
NA = "NA"
NO_SIGNAL_DATASET = "no signal: its FAST5 file has no Signal dataset, or an empty one"
NO_CALL = "no call: no CpG in the aligned part, or nanopolish could not align the signal"


class AccountingError(Exception):
    """The read counts do not reconcile (or an input cannot be read); the message says which."""


@dataclass
class Fast5Census:
    """The reads of a set of FAST5 files: id -> (file, has a non-empty Signal dataset),
    unreadable files."""

    files: int = 0
    reads: dict[str, tuple[str, bool]] = field(default_factory=dict)
    reads_per_file: dict[str, int] = field(default_factory=dict)
    unreadable: dict[str, str] = field(default_factory=dict)
    repeated: int = 0  # read ids met again in a later file (the conversion rejects them)

    @property
    def total(self) -> int:
        """Reads in the readable files, repeated ids included."""
        return sum(self.reads_per_file.values())


def fast5_census(inputs: Iterable[str | os.PathLike]) -> Fast5Census:
    """Count and name the reads of FAST5 files/folders (layout only, the signal is not read)."""
    census = Fast5Census()
    for path in map(str, list_fast5(inputs)):
        census.files += 1
        try:
            reads = read_layout(path)
        except Exception as err:  # noqa: BLE001 - any library error: the file is unreadable
            census.unreadable[path] = f"{type(err).__name__}: {err}"
            continue
        census.reads_per_file[path] = len(reads)
        for rid, has_signal in reads:
            if rid in census.reads:
                census.repeated += 1
            else:
                census.reads[rid] = (path, has_signal)
    return census


def pod5_census(inputs: Iterable[str | os.PathLike]) -> Fast5Census:
    """Count and name the reads of POD5 files/folders (with the pod5 library)."""
    import pod5

    from numapore.signal.inputs import list_pod5

    census = Fast5Census()
    for path in map(str, list_pod5([Path(p) for p in inputs])):
        census.files += 1
        try:
            with pod5.Reader(path) as reader:
                ids = [str(r.read_id) for r in reader.reads()]
        except Exception as err:  # noqa: BLE001 - any library error: the file is unreadable
            census.unreadable[path] = f"{type(err).__name__}: {err}"
            continue
        census.reads_per_file[path] = len(ids)
        for rid in ids:
            if rid in census.reads:
                census.repeated += 1
            else:
                census.reads[rid] = (path, True)
    return census


def signal_census(inp: AccountingInputs) -> Fast5Census:
    """The reads of the sample's raw signal inputs, by kind: FAST5 or POD5 files, or the
    BLOW5 input itself (its index lists its reads)."""
    if inp.signal_kind == "pod5":
        return pod5_census(inp.fast5)
    if inp.signal_kind == "blow5":  # always I/O mode slow5: the index is the BLOW5's
        ids = blow5_read_ids(inp.blow5_index) if inp.blow5_index else []
        census = Fast5Census(files=1, reads={r: (str(inp.fast5[0]), True) for r in ids})
        census.reads_per_file[str(inp.fast5[0])] = len(ids)
        return census
    return fast5_census(inp.fast5)


def read_ids(path: str | os.PathLike) -> tuple[list[str], list[str]]:
    """The read ids of a FASTA/FASTQ file (gzip allowed) in order, and the ids seen twice."""
    ids: list[str] = []
    seen: set[str] = set()
    repeated: list[str] = []
    with pysam.FastxFile(str(path)) as fastx:
        for rec in fastx:
            if rec.name in seen:
                repeated.append(rec.name)
            seen.add(rec.name)
            ids.append(rec.name)
    return ids, repeated


def unique_read_ids(path: str | os.PathLike, sample: str) -> list[str]:
    """The read ids of a reads file; AccountingError naming the file if an id repeats."""
    ids, repeated = read_ids(path)
    if repeated:
        shown = ", ".join(sorted(set(repeated))[:3])
        raise AccountingError(
            f"sample '{sample}': reads file {Path(path).resolve()} repeats {len(repeated)} read "
            f"id(s) (e.g. {shown}); nanopolish would call such reads twice: remove the duplicates"
        )
    return ids


def alignment_summary(
    flagstat: dict, reads: str | os.PathLike, sample: str, aligner: str, reference: str
) -> str:
    """The alignment check's table (reads in, primary alignments mapped) from samtools
    flagstat's JSON; AccountingError when nothing mapped or the reads file repeats a read id
    (before nanopolish would call such reads twice)."""
    mapped = flagstat["QC-passed reads"]["primary mapped"]
    reads_in = len(unique_read_ids(reads, sample))
    if mapped == 0:
        raise AccountingError(
            f"sample '{sample}': none of its {reads_in} reads mapped to the reference "
            f"{reference} with {aligner}: is it the right reference (do its contigs include the "
            "sequenced genome)?"
        )
    return (
        "sample\taligner\treads_in\tprimary_mapped\tprimary_mapped_fraction\n"
        f"{sample}\t{aligner}\t{reads_in}\t{mapped}\t{mapped / reads_in:.4f}\n"
    )


def blow5_read_ids(idx: str | os.PathLike) -> list[str]:
    """The read ids listed in a slow5lib BLOW5 index (.idx), in file order."""
    data = Path(idx).read_bytes()
    if not data.startswith(INDEX_MAGIC) or not data.endswith(INDEX_EOF):
        raise AccountingError(f"{idx}: not a complete slow5 index")
    entries = data[INDEX_HEADER_SIZE : -len(INDEX_EOF)]
    try:
        return [rid.decode() for rid, _, _ in iter_index_entries(entries)]
    except struct.error as err:
        raise AccountingError(f"{idx}: damaged slow5 index ({err})") from err


def readdb_with_signal(readdb: str | os.PathLike) -> set[str] | None:
    """Read ids nanopolish index found FAST5 signal for; None for a BLOW5 readdb ('*' lines)."""
    found: set[str] = set()
    with open(readdb) as handle:
        for line in handle:
            rid, _, where = line.rstrip("\n").partition("\t")
            if rid == "*":
                return None
            if where:
                found.add(rid)
    return found


def rejected_rows(listing: str | os.PathLike) -> list[tuple[str, str, str]]:
    """The conversion's rejected listing: (path, read id or '.', reason) rows."""
    lines = Path(listing).read_text().splitlines()[1:]
    return [tuple(line.split("\t", 2)) for line in lines if line]  # type: ignore[misc]


def primary_alignments(bam: str | os.PathLike) -> dict[str, int]:
    """Mapping quality of every read's mapped primary alignment (read name -> MAPQ)."""
    out: dict[str, int] = {}
    with pysam.AlignmentFile(str(bam)) as handle:
        for r in handle.fetch(until_eof=True):
            if not (r.is_unmapped or r.is_secondary or r.is_supplementary):
                out[r.query_name] = r.mapping_quality
    return out


def called_read_names(calls: str | os.PathLike) -> pl.Series:
    """Names of the reads with at least one call in a nanopolish call-methylation table,
    sorted, each once. The table is read a block at a time; the distinct names of the blocks
    are merged whenever they pile up, so memory holds about the names, never the rows."""
    parts: list[pl.Series] = []
    held = kept = 0
    try:
        for block in table_blocks(Path(calls), {"read_name": pl.String()}):
            parts.append(block["read_name"].unique())
            held += len(parts[-1])
            if held > 2 * kept + 1_000_000:
                parts = [pl.concat(parts).unique()]
                held = kept = len(parts[0])
    except (ValueError, pl.exceptions.PolarsError) as err:
        raise AccountingError(f"{calls}: not a readable nanopolish call table: {err}") from err
    names = pl.concat(parts).unique() if parts else pl.Series([], dtype=pl.String)
    return names.drop_nulls().sort()  # a blank line has no name


def called_reads(calls: str | os.PathLike) -> set[str]:
    """Names of the reads with at least one call in a nanopolish call-methylation table."""
    return set(called_read_names(calls))


@dataclass
class AccountingInputs:
    """What the accounting reads: the sample's inputs and the outputs of each step."""

    sample: str
    aligner: str
    fast5: Sequence[str | os.PathLike]
    reads: str | os.PathLike
    readdb: str | os.PathLike
    bam: str | os.PathLike
    calls: str | os.PathLike
    min_mapq: int
    blow5_index: str | os.PathLike | None = None  # I/O mode slow5 only
    rejected: str | os.PathLike | None = None  # I/O mode slow5 only
    signal_kind: str = "fast5"  # of the raw signal inputs (fast5): fast5, pod5 or blow5


Row = tuple[str, str, object, str]


def _conversion(inp: AccountingInputs, census: Fast5Census) -> tuple[list[Row], set, dict]:
    """Rows of the conversion stage, the converted read ids and why reads were left out."""
    if inp.blow5_index is None:
        return [("conversion", "reads converted", NA, "I/O mode is not slow5")], set(), {}
    converted = blow5_read_ids(inp.blow5_index)
    why: dict[str, str] = {}  # read id -> reason it is not in the BLOW5
    skipped: Counter[str] = Counter()
    by_file: dict[str, list[str]] = {}
    for rid, (where, _) in census.reads.items():
        by_file.setdefault(where, []).append(rid)
    for path, rid, reason in rejected_rows(inp.rejected) if inp.rejected else []:
        if rid != ".":
            skipped[reason] += 1
            why.setdefault(rid, f"skipped by the conversion: {reason}")
        elif path in census.reads_per_file:  # a readable file the conversion left out whole
            skipped[reason] += census.reads_per_file[path]
            for other in by_file.get(path, []):
                why.setdefault(other, f"skipped by the conversion: {reason}")
    rows: list[Row] = [("conversion", "reads converted", len(converted), "")]
    rows += [("conversion", "reads skipped", n, reason) for reason, n in sorted(skipped.items())]
    total = len(converted) + sum(skipped.values())
    if total != census.total:
        raise AccountingError(
            f"sample '{inp.sample}': the FAST5 files hold {census.total} reads but the "
            f"conversion accounts for {total} ({len(converted)} converted + "
            f"{sum(skipped.values())} skipped, see {inp.rejected})"
        )
    return rows, set(converted), why


def _no_signal_reason(rid: str, census: Fast5Census, why: dict[str, str]) -> str:
    """Why a basecalled read has no raw signal nanopolish can use."""
    # A read without signal is "no signal" in every I/O mode, whatever the conversion said.
    if rid in census.reads and not census.reads[rid][1]:
        return NO_SIGNAL_DATASET
    if rid in why:
        return why[rid]
    if rid not in census.reads:
        return "no signal: absent from the FAST5 files (or in an unreadable one)"
    return "no signal: nanopolish index found none for it"


def account(inp: AccountingInputs) -> list[Row]:
    """Build the accounting table of one sample and aligner; raise AccountingError on a
    mismatch."""
    census = signal_census(inp)
    kind = inp.signal_kind
    rows: list[Row] = [
        (kind, "files", census.files, ""),
        (kind, "reads", census.total, "in the readable files"),
    ]
    rows += [(kind, "unreadable file", NA, f"{p}: {e}") for p, e in census.unreadable.items()]
    conversion, converted, why = _conversion(inp, census)
    rows += conversion

    ids = read_ids(inp.reads)[0]  # repeated ids already stopped the run (merge_alignment_shards)
    basecalled = set(ids)
    if inp.blow5_index is None:
        # nanopolish index names a file for a read even when that file lacks the signal.
        indexed = readdb_with_signal(inp.readdb) or set()
        with_signal = {r for r in indexed if census.reads.get(r, ("", True))[1]}
    else:
        with_signal = converted
    aligned = primary_alignments(inp.bam)
    # The called reads stay a sorted polars column (compact), compared by joins, not a set.
    called = called_read_names(inp.calls)
    basecalled_names = pl.Series(ids, dtype=pl.String)
    strangers = set(aligned) - basecalled
    strangers.update(called.filter(~called.is_in(basecalled_names.implode())))
    if strangers:
        raise AccountingError(
            f"sample '{inp.sample}': {len(strangers)} read(s) in {inp.bam} or {inp.calls} are "
            f"not in the reads file {inp.reads} (e.g. {sorted(strangers)[0]})"
        )
    signal_only = len(set(census.reads) - basecalled)
    rows += [
        ("basecalled", "reads", len(basecalled), str(Path(inp.reads).resolve())),
        ("basecalled", "reads with raw signal", len(basecalled & with_signal), ""),
        (kind, "reads not in the basecalled file", signal_only, "not basecalled or filtered"),
        ("alignment", "primary aligned", len(aligned), inp.aligner),
        ("alignment", "unmapped", len(basecalled - set(aligned)), ""),
    ]
    fates: Counter[str] = Counter()
    for rid, has_calls in zip(ids, basecalled_names.is_in(called.implode()), strict=True):
        if has_calls:
            continue
        if rid not in aligned:
            fates["unmapped"] += 1
        elif rid not in with_signal:
            fates[_no_signal_reason(rid, census, why)] += 1
        elif aligned[rid] < inp.min_mapq:
            fates[f"mapping quality below {inp.min_mapq}"] += 1
        else:
            fates[NO_CALL] += 1
    usable = pl.Series([r for r in aligned if r in with_signal], dtype=pl.String)
    odd = called.filter(~called.is_in(usable.implode()))
    if len(odd):
        raise AccountingError(
            f"sample '{inp.sample}': {len(odd)} read(s) have calls but no primary alignment or "
            f"no raw signal (e.g. {odd[0]})"
        )
    rows.append(("methylation", "reads with calls", len(called), ""))
    rows += [("methylation", "reads without calls", n, f) for f, n in sorted(fates.items())]
    if len(called) + sum(fates.values()) != len(basecalled):
        raise AccountingError(
            f"sample '{inp.sample}': {len(basecalled)} basecalled reads but {len(called)} with "
            f"calls + {sum(fates.values())} without"
        )
    return rows


def write_table(rows: Sequence[Row], output: str | os.PathLike) -> None:
    """Write the accounting rows as a TSV (header: stage, what, reads, detail), atomically."""
    lines = ["\t".join(COLUMNS)]
    lines += ["\t".join(str(v).replace("\t", " ") for v in row) for row in rows]
    with atomic_output(output) as tmp:
        tmp.write_text("\n".join(lines) + "\n")
