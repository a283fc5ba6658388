"""What every browser test module shares: Debian's Chromium launched headless through Playwright, or a skip (a
failure under BATCH_LANES_REQUIRE_BROWSER=1, as in CI) when it or Playwright is missing; where screenshots go."""
import os
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "artifacts"  # git-ignored
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]


def need(condition: bool, reason: str) -> None:
    if condition:
        return
    if os.environ.get("BATCH_LANES_REQUIRE_BROWSER") == "1":
        pytest.fail(f"{reason} (BATCH_LANES_REQUIRE_BROWSER=1)")
    pytest.skip(reason)


@contextmanager
def chromium():
    """A headless Chromium browser (Playwright), closed on exit."""
    need(Path(CHROMIUM).exists(), f"{CHROMIUM} is missing: install Debian's chromium (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        need(False, "the playwright package is not installed (pip install -r requirements-dev.txt)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()
