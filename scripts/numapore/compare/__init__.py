"""The strategy comparison: cells, their run and measurements, summary and recommendation, plots,
and the emulated slow storage it can read from."""
