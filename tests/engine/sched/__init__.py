"""Deciding: slot states, chunking, preemption, admission, wait reasons, speculation."""
