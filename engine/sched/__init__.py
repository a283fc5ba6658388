"""Deciding: the scheduler, the batching policies, admission orders, the step plan and output, speculation's proposals."""
