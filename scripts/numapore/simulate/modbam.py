"""Basecaller-style modification calls (R10.4.1, dorado-like): MM/ML tags from a methylation truth,
written as an unaligned modBAM with pysam.

Noise model. A basecaller reports, for each CpG C of a read, the probability p that it is 5mC.
Here p is calibrated by construction: its log-odds is drawn as

    logit(p) ~ Normal(+sharpness^2 / 2, sharpness)   when the C is methylated,
    logit(p) ~ Normal(-sharpness^2 / 2, sharpness)   when it is not,

which makes P(methylated | p) = p exactly for a sample with half its CpGs methylated (the
likelihood ratio of a log-odds x between the two normals is e^x): the basecaller's model is
calibrated on balanced training data, as dorado's is. One parameter sets how informative calls
are: at sharpness s, a call at p = 0.5 is right with probability Phi(s / 2) (0.96 at the default
3.5) and the per-call ROC AUC is Phi(s / sqrt 2) (0.993). A C of a CpG that the basecalling
errors made (not a CpG of the molecule) is drawn as unmethylated.

Missing calls and modes. In explicit mode (`C+m?`, dorado's), a C without a call has no
information: each CpG call is dropped with probability `missing` (default 0.02). In implicit
mode (`C+m.`) a C without a call means canonical, so nothing can go missing: only the calls whose
ML byte is 0 (p < 1/256) are left out, which says the same thing in fewer bytes.

5hmC (`codes` hm; default m: 5mC only). The molecules hold no 5hmC, so a 5hmC call is noise: its
probability is a share of what 5mC leaves, (1 - p) x sigmoid(Normal(-3, 1)) (about 5 %), on the
same Cs as the 5mC calls. The tags are then `C+h?...;C+m?...;` with ML holding the 5hmC bytes
first, as dorado writes them. No 6mA.

ML bytes are floor(256 p) capped at 255 (the SAM tags specification's bins [N/256, (N+1)/256)).
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass

import numpy as np
import pysam

MODES = ("?", ".")
CODES = ("m", "hm")  # 5mC; 5hmC and 5mC (in MM's order)
HMC_LOG_ODDS = -3.0  # mean log-odds of the 5hmC share of what 5mC leaves (sd 1)
_C = 1  # the code of C in 0-3 (ACGT) codes
_G = 2


@dataclass(frozen=True)
class ModCallModel:
    """The noise model of the simulated basecaller's 5mC calls (see the module docstring)."""

    sharpness: float = 3.5  # sd of a call's log-odds; mean +-sharpness^2/2 by true state
    missing: float = 0.02  # explicit mode: probability that a CpG has no call
    mode: str = "?"  # '?' explicit (dorado's C+m?), '.' implicit (C+m.: no call = canonical)
    codes: str = "m"  # m: 5mC; hm: 5hmC (noise: the molecules have none) and 5mC

    def check(self) -> None:
        """ValueError for a parameter out of range."""
        if self.codes not in CODES:
            raise ValueError(f"modification codes must be one of {CODES}, not {self.codes!r}")
        if self.mode not in MODES:
            raise ValueError(f"modification mode must be one of {MODES}, not {self.mode!r}")
        if not self.sharpness > 0:
            raise ValueError(f"modification call sharpness must be > 0, not {self.sharpness}")
        if not 0 <= self.missing < 1:
            raise ValueError(f"missing-call rate must be in [0, 1), not {self.missing}")


def call_probabilities(
    rng: np.random.Generator, methylated: np.ndarray, sharpness: float
) -> np.ndarray:
    """Calibrated 5mC probabilities of calls whose true states are `methylated`."""
    mean = np.where(methylated, 0.5, -0.5) * sharpness**2
    log_odds = mean + sharpness * rng.standard_normal(methylated.size)
    return 1.0 / (1.0 + np.exp(-log_odds))


def ml_bytes(p: np.ndarray) -> np.ndarray:
    """ML tag bytes of probabilities: floor(256 p), at most 255."""
    return np.minimum(np.floor(p * 256.0), 255).astype(np.uint8)


def cpg_calls(
    rng: np.random.Generator,
    called: np.ndarray,
    methylated_at: np.ndarray,
    model: ModCallModel,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The calls of a read: its CpG Cs that carry a call (indices into `called`, the read's
    codes as written), their 5mC ML bytes and their 5hmC ML bytes (empty with codes m).
    methylated_at marks the read's truly methylated Cs."""
    sites = np.flatnonzero((called[:-1] == _C) & (called[1:] == _G))
    p = call_probabilities(rng, methylated_at[sites], model.sharpness)
    ml = ml_bytes(p)
    ml_h = np.zeros(0, dtype=np.uint8)
    if "h" in model.codes:
        share = 1.0 / (1.0 + np.exp(-(HMC_LOG_ODDS + rng.standard_normal(sites.size))))
        ml_h = ml_bytes((1.0 - p) * share)
    if model.mode == "?":
        keep = rng.random(sites.size) >= model.missing
    else:
        keep = (ml > 0) | (ml_h > 0) if ml_h.size else ml > 0
    return sites[keep], ml[keep], ml_h[keep] if ml_h.size else ml_h


def mm_tag(called: np.ndarray, sites: np.ndarray, mode: str, codes: str = "m") -> str:
    """The MM tag of calls of each code (in order) at these C indices of a read's codes: per
    call, how many Cs are skipped since the previous one (SAM tags specification)."""
    c_rank = np.cumsum(called == _C) - 1  # the rank of each C among the read's Cs
    ranks = c_rank[sites]
    deltas = "".join(f",{d}" for d in (np.diff(ranks, prepend=-1) - 1).tolist())
    return "".join(f"C+{code}{mode}{deltas};" for code in codes)


@dataclass
class ModRead:
    """One unaligned modBAM record: sequence and qualities as sequenced, its MM/ML tags."""

    read_id: str
    sequence: str
    quality: str
    mm: str
    ml: np.ndarray  # uint8, one per call: 5mC
    ml_h: np.ndarray  # uint8, one per call: 5hmC (empty when only 5mC is called)
    call_positions: np.ndarray  # read positions of the calls (in MM's order)
    call_truth: np.ndarray  # bool per call: the C is methylated in the molecule
    haplotype: int = 0  # its HP tag (1 or 2; 0: untagged)
    phase_set: int = 0  # its PS tag when tagged


def modbam_record(read: ModRead, header: pysam.AlignmentHeader) -> pysam.AlignedSegment:
    """One read as an unmapped record with its modification tags."""
    rec = pysam.AlignedSegment(header)
    rec.query_name = read.read_id
    rec.flag = 4
    rec.query_sequence = read.sequence
    rec.query_qualities = pysam.qualitystring_to_array(read.quality)
    rec.set_tag("MM", read.mm, "Z")
    rec.set_tag("ML", array("B", read.ml_h.tobytes() + read.ml.tobytes()))  # MM's order
    rec.set_tag("MN", len(read.sequence), "i")
    if read.haplotype:  # as WhatsHap haplotag writes them
        rec.set_tag("HP", read.haplotype, "i")
        rec.set_tag("PS", read.phase_set, "i")
    return rec
