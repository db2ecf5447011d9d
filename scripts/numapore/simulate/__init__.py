"""Simulated R9.4 reads with known CpG methylation (raw signal, basecalls, truth) from tombo's
pore model: the demo and the accuracy tests."""
