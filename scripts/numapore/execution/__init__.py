"""How a heavy step runs on a host.

topology (the machine's NUMA layout) -> hosts (host files: lookup, schema validation, the host
object, the check against the machine) -> advisor (strategy for `auto`) -> plan (the one plan
model: layout -> processes -> argv) -> launch (runs a plan, records the policy in force) with
tools (the unchanged tool command lines) and shards (split/merge); steps (the align and
call_methylation steps), probe (policies in force and the `python -m` CLI), cluster (what a
heavy step's Slurm job asks for).
"""
