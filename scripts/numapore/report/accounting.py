"""Read accounting: where every read of a sample went, from the FAST5 files to the CpG calls
(a modbam sample: from the input's records to the realigned reads with modification calls,
account_modbam).

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

Per-read state is kept as polars columns and the fates are found by joins, not in Python sets
and dicts: at 5.5 M reads the sets took 4.4 GB (benchmarks/bench_postprocess.py --steps
accounting).
"""

from __future__ import annotations

import os
import struct
import subprocess
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pysam

from numapore.base.errors import AccountingError
from numapore.nanopolish.frequency import table_blocks
from numapore.pileup.engine import NOT_PRIMARY_MAPPED, carries_calls
from numapore.base.atomic import atomic_output
from numapore.signal.census import Fast5Census, fast5_census, pod5_census, read_census
from numapore.inputs.modbam_reads import StagedReads
from numapore.inputs.readids import id_column, read_id_column, rows_frame, unique_read_ids
from numapore.signal.slow5 import INDEX_EOF, INDEX_HEADER_SIZE, INDEX_MAGIC, iter_index_entries

COLUMNS = ("stage", "what", "reads", "detail")
NA = "NA"
NO_SIGNAL_DATASET = "no signal: its FAST5 file has no Signal dataset, or an empty one"
NO_CALL = "no call: no CpG in the aligned part, or nanopolish could not align the signal"
ABSENT = "no signal: absent from the FAST5 files (or in an unreadable one)"
NOT_INDEXED = "no signal: nanopolish index found none for it"


def signal_census(inp: AccountingInputs, blow5_ids: pl.Series | None = None) -> Fast5Census:
    """The reads of the sample's raw signal inputs, by kind: FAST5 or POD5 files, or the
    BLOW5 input itself (blow5_ids: the ids its index lists, read once by the caller)."""
    if inp.signal_format == "pod5":
        return pod5_census(inp.fast5)
    if inp.signal_format == "blow5":  # always I/O mode slow5: the index is the BLOW5's
        ids = id_column([]) if blow5_ids is None else blow5_ids
        path = str(inp.fast5[0])
        census = Fast5Census(files=1, reads_per_file={path: len(ids)})
        census.reads = pl.DataFrame({"read_id": ids, "file": path, "has_signal": True})
        return census
    return fast5_census(inp.fast5)


def blow5_read_ids(idx: str | os.PathLike) -> pl.Series:
    """The read ids listed in a slow5lib BLOW5 index (.idx), in file order."""
    data = Path(idx).read_bytes()
    if not data.startswith(INDEX_MAGIC) or not data.endswith(INDEX_EOF):
        raise AccountingError(f"{idx}: not a complete slow5 index")
    entries = data[INDEX_HEADER_SIZE : -len(INDEX_EOF)]
    try:
        return id_column(rid.decode() for rid, _, _ in iter_index_entries(entries))
    except struct.error as err:
        raise AccountingError(f"{idx}: damaged slow5 index ({err})") from err


def readdb_with_signal(readdb: str | os.PathLike) -> pl.Series | None:
    """Read ids nanopolish index found FAST5 signal for; None for a BLOW5 readdb ('*' lines)."""
    with open(readdb) as handle:
        lines = (line.rstrip("\n").partition("\t") for line in handle)
        ids = id_column(rid for rid, _, where in lines if where or rid == "*")
    return None if (ids == "*").any() else ids


def rejected_rows(listing: str | os.PathLike) -> list[tuple[str, str, str]]:
    """The conversion's rejected listing: (path, read id or '.', reason) rows."""
    lines = Path(listing).read_text().splitlines()[1:]
    return [tuple(line.split("\t", 2)) for line in lines if line]  # type: ignore[misc]


def primary_alignments(bam: str | os.PathLike) -> pl.DataFrame:
    """Mapping quality of every read's mapped primary alignment: read_id, mapq (the pass of
    primary_alignments_and_calls; the last record of a read wins, as a dict would)."""
    return primary_alignments_and_calls(bam)[0]


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


