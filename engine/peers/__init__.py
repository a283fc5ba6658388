"""Peer engines beside ours: the vLLM lane (a real vLLM engine in its own process, stepped in lockstep)."""
