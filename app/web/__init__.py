"""The web wing: the application factory, HTTP routes, Socket.IO handlers, the OpenAI endpoint and rate limits.
It never imports torch (tests/app/test_app_imports.py); in one process the factory wires in the engine worker."""
