"""What every browser test module shares: Debian's Chromium launched headless through Playwright, or a skip (a
failure under BATCH_LANES_REQUIRE_BROWSER=1, as in CI) when it or Playwright is missing; where screenshots go; a
browser context that records what went wrong on its pages; the canvas's pixels."""
import os
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlparse

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "artifacts"  # git-ignored
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
# the page's CSP violations, recorded from the first script on (Chromium also logs each one as a console error)
CSP_WATCH = ("window.__csp = []; document.addEventListener('securitypolicyviolation', "
             "(e) => window.__csp.push(`${e.violatedDirective} ${e.blockedURI}`));")


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


def watched_context(browser, console_location: bool = False, **context_options):
    """A new browser context (`context_options` as Playwright's `new_context` takes them) whose every page, new tabs
    too, records console errors and uncaught exceptions in `context.problems`, the host of every http(s) and
    websocket request in `context.hosts`, and CSP violations in its own `window.__csp` (CSP_WATCH).
    `console_location`: a console error also names the address it came from (`console: TEXT @ URL`)."""
    context = browser.new_context(**context_options)
    context.problems, context.hosts = [], set()
    context.add_init_script(CSP_WATCH)

    def console(m):
        if m.type == "error":
            where = f" @ {m.location.get('url', '')}" if console_location else ""
            context.problems.append(f"console: {m.text}{where}")

    def watch(page):
        page.on("console", console)
        page.on("pageerror", lambda e: context.problems.append(f"exception: {e}"))
        page.on("request", lambda r: urlparse(r.url).scheme in ("http", "https", "ws", "wss")
                and context.hosts.add(urlparse(r.url).hostname))
    context.on("page", watch)
    return context


def watched_page(context):
    """A new page of a `watched_context`, carrying its context's `problems` and `hosts` (tests read them off the page)."""
    page = context.new_page()
    page.problems, page.hosts = context.problems, context.hosts
    return page


def pixels(page, rect: dict) -> list[tuple[int, int, int]]:
    """Every device pixel of the main page's canvas (#lanes) in a rectangle given in CSS pixels, as (r, g, b)."""
    data = page.evaluate("""(r) => {
        const canvas = document.getElementById('lanes');
        const d = window.devicePixelRatio;
        const x = Math.round(r.x * d), y = Math.round(r.y * d);
        const w = Math.max(1, Math.round(r.w * d)), h = Math.max(1, Math.round(r.h * d));
        return Array.from(canvas.getContext('2d').getImageData(x, y, w, h).data);
    }""", rect)
    return [tuple(data[i:i + 3]) for i in range(0, len(data), 4)]


def rgb(hex_colour: str) -> tuple[int, int, int]:
    return tuple(int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))


def share(colour: tuple, seen: list[tuple], tolerance: int = 6) -> float:
    """Fraction of `seen` within `tolerance` of `colour` on every channel."""
    return sum(all(abs(a - b) <= tolerance for a, b in zip(colour, px)) for px in seen) / len(seen)
