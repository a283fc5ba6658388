"""The server: HTTP, sockets, the OpenAI endpoint, runs and their store."""
