"""What the tests share and import (never from each other): reference outputs, the tiny model, socket probes,
live servers, browsers, scale-out deployments and a failover proxy. Fixtures stay in tests/conftest.py."""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository: tests name every file from here, wherever they sit
