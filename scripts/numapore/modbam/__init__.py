"""Commands over modBAMs and bedMethyl beside the pileup engine, with modkit 0.6.1's options."""
