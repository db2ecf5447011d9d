"""Methylation as tables: the motifs, the bedMethyl format, the cohort table, DMRs, and the
accuracy against a simulated truth (the pileup engine is numapore.pileup; what is made of
nanopolish's calls, numapore.nanopolish)."""
