"""Live traffic: the OpenAI endpoint's gateway onto the live lane (through a narrow handle) and its Prometheus metrics."""
