"""What every part of the pileup engine shares: the compiled core (core.c, or None),
base codes, the errors, and the options (named as modkit's; Options.compat picks modkit 0.6.1's
semantics or 0.4.4's). No numpy or pysam here or on the compiled core's route (a BAM with a .bai,
a FASTA with a .fai): their imports are half of a small pileup's memory; the modules of the
Python paths (tags, counting_python, sampling, modified_bases) import them."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from numapore.base import compiled
from numapore.methylation.bedmethyl import f32

_core = compiled.load("numapore.pileup._pileup_core")  # None: numpy, the same bytes


ffi, lib = (_core.ffi, _core.lib) if _core is not None else (None, None)


ENABLED = lib is not None  # tests switch the compiled core off to compare both paths


BASES = "ACGT"


BASE_INDEX = {b: i for i, b in enumerate(BASES)}


COMPLEMENT_BYTES = bytes.maketrans(
    b"ACGTNacgtnRYKMSWBDHVrykmswbdhv", b"TGCANtgcanYRMKSWVHDByrmkswvhdb"
)


NO_CALL, FILTERED, CANONICAL = -2, -1, 0  # a read position's call; k + 1 is mod code k


FX_K = 0x517CC1B727220A95  # rustc-hash 1.1's FxHasher multiplier


MASK64 = (1 << 64) - 1


MAX_PROB = f32(1.01)


DEFAULT_INTERVAL = 100_000


SAMPLING_INTERVAL = 1_000_000


WORK_SIZE = 100_000  # the most reference bases tallied at once when motifs allow it


@dataclass
class Stats:
    """Counts for the summary line."""

    used: int = 0
    skipped: dict = field(default_factory=dict)
    rows: int = 0
    examples: dict = field(default_factory=dict)  # kind -> (read name, reason)
    # A chunk's lines of the read listing (ChunkWorker.list_reads), written as they come
    reads: list = field(default_factory=list)

    def add(self, other: Stats) -> None:
        """Add another chunk's counts (not its read listing)."""
        self.used += other.used
        self.rows += other.rows
        for k, v in other.skipped.items():
            self.skipped[k] = self.skipped.get(k, 0) + v
        for k, v in other.examples.items():
            self.examples.setdefault(k, v)


class PileupError(Exception):
    """Bad input: the message names the file (and read) and the reason, on one line."""


class ReadError(Exception):
    """A read modkit skips; kind says why (missing, ml_short, mm, mn, implicit, conflict...)."""

    def __init__(self, kind: str, message: str):
        """The skip kind and its one-line message."""
        super().__init__(message)
        self.kind = kind


NOT_PRIMARY_MAPPED = 0x4 | 0x100 | 0x800  # unmapped, secondary, supplementary


@dataclass
class Options:
    """The pileup's settings, named as modkit's options."""

    interval_size: int = DEFAULT_INTERVAL
    filter_threshold: list[str] | None = None
    mod_thresholds: list[str] | None = None
    no_filtering: bool = False
    filter_percentile: float = 0.1
    num_reads: int = 10_042
    sampling_frac: float | None = None
    seed: int | None = None
    sampling_interval_size: int = SAMPLING_INTERVAL
    include_unmapped: bool = False
    region: str | None = None
    sample_region: str | None = None
    include_bed: str | None = None
    ignore: str | None = None
    combine_mods: bool = False
    combine_strands: bool = False
    preset: str | None = None
    motifs: list[tuple[str, int]] = field(default_factory=list)
    cpg: bool = False
    reference: str | None = None
    mask: bool = False
    edge_filter: str | None = None
    invert_edge_filter: bool = False
    force_allow_implicit: bool = False
    mixed_delim: bool = False
    with_header: bool = False
    threads: int = 1
    compat: str = "0.6"  # whose semantics: modkit 0.6.1's or (with "0.4") 0.4.4's
    sampling_threads: int | None = None  # 0.6's --sampling-threads
    haplotype: int | None = None  # count only records with this HP tag (--phased's files)
    max_depth: int | None = None  # 0.6's --high-depth --max-depth: reads counted per position
    modified_bases: list[str] | None = None  # 0.6's --modified-bases (5mC 5hmC 6mA ...)

    def sampler_threads(self) -> int:
        """The thread count whose batches the threshold sampler follows: --sampling-threads,
        else modkit 0.6's default 4 (so --threads never changes the bytes), or --threads with
        0.4.4's semantics (as 0.4.4 does)."""
        if self.sampling_threads:
            return self.sampling_threads
        return 4 if self.modern else self.threads

    @property
    def modern(self) -> bool:
        """Whether modkit 0.6.1's semantics apply (not 0.4.4's)."""
        return self.compat != "0.4"

    @property
    def reads_implicit(self) -> bool:
        """Whether an MM entry without a mode ('.' or '?') is read as implicit, as the SAM
        specification and modkit 0.6.1 read it; modkit 0.4.4 skips such a read unless
        --force-allow-implicit."""
        return self.modern or self.force_allow_implicit

    def numeric(self) -> tuple[str | None, bool, bool]:
        """(code to ignore, combine mods, combine strands) after --preset traditional."""
        if self.preset == "traditional":
            return "h", False, True
        return self.ignore, self.combine_mods, self.combine_strands

    def motif_list(self) -> list[tuple[str, int]]:
        """The motifs asked for (--cpg adds CG 0; traditional is CG 0); none with 0.6's
        --modified-bases, whose counter finds its own positions."""
        if self.modern and self.modified_bases:
            return []
        if self.preset == "traditional":
            return [("CG", 0)]
        motifs = list(self.motifs)
        if self.cpg and ("CG", 0) not in motifs:
            motifs.append(("CG", 0))
        return motifs

    def edge(self) -> tuple[int, int, bool] | None:
        """--edge-filter as (start trim, end trim, inverted)."""
        if self.edge_filter is None:
            return None
        parts = self.edge_filter.split(",")
        try:
            if len(parts) == 1:
                return int(parts[0]), int(parts[0]), self.invert_edge_filter
            if len(parts) == 2:
                return int(parts[0]), int(parts[1]), self.invert_edge_filter
        except ValueError:
            pass
        raise PileupError(f"illegal --edge-filter {self.edge_filter!r}, should be N or N,M")


def eprint(message: str) -> None:
    """One line on stderr."""
    print(message, file=sys.stderr)
