"""What the tests share and import (never from each other): reference outputs, the tiny model, socket probes,
live servers, browsers, scale-out deployments and a failover proxy. Fixtures stay in tests/conftest.py."""
