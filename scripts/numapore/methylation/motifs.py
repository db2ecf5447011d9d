"""The motifs nanopolish calls (`call-methylation -q`): pattern, modified base, SAM/bedMethyl code.

A new motif is one entry of MOTIFS: the rules, the frequency, bedMethyl and modBAM writers all
take it from here.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Motif:
    """A motif nanopolish calls (`-q name`): its pattern and where its modified base sits.

    nanopolish reports every call on the forward strand, `start` at the motif's first base.
    forward_offset: the modified base of the forward strand, from `start`; reverse_offset: the
    forward-strand position of the reverse strand's modified base (the complement of what a
    reverse-strand read carries there).
    """

    name: str
    pattern: str  # a regular expression on the forward strand
    base: str  # the canonical base that carries the modification (SAM MM)
    code: str  # the SAM MM / bedMethyl modification code
    forward_offset: int
    reverse_offset: int

    def sites(self, sequence: str | bytes) -> list[int]:
        """Offsets of every (possibly overlapping) motif in sequence (text, or bytes: offsets
        in bytes), from its first one."""
        pattern = f"(?={self.pattern})"
        hits = [
            m.start()
            for m in re.finditer(
                pattern.encode() if isinstance(sequence, bytes) else pattern, sequence
            )
        ]
        return [h - hits[0] for h in hits]

    @property
    def literals(self) -> list[str]:
        """Every sequence the pattern matches (its [..] classes expanded), for polars' search."""
        tokens = re.findall(r"\[([A-Z]+)\]|([A-Z])", self.pattern)
        return ["".join(p) for p in itertools.product(*[c or b for c, b in tokens])]


# nanopolish 0.14's -q values. CpG: 5mC on both Cs of CG; GpC (NOMe-seq): the C of GC; dam: 6mA
# of GATC; dcm: 5mC on the second C of CCWGG.
MOTIFS = {
    m.name: m
    for m in [
        Motif("cpg", "CG", "C", "m", 0, 1),
        Motif("gpc", "GC", "C", "m", 1, 0),
        Motif("dam", "GATC", "A", "a", 1, 2),
        Motif("dcm", "CC[AT]GG", "C", "m", 1, 3),
    ]
}
