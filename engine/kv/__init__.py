"""Remembering: the KV block manager and the prefix cache, as bookkeeping (block tables, hashes, reference counts): no tensors."""
