"""An interval's BAM records read and tallied in C (bam_core.c, in the compiled pileup core):
BGZF inflated with libdeflate and each record parsed there, instead of a pysam record and its
tags, cigar and sequence per read in Python (the pysam loop took half of a pileup's time,
measured with py-spy). Where the C reader cannot open the BAM (no .bai beside it: a .csi, a
URL) or leaves an interval to Python (PU_DEFER), ChunkWorker reads it through pysam: the same
bytes either way."""

from __future__ import annotations

import os

from numapore.pileup.common import ffi, lib
from numapore.pileup.inputs import bai_path

# core.c's skip kinds and bam_core.c's (8, 9) by Stats' names (as get_mod_tags names them)
KINDS = {1: "missing", 2: "ml_short", 3: "mm", 4: "conflict", 5: "empty", 6: "implicit",
         8: "ml", 9: "mn"}  # fmt: skip


class BamReader:
    """bam_core.c's reader of one BAM (one per process)."""

    def __init__(self, handle):
        """A reader over an open pu_bam handle."""
        self.handle = handle

    @classmethod
    def open(cls, bam_path: str) -> BamReader | None:
        """The reader of bam_path, None where only pysam can read it."""
        index = bai_path(bam_path)
        if lib is None or index is None or not os.path.isfile(bam_path):
            return None
        handle = lib.pu_bam_open(bam_path.encode(), index.encode())
        if handle == ffi.NULL:
            return None
        return cls(ffi.gc(handle, lib.pu_bam_close))

    def any(self, tid: int, start: int, end: int) -> bool | None:
        """Whether a record overlaps [start, end) of tid (None: ask pysam)."""
        found = lib.pu_bam_any(self.handle, tid, start, end)
        return None if found < 0 else bool(found)

    def tally(self, ctx, chunk, haplotype: int | None, list_reads: bool, stats) -> bool | None:
        """Tally the interval's usable records into the core ctx (its want mask already set),
        their counts (and read listing) into stats: whether a read was tallied, None if Python
        must do the interval (stats then untouched)."""
        st = ffi.new("pu_stats *")
        try:
            hp_on = haplotype is not None
            rc = lib.pu_bam_chunk(ctx, self.handle, chunk.tid, chunk.start, chunk.end,
                                  bool(chunk.first), hp_on, haplotype if hp_on else 0,
                                  list_reads, st)  # fmt: skip
            if rc == lib.PU_DEFER:
                return None
            stats.used += st.used
            for i in range(st.norder):
                k = st.order[i]
                kind = KINDS[k]
                stats.skipped[kind] = stats.skipped.get(kind, 0) + st.skipped[k]
                example = ffi.string(st.example_name[k]), ffi.string(st.example_reason[k])
                stats.examples.setdefault(kind, tuple(v.decode() for v in example))
            if st.listing_len:
                stats.reads.append(ffi.unpack(st.listing, st.listing_len).decode())
            return bool(rc)
        finally:
            lib.pu_stats_free(st)

    def sample(self, core, tid, start, end, budget, only_mapped: bool, edge_on: bool) -> int | None:
        """One interval of the threshold estimate's sample (thresholds._process_records
        with the core), its values gathered in core and its names in seen_names(): the reads
        that gave values, None if pysam must sample the interval (nothing changed then)."""
        got = lib.pu_bam_sample(core, self.handle, tid, start, end,
                                -1 if budget is None else budget, only_mapped, edge_on)  # fmt: skip
        return None if got < 0 else got

    def seen_names(self) -> SeenNames:
        """The read names sampled so far, as a set for the pysam path."""
        return SeenNames(self.handle)


class SeenNames:
    """The threshold sample's read names, kept by bam_core.c (its sampler adds to them): `in`,
    add() and len() as a set's, for _process_records."""

    def __init__(self, handle):
        """The names of the pu_bam handle."""
        self.handle = handle

    def __contains__(self, name: str) -> bool:
        """Whether name was sampled."""
        return bool(lib.pu_bam_seen(self.handle, name.encode(), 0))

    def add(self, name: str) -> None:
        """Add name."""
        lib.pu_bam_seen(self.handle, name.encode(), 1)

    def __len__(self) -> int:
        """How many names."""
        return lib.pu_bam_seen(self.handle, ffi.NULL, 0)
