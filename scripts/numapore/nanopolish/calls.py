"""nanopolish's call table: its columns, and a call's log-likelihood ratio as a SAM ML byte.

Apart from the frequency module (polars, DuckDB, pyarrow) so that the modBAM job, which needs
only these, starts without importing them.
"""

from __future__ import annotations

import math

CALL_COLUMNS = [
    "chromosome",
    "strand",
    "start",
    "end",
    "read_name",
    "log_lik_ratio",
    "log_lik_methylated",
    "log_lik_unmethylated",
    "num_calling_strands",
    "num_motifs",
    "sequence",
]


def llr_probability(llr: float) -> float:
    """The posterior probability of a modification at even prior odds: 1 / (1 + e^-LLR)."""
    return 0.5 * (1 + math.tanh(llr / 2))  # = logistic(llr), without overflow


def llr_to_ml(llr: float) -> int:
    """The SAM ML byte of a call: p = 1 / (1 + e^-LLR) (the posterior at even prior odds),
    N = ceil(256 p) - 1, the bin (N/256, (N+1)/256] holding p; N >= 128 exactly when LLR > 0."""
    p = llr_probability(llr)
    n = min(255, max(0, math.ceil(256 * p) - 1))
    return max(n, 128) if llr > 0 else min(n, 127)
