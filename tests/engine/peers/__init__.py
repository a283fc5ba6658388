"""The vLLM lane."""