def modbam_called_read_names(modbam: str | os.PathLike) -> pl.Series:
    """Names of the reads whose primary record in a modBAM carries modification tags (MM), from
    any source of calls, sorted, each once."""
    try:
        with pysam.AlignmentFile(str(modbam), check_sq=False) as handle:
            names = (
                rec.query_name
                for rec in handle.fetch(until_eof=True)
                if not (rec.is_secondary or rec.is_supplementary)
                and carries_calls(rec, tagged=True)
            )
            found = rows_frame(((n,) for n in names), {"read_id": pl.String})["read_id"]
    except (OSError, ValueError) as err:
        raise AccountingError(f"{modbam}: not a readable modBAM: {err}") from err
    return found.unique().sort()


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
    calls: str | os.PathLike  # nanopolish's call table, for its format check
    min_mapq: int
    blow5_index: str | os.PathLike | None = None  # I/O mode slow5 only
    rejected: str | os.PathLike | None = None  # I/O mode slow5 only
    signal_format: str = "fast5"  # of the raw signal inputs (fast5): fast5, pod5 or blow5
    # The census of the signal files, made before (write_census: reads, files); else made here.
    census: tuple[str | os.PathLike, str | os.PathLike] | None = None
    # The modBAM of the calls: the reads with calls are those it tags (else the call table's).
    modbam: str | os.PathLike | None = None


Row = tuple[str, str, object, str]


def _conversion(
    inp: AccountingInputs, census: Fast5Census, converted: pl.Series | None
) -> tuple[list[Row], pl.DataFrame]:
    """Rows of the conversion stage (converted: the BLOW5 index's read ids, None without one)
    and why reads were left out (read_id, why: the listing's first reason for it or its file)."""
    why = pl.DataFrame(schema={"read_id": pl.String, "why": pl.String})
    if converted is None:
        return [("conversion", "reads converted", NA, "I/O mode is not slow5")], why
    skipped: Counter[str] = Counter()
    listed: dict[str, list[tuple[int, str, str]]] = {"read_id": [], "file": []}
    for order, (path, rid, reason) in enumerate(
        rejected_rows(inp.rejected) if inp.rejected else []
    ):
        if rid != ".":
            skipped[reason] += 1
            listed["read_id"].append((order, rid, reason))
        elif path in census.reads_per_file:  # a readable file the conversion left out whole
            skipped[reason] += census.reads_per_file[path]
            listed["file"].append((order, path, reason))
    rows: list[Row] = [("conversion", "reads converted", len(converted), "")]
    rows += [("conversion", "reads skipped", n, reason) for reason, n in sorted(skipped.items())]
    total = len(converted) + sum(skipped.values())
    if total != census.total:
        raise AccountingError(
            f"sample '{inp.sample}': the FAST5 files hold {census.total} reads but the "
            f"conversion accounts for {total} ({len(converted)} converted + "
            f"{sum(skipped.values())} skipped, see {inp.rejected})"
        )
    by_read, by_file = (
        pl.DataFrame(
            listed[key], {"order": pl.Int64, key: pl.String, "reason": pl.String}, orient="row"
        )
        for key in ("read_id", "file")
    )
    # A whole file's reason goes to each of its reads (the census knows which they are).
    by_file = by_file.join(census.reads.select("read_id", "file"), on="file").drop("file")
    why = (
        pl.concat([by_read, by_file.select(by_read.columns)])
        .sort("order", maintain_order=True)
        .unique("read_id", keep="first", maintain_order=True)
        .select("read_id", why=pl.lit("skipped by the conversion: ") + pl.col("reason"))
    )
    return rows, why


