"""Reading input: workloads, arrivals, siblings, traces."""
