"""The counting core on the compiled route: an interval's reads tallied per position and strand
by core.c (its BAM reader in bam_core.c; one motif's positions found by focus.c), its rows
(modkit's FeatureVector::decode), --combine-strands, and their bedMethyl text written in C.
No numpy or pysam here: the Python path (counting_python, numpy and pysam's records, the same
bytes) is imported only where the core is not built or leaves an interval to it. Records with
the same name in one interval share the first one's calls by read position, where modkit maps
them by the first one's reference positions."""

from __future__ import annotations

import array

from numapore.methylation.bedmethyl import rows_text
from numapore.pileup import common
from numapore.pileup.common import (
    BASE_INDEX,
    NOT_PRIMARY_MAPPED,
    ffi,
    lib,
    Options,
    Stats,
)
from numapore.pileup.inputs import haplotype_of, open_fasta, read_listing_line
from numapore.pileup.thresholds import Caller, new_core
from numapore.pileup.positions import IUPAC, make_motif, PositionFilter
from numapore.pileup.regions import Chunk, combined_end, motif_focus, position_masks
from numapore.pileup.reader import BamReader

# The columns of pileup's read listing (reads_out), a TSV with this header line
READ_LISTING_COLUMNS = ("read_id", "mapq", "called", "hp")


READ_LISTING_HEADER = "\t".join(READ_LISTING_COLUMNS) + "\n"


