"""Reading input: workloads as JSON, the limits they are checked against, arrival processes, parallel-sampling
siblings, production traces, the SLO a workload's requests are held to."""
