"""How a heavy step runs on a host: NUMA topology, host files, the advisor, the plan (layout ->
processes -> argv), the launcher, the tool command lines, scatter/gather and cluster requests."""
