"""modkit 0.6.1's commands beyond pileup, over modBAMs and bedMethyl files, on the pileup
engine's readers: one module per command (tobigwig, summary, sample_probs, stats, entropy, hemi,
extract, localize), their command-line plumbing in command.py, the sampled calls of a modBAM in
calls.py, and what entropy, pileup-hemi, extract-calls and localize share in positions.py."""
