"""modkit 0.6.1's commands beyond pileup, over modBAMs and bedMethyl files, on the pileup
engine's readers: one module per command (tobigwig, summary, sample_probs, stats, ...), their
command-line plumbing in command.py and the sampled calls of a modBAM in calls.py."""
