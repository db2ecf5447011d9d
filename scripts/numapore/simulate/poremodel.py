"""R9.4 DNA 6-mer pore model in picoamperes, built from Debian tombo's model files.

tombo ships `tombo.DNA.model` (HDF5 table `model` of kmer/mean/sd, 4096 6-mers, levels in
tombo's median/MAD-normalised units, attribute central_pos=2) and `tombo.DNA.CpG.model` (an
alternative model: one row per (6-mer, pos) where `pos` is the 0-based index inside the 6-mer of a
C that is the C of a CpG motif, or a C in the last position whose G lies beyond the 6-mer, and
`mean` is the level when that single C is 5-methylated; 2,304 rows).

Conventions, checked against nanopolish's r9.4_450bps 6-mer model: k-mers are written 5'->3' on
the sequenced strand, in the same orientation as nanopolish's (tombo level of the same string
correlates 0.999 with nanopolish's, the reversed or reverse-complemented string does not), and a
DNA read's signal is in 5'->3' order of its own sequence, one level per 6-mer window. The affine
map pA = 9.31 x level + 91.43 puts tombo's levels on nanopolish's pA scale (RMS 0.65 pA).
A 6-mer with several methylated Cs gets the sum of the single-C shifts (tombo only models one
modified C per 6-mer; additivity is our assumption).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import h5py
import numpy as np

TOMBO_MODEL_DIR = Path("/usr/lib/python3/dist-packages/tombo/tombo_models")
STANDARD_MODEL = TOMBO_MODEL_DIR / "tombo.DNA.model"
CPG_MODEL = TOMBO_MODEL_DIR / "tombo.DNA.CpG.model"
# Fitted here: tombo normalised level -> nanopolish R9.4 pA (r = 0.9987).
PA_SCALE = 9.31
PA_SHIFT = 91.43
K = 6
BASES = "ACGT"

# Byte -> 2-bit code; anything that is not ACGT maps to 4 so callers can find and replace it.
_CODE = np.full(256, 4, dtype=np.uint8)
for _i, _b in enumerate(BASES):
    _CODE[ord(_b)] = _i
    _CODE[ord(_b.lower())] = _i


@dataclass(frozen=True)
class PoreModel:
    """6-mer levels and noise in pA, plus per-position CpG methylation shifts in pA."""

    levels: np.ndarray  # (4096,) float64, index = lexicographic 6-mer rank (AAAAAA = 0)
    sd: np.ndarray  # (4096,) float64
    cpg_shift: np.ndarray  # (4096, 6) float64: level change when the C at that position is 5mC
    k: int = K

    def kmer_indices(self, codes: np.ndarray) -> np.ndarray:
        """Return the lexicographic index of every 6-mer window of a 2-bit coded sequence."""
        return kmer_indices(codes, self.k)

    def levels_for(
        self,
        codes: np.ndarray,
        methylated: np.ndarray | None = None,
        idx: np.ndarray | None = None,
    ) -> np.ndarray:
        """Return each 6-mer window's mean pA (new array), with 5mC shifts; idx: kmer_indices."""
        if idx is None:
            idx = self.kmer_indices(codes)
        mean = self.levels[idx]  # fancy indexing copies: safe to modify
        if methylated is not None and methylated.any():
            n = idx.size
            for p in range(self.k):
                hit = methylated[p : p + n]
                if hit.any():
                    mean[hit] += self.cpg_shift[idx[hit], p]
        return mean


def encode(seq: str | bytes) -> np.ndarray:
    """Return the 2-bit codes (A=0, C=1, G=2, T=3, other=4) of a sequence as uint8."""
    raw = seq.encode("ascii") if isinstance(seq, str) else seq
    return _CODE[np.frombuffer(raw, dtype=np.uint8)]


def kmer_index(kmer: str) -> int:
    """Return the lexicographic rank of one k-mer (AAAAAA = 0, TTTTTT = 4**k - 1)."""
    return int(kmer_indices(encode(kmer), len(kmer))[0])


def kmer_indices(codes: np.ndarray, k: int = K) -> np.ndarray:
    """Return the lexicographic index of every k-mer window (length len(codes) - k + 1)."""
    n = codes.size - k + 1
    if n <= 0:
        return np.zeros(0, dtype=np.int64)
    c = codes.astype(np.int64)
    idx = np.zeros(n, dtype=np.int64)
    for j in range(k):
        idx = idx * 4 + c[j : j + n]
    return idx


def _table_indices(kmers: np.ndarray) -> np.ndarray:
    """Return the lexicographic index of each k-mer of an HDF5 'S6' column."""
    codes = encode(np.ascontiguousarray(kmers, dtype=f"S{K}").tobytes()).reshape(-1, K)
    if (codes > 3).any():
        raise ValueError("pore model k-mers must be ACGT only")
    return codes.astype(np.int64) @ (4 ** np.arange(K - 1, -1, -1))


def load_pore_model(
    standard_path: Path = STANDARD_MODEL,
    cpg_path: Path | None = CPG_MODEL,
    scale: float = PA_SCALE,
    shift: float = PA_SHIFT,
) -> PoreModel:
    """Read tombo's standard (and optionally CpG) DNA models and convert them to pA."""
    with h5py.File(standard_path, "r") as h:
        table = h["model"][:]
        central = int(h.attrs.get("central_pos", 2))
    if central != 2 or len(table) != 4**K:
        raise ValueError(f"{standard_path}: expected a 6-mer DNA model, central_pos 2")
    idx = _table_indices(table["kmer"])
    levels = np.empty(4**K)
    sd = np.empty(4**K)
    levels[idx] = table["mean"] * scale + shift
    sd[idx] = table["sd"] * scale
    cpg_shift = np.zeros((4**K, K))
    if cpg_path is not None:
        with h5py.File(cpg_path, "r") as h:
            alt = h["model"][:]
            motif = h.attrs.get("motif", "CG")
            alt_base = h.attrs.get("alt_base", "C")
        if motif not in ("CG", b"CG") or alt_base not in ("C", b"C"):
            raise ValueError(f"{cpg_path}: expected a CpG model (motif CG, alt_base C)")
        aidx = _table_indices(alt["kmer"])
        pos = alt["pos"].astype(np.int64)
        # Shift relative to the canonical level of the same 6-mer, in pA.
        cpg_shift[aidx, pos] = (alt["mean"] * scale + shift) - levels[aidx]
    return PoreModel(levels=levels, sd=sd, cpg_shift=cpg_shift)
