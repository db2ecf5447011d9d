"""Known differential methylation for the simulator: regions where one group of samples differs
(DMRs) and allele-specific regions (the two haplotypes differ), with their truth as BED.

Layout. The regions are laid out from `truth_seed` alone (with their number and length and the
window the reads come from), so every sample of a cohort simulated with the same settings has
the same regions whatever its own `seed`. The window (cfg.region, else the first contig) is cut
into equal slots, `group_regions + asm_regions` of them are drawn without replacement, and each
region sits at a random offset inside its slot: regions never touch, and at least half a slot
separates two of them (a DMR caller's merging distance is far smaller).

Levels. Inside a region every CpG has one of two methylated fractions, lo and lo + difference
(lo uniform in [0, 1 - difference] per region, from truth_seed): a DMR has the baseline level in
samples whose group does not differ and the other in those whose group does (`group_differs`);
which of the two is the baseline is drawn per region. An allele-specific region has one level on
haplotype 1 and the other on haplotype 2 (drawn per region). Outside them the fraction is the
simulator's smooth pattern (numapore.simulate.read_model.methylation_fraction), the same on both
haplotypes and in every group.

Haplotypes. With allele-specific regions or haplotags asked for, each molecule comes from
haplotype 1 or 2 (probability 1/2 each), and a share `haplotagged` of the reads carry HP (1 or 2)
and PS (one phase set over the window, numbered by its 1-based start as WhatsHap does) tags.

The truth BED (`regions.bed`): chrom, start, end (0-based, half-open), name (dmr1.., asm1..),
kind (dmr or asm), then this sample's fraction on haplotype 1 and on haplotype 2 (equal for a
DMR) and whether its group differs there (DMRs; 0 for allele-specific regions).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

KINDS = ("dmr", "asm")
TRUTH_BED_HEADER = "#chrom\tstart\tend\tname\tkind\thp1\thp2\tdiffers\n"


@dataclass(frozen=True)
class TruthRegion:
    """One region of known differential methylation."""

    chrom: str
    start: int
    end: int
    name: str
    kind: str  # dmr: groups differ; asm: haplotypes differ
    lo: float  # the lower of the two fractions
    hi: float  # lo + difference
    baseline_high: bool  # dmr: the non-differing group has hi; asm: haplotype 1 has hi

    def fractions(self, differs: bool) -> tuple[float, float]:
        """This region's methylated fraction on haplotypes 1 and 2 of a sample whose group
        differs (or not)."""
        if self.kind == "asm":
            return (self.hi, self.lo) if self.baseline_high else (self.lo, self.hi)
        level = self.hi if self.baseline_high != differs else self.lo
        return level, level


@dataclass(frozen=True)
class TruthSettings:
    """What the region layout depends on (numapore.simulate.read_model.SimConfig's truth fields)."""

    seed: int
    group_regions: int
    asm_regions: int
    length: int
    difference: float
    window: tuple[str, int, int]

    def check(self) -> None:
        """ValueError for settings that cannot be laid out."""
        if self.group_regions < 0 or self.asm_regions < 0:
            raise ValueError("the numbers of truth regions must be >= 0")
        if not 0 < self.difference <= 1:
            raise ValueError(f"truth difference must be in (0, 1], not {self.difference}")
        n = self.group_regions + self.asm_regions
        span = self.window[2] - self.window[1]
        if n and span // n < 2 * self.length:
            raise ValueError(
                f"{n} truth regions of {self.length} bases do not fit in {span} bases with a gap "
                f"as long as a region between them: fewer or shorter regions, or a larger window"
            )


@functools.cache
def layout(settings: TruthSettings) -> tuple[TruthRegion, ...]:
    """The regions, in window order (see the module docstring)."""
    settings.check()
    n = settings.group_regions + settings.asm_regions
    if not n:
        return ()
    rng = np.random.default_rng([settings.seed, 0x7275746])
    chrom, lo, hi = settings.window
    slot = (hi - lo) // n
    slots = np.sort(rng.choice(n, size=n, replace=False))  # all slots: one region each
    kinds = rng.permutation(["dmr"] * settings.group_regions + ["asm"] * settings.asm_regions)
    offsets = rng.integers(0, slot - settings.length - settings.length // 2 + 1, size=n)
    lows = rng.uniform(0.0, 1.0 - settings.difference, size=n)
    high_first = rng.random(n) < 0.5
    regions = []
    counts = {k: 0 for k in KINDS}
    for i in range(n):
        kind = str(kinds[i])
        counts[kind] += 1
        start = lo + int(slots[i]) * slot + settings.length // 4 + int(offsets[i])
        regions.append(
            TruthRegion(
                chrom,
                start,
                start + settings.length,
                f"{kind}{counts[kind]}",
                kind,
                round(float(lows[i]), 4),
                round(float(lows[i]) + settings.difference, 4),
                bool(high_first[i]),
            )
        )
    return tuple(regions)


def apply(
    regions: tuple[TruthRegion, ...],
    chrom: str,
    sites: np.ndarray,
    fractions: np.ndarray,
    haplotype: int,
    differs: bool,
) -> np.ndarray:
    """The fractions of CpGs at these forward C positions of one contig with the regions'
    levels where they fall in one, for a molecule of a haplotype (1 or 2; 0: none, then
    haplotype 1's level) of a sample whose group differs (or not)."""
    out = fractions
    for region in regions:
        if region.chrom != chrom:
            continue
        a, b = np.searchsorted(sites, [region.start, region.end])
        if a < b:
            if out is fractions:
                out = fractions.copy()
            out[a:b] = region.fractions(differs)[1 if haplotype == 2 else 0]
    return out


def truth_bed(regions: tuple[TruthRegion, ...], differs: bool) -> str:
    """The truth BED of a sample (header line first)."""
    rows = []
    for r in regions:
        hp1, hp2 = r.fractions(differs)
        changed = int(differs) if r.kind == "dmr" else 0
        rows.append(f"{r.chrom}\t{r.start}\t{r.end}\t{r.name}\t{r.kind}\t{hp1}\t{hp2}\t{changed}\n")
    return TRUTH_BED_HEADER + "".join(rows)
