"""Reporting, on top of every domain: the run report's figures and tables, the read accounting,
and the strategy comparison's report and plots."""
