"""The run's plan and the results' layout, for the Snakemake workflow (workflow/): every decision
of a run made once from its config, sample sheet and host file (plan, tuning_plans), each job's
inputs (jobs), what a run makes and says (outputs, closing), and where every file goes (layout).
"""
