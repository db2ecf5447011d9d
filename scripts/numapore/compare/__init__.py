"""The strategy comparison: a matrix of benchmark cells, each one heavy step run once with one
strategy, I/O mode and thread count, and what is made of their measurements.

- cells: what a cell is, its name, the matrix in run order, a cell's host settings (DAG time);
- run: one cell run in a process of its own under /usr/bin/time -v (rule compare_cell);
- measure: a cell's raw files (run record, time -v, benchmark) parsed into its summary row;
- summary: the summary table (medians, speed-ups, strategies identical to none), summary.tsv;
- recommend: the configuration to adopt per step, recommended-host.yaml;
- report: report.md (pivot tables, what can be compared); plots: its PNG plots;
- subsample: the first N reads of the compared sample and their alignments;
- slowfs: emulated slow storage (FUSE) the methylation cells read the raw signal through;
- tuning: host tuning (config tune): the I/O modes measured on a slice of the user's sample
  before a run, decided by recommend's rule, cached per host (rules/tune.smk).
"""
