"""The pileup engine, `numapore pileup`: a modBAM to bedMethyl, byte for byte as modkit 0.6.1's
(or 0.4.4's) `modkit pileup` writes it, laid out as modkit's own src/pileup/. engine runs it
(engine.pileup); cli is its command line and output writer; settings turns the workflow's
`pileup:` settings into its options; the other modules are its parts (engine's docstring lists
them), and the compiled core's C (core.c and its parts, the BAM reader bam_core.c and
bam_records.c, one motif's positions focus.c) builds through core_build.py."""
