"""numapore: nanopore and short reads to alignments and methylation on NUMA hosts."""

__version__ = "0.11.0"