class ChunkWorker:
    """Does chunks of one BAM with fixed settings (one per process)."""

    def __init__(
        self,
        bam_path: str,
        options: Options,
        caller: Caller,
        pf: PositionFilter | None = None,
        list_reads: bool = False,
    ):
        """The worker's settings, the FASTA for motifs and the compiled core if built. list_reads:
        each chunk's Stats.reads lists the mapped primary records starting in it."""
        self.bam_path = bam_path
        self._bam = self._python = None
        self.list_reads = list_reads
        self.fasta = open_fasta(options.reference) if options.motif_list() else None
        self.pf = pf
        self.options = options
        self.caller = caller
        self.ignore, self.combine_mods, self.combine_strands = options.numeric()
        self.edge = options.edge()
        self.motifs = [make_motif(m, o) for m, o in options.motif_list()]
        self.motif_labels = [m.label for m in self.motifs]
        # 0.6: a motif position's rows are of the motif's base only (other bases' calls there
        # are no calls of theirs, so N_diff of the motif base's rows)
        self.motif_bases = (
            [BASE_INDEX.get(m.raw[m.offset], 4) for m in self.motifs] if options.modern else []
        )
        # the same as core.c's bit mask of bases with rows
        self.base_mask = (
            sum(1 << b for b in set(self.motif_bases) if b < 4) if self.motif_bases else 15
        )
        self.core = new_core(options, caller) if common.ENABLED else None
        self.reader = BamReader.open(bam_path) if self.core is not None else None
        self.modbases = None
        if options.modern and options.modified_bases:
            self.modbases = self.python.modbases_counter()
        # one motif without --include-bed: its positions found in C (focus.c)
        self.focus = None
        if len(self.motifs) == 1 and pf is None and self.reader is not None:
            self.focus = motif_letter_sets(self.motifs[0])

    def in_c(self) -> bool:
        """Whether chunks are done by the compiled core and its C reader (where an interval
        is left to pysam, that one is Python's)."""
        return self.reader is not None and self.modbases is None

    @property
    def bam(self):
        """pysam's reader of the BAM, opened where records go through pysam (no compiled core,
        or what its C reader leaves to pysam)."""
        if self._bam is None:
            import pysam

            self._bam = pysam.AlignmentFile(self.bam_path, "rb", check_sq=False)
        return self._bam

    @property
    def python(self):
        """The Python path (counting_python: numpy), made where it is needed."""
        if self._python is None:
            from numapore.pileup.counting_python import PythonCounter

            self._python = PythonCounter(self)
        return self._python

    def in_haplotype(self, rec) -> bool:
        """Whether the record counts in this pileup's haplotype (all do without one)."""
        return self.options.haplotype is None or haplotype_of(rec) == self.options.haplotype

    def list_read(self, rec, chunk: Chunk, stats: Stats) -> None:
        """With list_reads, add a mapped primary record to the chunk's listing when it starts
        in the chunk (as the reads counted for the summary): once over chunks that tile."""
        if (
            self.list_reads
            and not rec.flag & NOT_PRIMARY_MAPPED
            and (chunk.first or rec.reference_start >= chunk.start)
        ):
            stats.reads.append(read_listing_line(rec))

    def pileup_chunk(self, chunk: Chunk) -> tuple[str, Stats]:
        """The bedMethyl text of one interval and its counts (compiled core if built)."""
        if self.modbases is not None:
            stats = Stats()
            rows = self.modbases.rows(chunk.chrom, chunk.start, chunk.end, stats)
            stats.rows = len(rows)
            return rows_text(chunk.chrom, rows), stats
        if chunk.planned_end is not None and self.focus is not None and self.modbases is None:
            done = self.pileup_chunk_focus(chunk)
            if done is not None:
                return done
        if chunk.planned_end is not None:  # its motif positions, found again
            found = self.reader.any(chunk.tid, chunk.start, chunk.end) if self.reader else None
            if found is None:
                found = next(self.bam.fetch(chunk.chrom, chunk.start, chunk.end), None) is not None
            if not found:
                return "", Stats()  # no read, no row: its motif positions are not needed
            span_end = chunk.span_end
            chunk = Chunk(chunk.tid, chunk.chrom, chunk.start, chunk.planned_end, first=chunk.first)
            motif_focus(chunk, self.motifs, self.fasta, span_end, self.pf, self.combine_strands,
                        self.options.mask)  # fmt: skip
            chunk.end = min(chunk.end, span_end)
        if common.ENABLED and self.core is not None:
            done = self.pileup_chunk_core(chunk)
            if done is not None:
                return done
        return self.python.pileup_chunk(chunk)

    def pileup_chunk_focus(self, chunk: Chunk) -> tuple[str, Stats] | None:
        """pileup_chunk of a motif's interval with one motif and no --include-bed, its
        positions found by focus.c (as motif_focus and position_masks find them); None where
        the C reader leaves the interval to pysam (nothing changed then)."""
        found = self.reader.any(chunk.tid, chunk.start, chunk.end)
        if not found:
            return None if found is None else ("", Stats())
        motif, (fwd, rev) = self.motifs[0], self.focus
        start, end, seq_end = chunk.start, chunk.planned_end, chunk.planned_end
        if self.combine_strands:
            planned = Chunk(chunk.tid, chunk.chrom, start, end, first=chunk.first)
            end, seq_end = combined_end(planned, self.motifs, self.fasta, chunk.span_end, None,
                                        self.options.mask)  # fmt: skip
        end = min(end, chunk.span_end)
        length = end - start
        stats = Stats()
        if length <= 0:
            return "", stats
        seq = self.fasta.fetch(chunk.chrom, start, seq_end)
        seq = (seq if self.options.mask else seq.upper()).encode()
        allowed, want = bytearray(2 * length), bytearray(length)
        entries = None
        if self.combine_strands:
            entries = [array.array(t, bytes(array.array(t).itemsize * length)) for t in "qqB"]
        n = lib.pu_focus(
            seq, len(seq), fwd, rev, motif.length, motif.offset, motif.reverse_offset, start,
            length, ffi.from_buffer(allowed), ffi.from_buffer(want),
            *([ffi.from_buffer(C_TYPES[i], entries[j]) for i, j in ((0, 0), (2, 1), (3, 2))]
              if entries else [ffi.NULL] * 3),
            bool(self.motif_bases),
        )  # fmt: skip
        ctx = self.core
        ctx.want = ffi.from_buffer(want)
        here = Chunk(chunk.tid, chunk.chrom, start, end, first=chunk.first)
        tallied = self.reader.tally(ctx, here, self.options.haplotype, self.list_reads, stats)
        if tallied is None:
            return None
        if not tallied:
            return "", stats
        if not self.combine_strands:
            return self._core_text(here, length, stats, allowed)
        lib.pu_observe(ctx)
        if not n:
            return "", stats
        pos, neg, pos_ok = (a[:n] for a in entries)
        arrays = [pos, array.array("i", bytes(4 * n)), neg, pos_ok]
        text = self._combined_text_arrays(chunk.chrom, arrays, bool(self.motif_bases))
        stats.rows = self._last_rows if text else 0
        return text, stats

    def pileup_chunk_core(self, chunk: Chunk) -> tuple[str, Stats] | None:
        """pileup_chunk through core.c; None where it leaves the chunk to Python (more
        mod codes than it holds, a repeated read name, an N fundamental base)."""
        stats = Stats()
        start, end = chunk.start, chunk.end
        length = end - start
        if length <= 0:
            return "", stats
        ctx = self.core
        # The C text writers read the tallies of allowed positions only (motif positions,
        # --include-bed): the core tallies those alone; the numpy rows (several motifs on
        # separate strands) read them all.
        text_in_c = self.combine_strands or len(self.motif_labels) < 2
        allowed, want = position_masks(chunk, length)
        ctx.want = ffi.from_buffer(want) if text_in_c and want is not None else ffi.NULL
        tallied = None
        if self.reader is not None:
            tallied = self.reader.tally(
                ctx, chunk, self.options.haplotype, self.list_reads, stats
            )  # fmt: skip
        if tallied is None:
            tallied = self.python.tally_pysam(chunk, stats)
            if tallied is None:
                return None
        if not tallied:
            return "", stats
        return self._core_text(chunk, length, stats, allowed)

    def _core_text(self, chunk: Chunk, length: int, stats: Stats, allowed) -> tuple[str, Stats]:
        """The bedMethyl text of the interval tallied in the core (allowed: position_masks')."""
        ctx = self.core
        lib.pu_observe(ctx)
        if not self.combine_strands and len(self.motif_labels) < 2:
            chrom = chunk.chrom.encode()
            cap = lib.pu_rows_bound(ctx, self.combine_mods) * (len(chrom) + 200) + len(chrom) + 201
            nrows = ffi.new("int64_t *")
            out = _raw_alloc("char[]", cap)
            size = lib.pu_text(
                ctx, chrom, ffi.from_buffer(allowed), self.base_mask, self.combine_mods,
                self.options.mixed_delim, out, cap, nrows,
            )  # fmt: skip
            if size < 0:
                raise RuntimeError("pileup_core: text buffer too small")
            stats.rows = nrows[0]
            return ffi.unpack(out, size).decode(), stats
        if self.combine_strands:
            text = self._combined_text_core(chunk, length, allowed, bool(self.motif_bases))
            stats.rows = self._last_rows if text else 0
            return text, stats
        return self.python.core_text(chunk, length, stats)  # several motifs, separate strands

    def _combined_text_core(self, chunk: Chunk, length: int, allowed, folded: bool) -> str:
        """--combine-strands text through core.c: 0.4.4's (combine_strand_rows' pairs:
        each + strand motif position with its motif's - strand position, when it has rows
        there), or with folded 0.6.1's (folded_rows: the - strand partner's tallies moved onto
        the + strand position, then its rows of the motif bases)."""
        start = chunk.start
        pos, idx, neg = array.array("q"), array.array("i"), array.array("q")
        pos_ok = array.array("B")
        for p in sorted(chunk.pos_motifs):
            for i in chunk.pos_motifs[p]:
                motif = self.motifs[i]
                other = p + motif.reverse_offset - motif.offset
                if not motif.palindrome or (other < 0 and not folded):
                    continue
                o = other - start
                if folded:
                    has_neg = 0 <= o < length and i in chunk.neg_ids.get(other, ())
                else:
                    has_neg = (
                        0 <= o < length and allowed[2 * o + 1] and i in chunk.neg_ids.get(other, ())
                    )
                pos.append(p - start)
                idx.append(i)
                neg.append(o if has_neg else -1)
                pos_ok.append(allowed[2 * (p - start)])
        if not pos:
            return ""
        return self._combined_text_arrays(chunk.chrom, [pos, idx, neg, pos_ok], folded)

    def _combined_text_arrays(self, chrom_name: str, arrays: list, folded: bool) -> str:
        """The combined writers' text of their entries (pos, idx, neg, pos_ok arrays)."""
        pos = arrays[0]
        labels = [ffi.new("char[]", label.encode()) for label in self.motif_labels]
        label_array = ffi.new("char *[]", labels)
        chrom = chrom_name.encode()
        longest = max((len(label) for label in self.motif_labels), default=0)
        cap = len(pos) * (lib.PU_MAXC + 4) * (len(chrom) + longest + 220) + 1
        out = _raw_alloc("char[]", cap)
        nrows = ffi.new("int64_t *")
        typed = [ffi.from_buffer(t, a) for t, a in zip(C_TYPES, arrays, strict=True)]
        if folded:
            size = lib.pu_text_folded(
                self.core, chrom, *typed, len(pos), label_array, len(labels), self.base_mask,
                self.combine_mods, out, cap, nrows,
            )  # fmt: skip
        else:
            size = lib.pu_text_combined(
                self.core, chrom, *typed, len(pos), label_array,
                len(labels), self.combine_mods, self.options.mixed_delim, out, cap, nrows,
            )  # fmt: skip
        if size < 0:
            raise RuntimeError("pileup_core: text buffer too small")
        self._last_rows = nrows[0]
        return ffi.unpack(out, size).decode()


_raw_alloc = ffi.new_allocator(should_clear_after_alloc=False) if ffi is not None else None


C_TYPES = ("int64_t[]", "int32_t[]", "int64_t[]", "uint8_t[]")  # pu_text_combined's arrays

# IUPAC letters as focus.c's letter sets (bit 0 A, 1 C, 2 G, 3 T, 4 U)
LETTER_BITS = {"A": 1, "C": 2, "G": 4, "T": 8, "U": 16}
COMPLEMENT_LETTER = {"A": "T", "C": "G", "G": "C", "T": "A", "U": "A"}


def motif_letter_sets(motif) -> tuple[bytes, bytes]:
    """focus.c's letter sets of a motif, forward and reverse complement, as make_motif's
    regexes match them."""
    sets = [IUPAC[c].strip("[]") for c in motif.raw]
    forward = bytes(sum(LETTER_BITS[x] for x in letters) for letters in sets)
    reverse = bytes(
        sum(LETTER_BITS[COMPLEMENT_LETTER[x]] for x in letters) for letters in reversed(sets)
    )
    return forward, reverse