def account(inp: AccountingInputs) -> list[Row]:
    """Build the accounting table of one sample and aligner; raise AccountingError on a
    mismatch."""
    converted = blow5_read_ids(inp.blow5_index) if inp.blow5_index is not None else None
    census = read_census(*inp.census) if inp.census else signal_census(inp, converted)
    kind = inp.signal_format
    rows: list[Row] = [
        (kind, "files", census.files, ""),
        (kind, "reads", census.total, "in the readable files"),
    ]
    rows += [(kind, "unreadable file", NA, f"{p}: {e}") for p, e in census.unreadable.items()]
    conversion, why = _conversion(inp, census, converted)
    rows += conversion

    # Repeated ids already stopped the run (merge_alignment_shards).
    basecalled = read_id_column(inp.reads).unique()
    if converted is None:
        # nanopolish index names a file for a read even when that file lacks the signal.
        indexed = readdb_with_signal(inp.readdb)
        indexed = id_column([]) if indexed is None else indexed
        lacking = census.reads.filter(~pl.col("has_signal"))["read_id"]
        with_signal = indexed.filter(~indexed.is_in(lacking.implode()))
    else:
        with_signal = converted
    aligned = primary_alignments(inp.bam)
    # Reads with calls: those the modBAM tags (any source of calls); the call table is read to
    # check it too, since a damaged one must not pass unseen.
    called = modbam_called_read_names(inp.modbam) if inp.modbam else called_read_names(inp.calls)
    if inp.modbam:
        called_read_names(inp.calls)
    known = basecalled.implode()
    strangers = pl.concat(
        [
            aligned["read_id"].filter(~aligned["read_id"].is_in(known)),
            called.filter(~called.is_in(known)),
        ]
    )
    if len(strangers):
        raise AccountingError(
            f"sample '{inp.sample}': {strangers.n_unique()} read(s) in {inp.bam} or {inp.calls} "
            f"are not in the reads file {inp.reads} (e.g. {strangers.min()})"
        )
    census_ids = census.reads["read_id"]
    rows += [
        ("basecalled", "reads", len(basecalled), str(Path(inp.reads).resolve())),
        ("basecalled", "reads with raw signal", basecalled.is_in(with_signal.implode()).sum(), ""),
        (
            kind,
            "reads not in the basecalled file",
            (~census_ids.is_in(known)).sum(),
            "not basecalled or filtered",
        ),
        ("alignment", "primary aligned", aligned.height, inp.aligner),
        ("alignment", "unmapped", (~basecalled.is_in(aligned["read_id"].implode())).sum(), ""),
    ]
    # Each basecalled read's one fate, in the order the module docstring gives.
    reads = (
        pl.DataFrame({"read_id": basecalled})
        .with_columns(
            called=pl.col("read_id").is_in(called.implode()),
            with_signal=pl.col("read_id").is_in(with_signal.implode()),
        )
        .join(aligned, on="read_id", how="left")
        .join(census.reads.select("read_id", "has_signal"), on="read_id", how="left")
        .join(why, on="read_id", how="left")
    )
    # A read without signal is "no signal" in every I/O mode, whatever the conversion said.
    no_signal = (
        pl.when(pl.col("has_signal").not_())
        .then(pl.lit(NO_SIGNAL_DATASET))
        .when(pl.col("why").is_not_null())
        .then(pl.col("why"))
        .when(pl.col("has_signal").is_null())
        .then(pl.lit(ABSENT))
        .otherwise(pl.lit(NOT_INDEXED))
    )
    fate = (
        pl.when(pl.col("called"))
        .then(None)
        .when(pl.col("mapq").is_null())
        .then(pl.lit("unmapped"))
        .when(pl.col("with_signal").not_())
        .then(no_signal)
        .when(pl.col("mapq") < inp.min_mapq)
        .then(pl.lit(f"mapping quality below {inp.min_mapq}"))
        .otherwise(pl.lit(NO_CALL))
    )
    usable = aligned["read_id"].filter(aligned["read_id"].is_in(with_signal.implode()))
    odd = called.filter(~called.is_in(usable.implode()))
    if len(odd):
        raise AccountingError(
            f"sample '{inp.sample}': {len(odd)} read(s) have calls but no primary alignment or "
            f"no raw signal (e.g. {odd[0]})"
        )
    return rows + call_rows(inp.sample, reads, fate, len(called), "", len(basecalled), "basecalled")


def primary_alignments_and_calls(bam: str | os.PathLike) -> tuple[pl.DataFrame, pl.Series]:
    """One pass over a BAM: every read's mapped primary alignment (read_id, mapq; the last
    record of a read wins), and the names of the reads whose mapped primary record carries at
    least one modification call (ML values), sorted, each once."""
    # samtools decompresses and filters, pysam reads its uncompressed records: pysam's htslib
    # inflates with zlib, about three times the CPU time of samtools' libdeflate, and the
    # accounting runs beside the calls' steps, which hold every core.
    command = ["samtools", "view", "-u", "-F", str(NOT_PRIMARY_MAPPED), str(bam)]
    samtools = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        with pysam.AlignmentFile(samtools.stdout, "rb", check_sq=False) as handle:
            rows = ((rec.query_name, rec.mapping_quality, carries_calls(rec)) for rec in handle)
            table = rows_frame(rows, {"read_id": pl.String, "mapq": pl.Int64, "called": pl.Boolean})
    except (OSError, ValueError) as err:
        samtools.kill()
        message = samtools_message(samtools, err)
        raise AccountingError(f"{bam}: not a readable BAM: {message}") from err
    if samtools.wait() != 0:
        raise AccountingError(f"{bam}: not a readable BAM: {samtools_message(samtools, None)}")
    return alignments_and_calls(table)


