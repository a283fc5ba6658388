"""Scale-out: web processes and engine workers over a real redis-server."""
