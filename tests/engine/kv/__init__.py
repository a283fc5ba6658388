"""Remembering: the block manager and the prefix cache."""