def listed_alignments_and_calls(listing: str | os.PathLike) -> tuple[pl.DataFrame, pl.Series]:
    """primary_alignments_and_calls from the pileup's read listing of the BAM (the pileup
    reads every record already; the listing names each mapped primary record once)."""
    schema = {"read_id": pl.String, "mapq": pl.Int64, "called": pl.Boolean, "hp": pl.Int64}
    try:
        table = pl.read_csv(listing, separator="\t", schema={**schema, "called": pl.Int8})
    except (OSError, pl.exceptions.PolarsError) as err:
        raise AccountingError(f"{listing}: not the pileup's read listing: {err}") from err
    return alignments_and_calls(table.cast(schema))


def alignments_and_calls(table: pl.DataFrame) -> tuple[pl.DataFrame, pl.Series]:
    """Per-record rows (read_id, mapq, called) as primary_alignments_and_calls returns them:
    each read's alignment (the last row wins), and the reads with calls, sorted, each once."""
    called = table.filter(pl.col("called"))["read_id"].unique().sort()
    return table.drop("called").unique("read_id", keep="last"), called


def samtools_message(process: subprocess.Popen, err: Exception | None) -> str:
    """The last line samtools wrote to stderr, else err, else its exit status."""
    lines = process.stderr.read().decode(errors="replace").strip().splitlines()
    if lines:
        return lines[-1]
    return str(err) if err is not None else f"samtools exit {process.wait()}"


TAGS_WITHOUT_CALLS = "MM/ML tags without a call (no base of the read called)"


@dataclass
class ModbamAccountingInputs:
    """What a modbam sample's accounting reads: the input, what staging counted and listed,
    the staged reads and the realigned BAM."""

    sample: str
    aligner: str
    source: str | os.PathLike  # the sample sheet's reads file
    staged: StagedReads
    untagged: str | os.PathLike  # staged reads without calls and why (read_id, reason)
    reads: str | os.PathLike  # the staged FASTQ
    bam: str | os.PathLike
    listing: str | os.PathLike  # the pileup's read listing of bam (pileup.READ_LISTING_COLUMNS)


