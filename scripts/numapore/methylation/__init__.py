"""What is made of nanopolish's calls: motifs, per-site frequency, bedMethyl, modBAM tags and the
accuracy against a simulated truth."""
