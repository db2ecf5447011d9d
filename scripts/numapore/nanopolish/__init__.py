"""What is made of nanopolish's calls: its call table's columns and probabilities (calls), the
per-site frequency table (frequency), and the modBAM of the alignments tagged with the calls
(modbam), with the compiled call-table core (calls_core) they use when it is built."""
