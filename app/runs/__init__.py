"""The run service: jobs, the run book (an interface, in memory or in Redis), fan-out, the store, and the engine
worker that drives every job kind through one loop."""
