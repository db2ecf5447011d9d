"""Raw signal: FAST5 reading, SLOW5/BLOW5 writing, the FAST5 -> BLOW5 converter, POD5 and BLOW5
inputs, and the VBZ filter plugin nanopolish's HDF5 needs."""