def account_modbam(inp: ModbamAccountingInputs) -> list[Row]:
    """The accounting table of a modbam sample: the input's records, those left out and why,
    the staged reads by their tags, aligned or not, and each read's one fate (with calls;
    unmapped; without tags, or with tags that do not fit it; tags without a call). Raises
    AccountingError when the totals do not reconcile."""
    st = inp.staged
    rows: list[Row] = [
        ("input", "records", st.records, str(Path(inp.source).resolve())),
        ("input", "records left out", st.secondary, "secondary alignment (the read's primary "
         "record is realigned)"),
        ("input", "records left out", st.supplementary, "supplementary alignment (the read's "
         "primary record is realigned)"),
        ("input", "records left out", st.duplicates, "marked duplicate (0x400), left out as "
         "modkit does"),
    ]  # fmt: skip
    if st.aligned_input:
        to = f"another reference ({st.other_reference})" if st.other_reference else "it"
        rows.append(("input", "aligned", NA, f"to {to}; realigned to the sample's reference"))
    rows += [
        ("staging", "reads", st.reads, "primary records, realigned"),
        ("staging", "reads with MM/ML tags", st.with_tags, ""),
        ("staging", "reads without MM/ML tags", st.without_tags, "aligned, without calls"),
        ("staging", "reads with an MN tag not their length", st.mn_mismatch, "aligned without "
         "their tags"),
    ]  # fmt: skip
    if st.records != st.reads + st.left_out:
        raise AccountingError(
            f"sample '{inp.sample}': {st.records} input records but {st.reads} staged + "
            f"{st.left_out} left out"
        )
    staged = unique_read_ids(inp.reads, inp.sample)
    if len(staged) != st.reads:
        raise AccountingError(
            f"sample '{inp.sample}': staging counted {st.reads} reads but {inp.reads} holds "
            f"{len(staged)}"
        )
    listed = pl.read_csv(inp.untagged, separator="\t", schema={"read_id": pl.String,
                                                               "reason": pl.String})  # fmt: skip
    if listed.height != st.without_tags + st.mn_mismatch:
        raise AccountingError(
            f"sample '{inp.sample}': {inp.untagged} lists {listed.height} reads without tags, "
            f"staging counted {st.without_tags + st.mn_mismatch}"
        )
    aligned, called = listed_alignments_and_calls(inp.listing)
    known = staged.implode()
    strangers = pl.concat([aligned["read_id"], called, listed["read_id"]]).filter(
        ~pl.concat([aligned["read_id"], called, listed["read_id"]]).is_in(known)
    )
    if len(strangers):
        raise AccountingError(
            f"sample '{inp.sample}': {strangers.n_unique()} read(s) in {inp.bam} or "
            f"{inp.untagged} are not among the staged reads {inp.reads} (e.g. {strangers.min()})"
        )
    odd = called.filter(called.is_in(listed["read_id"].implode()))
    if len(odd):
        raise AccountingError(
            f"sample '{inp.sample}': {len(odd)} read(s) staged without tags have calls in "
            f"{inp.bam} (e.g. {odd[0]})"
        )
    rows += [
        ("alignment", "primary aligned", aligned.height, inp.aligner),
        ("alignment", "unmapped", len(staged) - aligned.height, ""),
    ]
    rows += haplotype_rows(inp.sample, aligned)
    reads = (
        pl.DataFrame({"read_id": staged})
        .with_columns(called=pl.col("read_id").is_in(called.implode()))
        .join(aligned, on="read_id", how="left")
        .join(listed, on="read_id", how="left")
    )
    fate = (
        pl.when(pl.col("called"))
        .then(None)
        .when(pl.col("mapq").is_null())
        .then(pl.lit("unmapped"))
        .when(pl.col("reason").is_not_null())
        .then(pl.col("reason"))
        .otherwise(pl.lit(TAGS_WITHOUT_CALLS))
    )
    return rows + call_rows(
        inp.sample, reads, fate, len(called), "any modification code", len(staged), "staged"
    )


def haplotype_rows(sample: str, aligned: pl.DataFrame) -> list[Row]:
    """The primary aligned reads by their HP tag (haplotype 1, 2, none; others by value), when
    any read has one (an upstream phasing's tags, or WhatsHap's from a phased VCF);
    AccountingError unless they add up to the primary aligned reads."""
    if "hp" not in aligned.columns or not (aligned["hp"] > 0).any():
        return []
    counts = dict(aligned["hp"].value_counts().iter_rows())
    rows: list[Row] = [("haplotype", f"primary aligned with HP {hp}", counts.pop(hp, 0), "")
                       for hp in (1, 2)]  # fmt: skip
    rows.append(("haplotype", "primary aligned without an HP tag", counts.pop(0, 0), ""))
    rows += [
        ("haplotype", f"primary aligned with HP {hp}", n, "") for hp, n in sorted(counts.items())
    ]
    if sum(r[2] for r in rows) != aligned.height:
        raise AccountingError(
            f"sample '{sample}': {aligned.height} primary aligned reads but "
            f"{sum(r[2] for r in rows)} by haplotag"
        )
    return rows


def call_rows(
    sample: str, reads: pl.DataFrame, fate: pl.Expr, called: int, detail: str, total: int, what: str
) -> list[Row]:
    """The methylation rows: reads with calls (detail), then the reads without calls counted by
    their fate (the expression on reads; null for a read with calls); AccountingError unless
    the two add up to the total of `what` reads."""
    fates = dict(reads.select(fate=fate)["fate"].drop_nulls().value_counts().iter_rows())
    rows: list[Row] = [("methylation", "reads with calls", called, detail)]
    rows += [("methylation", "reads without calls", n, f) for f, n in sorted(fates.items())]
    if called + sum(fates.values()) != total:
        raise AccountingError(
            f"sample '{sample}': {total} {what} reads but {called} with calls + "
            f"{sum(fates.values())} without"
        )
    return rows


def write_table(rows: Sequence[Row], output: str | os.PathLike) -> None:
    """Write the accounting rows as a TSV (header: stage, what, reads, detail), atomically."""
    lines = ["\t".join(COLUMNS)]
    lines += ["\t".join(str(v).replace("\t", " ") for v in row) for row in rows]
    with atomic_output(output) as tmp:
        tmp.write_text("\n".join(lines) + "\n")
