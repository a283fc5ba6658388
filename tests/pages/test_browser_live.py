"""The Live view (/live) in headless Debian Chromium, driven by Playwright, against `python -m app` with the real
model and traffic from the official `openai` client: concurrent streamed chat requests appear on the page with
exactly the text the API returned, the figures count them, the canvas draws their cells, the waits and the KV use on
the lane clock, Pause freezes the window, a second viewer sees the same, and Capture -> Open on the main page replays
the captured requests there on the static, dynamic and continuous lanes.

One server per module. Every wait is on state the page exposes (`window.__live`, `window.__lanes`), never a sleep.
Without /usr/bin/chromium these tests skip, unless BATCH_LANES_REQUIRE_BROWSER=1 (CI), where they fail.
A screenshot (artifacts/live.png; docs/live.png is one of them) is taken while the second wave of traffic streams.
"""
from concurrent.futures import Future, ThreadPoolExecutor
from urllib.parse import urlparse

import pytest

from tests.kit.browser import ARTIFACTS, ROOT, pixels, rgb, share, watched_context, watched_page
from tests.kit.server import live_server

pytestmark = [pytest.mark.browser, pytest.mark.model]

MAX_TOKENS = 24
LANES = ["static", "dynamic", "continuous"]
RUN_TIMEOUT_MS = 300_000  # the captured mix on three lanes, on a busy 2-core machine


@pytest.fixture(scope="module")
def server(browser, tmp_path_factory):
    assert (ROOT / "static" / "vendor" / "socket.io.min.js").is_file(), "static/vendor is missing: run `make setup`"
    with live_server(data_dir=tmp_path_factory.mktemp("data")) as url:
        yield url


@pytest.fixture
def context(browser, server):
    ctx = watched_context(browser, viewport={"width": 1280, "height": 900})
    yield ctx
    ctx.close()


def send_chats(url: str, prompts: list[str]) -> dict[str, Future]:
    """One streamed greedy chat completion per prompt, all at once (a thread each): prompt -> future of its text."""
    from openai import OpenAI
    client = OpenAI(base_url=f"{url}/v1", api_key="not-checked")
    model = client.models.list().data[0].id

    def stream(prompt: str) -> str:
        chunks = client.chat.completions.create(model=model, messages=[{"role": "user", "content": prompt}],
                                                max_tokens=MAX_TOKENS, temperature=0, stream=True)
        return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    pool = ThreadPoolExecutor(len(prompts))
    futures = {p: pool.submit(stream, p) for p in prompts}
    pool.shutdown(wait=False)
    return futures


def texts(futures: dict[str, Future]) -> dict[str, str]:
    return {p: f.result(timeout=120) for p, f in futures.items()}


def live(page, expression: str):
    return page.evaluate(f"() => window.__live.{expression}")


def open_live(page, url: str) -> None:
    page.goto(f"{url}/live")
    page.wait_for_function("() => window.__live && window.__live.connected && window.__live.lane "
                           "&& window.__live.lane.ready")


def wait_finished(page, prompts) -> dict[str, dict]:
    """The page's rows of `prompts` (by prompt) once it shows every one finished."""
    page.wait_for_function("(ps) => ps.every((p) => window.__live.requests.some((q) => q.prompt === p "
                           "&& q.status === 'finished'))", arg=list(prompts))
    return {q["prompt"]: q for q in live(page, "requests") if q["prompt"] in prompts}


def no_problems(page, context) -> None:
    assert page.evaluate("() => window.__csp") == []
    assert context.problems == []
    assert context.hosts == {"127.0.0.1"}


def colour_share(page, rect: dict, colour: str, inset: float = 3) -> float:
    r = {"x": rect["x"] + inset, "y": rect["y"] + inset, "w": rect["w"] - 2 * inset, "h": rect["h"] - 2 * inset}
    return share(rgb(colour), pixels(page, r))


# Each figure's text (a range over its <dd>) and box, per figures panel; and whether the page scrolls sideways.
FIGURE_BOXES = """() => ({sideways: document.documentElement.scrollWidth > window.innerWidth,
  panels: [...document.querySelectorAll('dl.figures')].map((dl) => [...dl.children].map((d) => {
    const range = document.createRange(); range.selectNodeContents(d.querySelector('dd'));
    const b = d.getBoundingClientRect();
    return {box: [b.left, b.top, b.right, b.bottom], text_right: range.getBoundingClientRect().right}; }))})"""


def figures_laid_out(page, width: int) -> bool:
    """At `width` px, every figure's text stays inside its box, no two boxes overlap, nothing scrolls sideways."""
    page.set_viewport_size({"width": width, "height": 900})
    page.wait_for_function("(w) => window.innerWidth === w", arg=width)
    found = page.evaluate(FIGURE_BOXES)
    boxes = [f["box"] for panel in found["panels"] for f in panel]
    inside = all(f["text_right"] <= f["box"][2] + 0.5 for panel in found["panels"] for f in panel)
    apart = all(a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1]
                for i, a in enumerate(boxes) for b in boxes[i + 1:])
    return inside and apart and not found["sideways"]


def test_streamed_openai_requests_show_with_their_text_figures_cells_and_waits_and_pause_freezes(context, server):
    page = watched_page(context)
    open_live(page, server)
    # 1) no traffic yet: the page says how to send some, and that there is nothing to capture
    assert live(page, "empty") and live(page, "records") == 0
    assert f"OPENAI_BASE_URL={server}/v1" in page.text_content("#env-line")
    assert page.text_content("#curl-line").startswith(f"curl -N {server}/v1/chat/completions")
    page.click("#capture-open")
    page.wait_for_function("() => window.__live.capture.note.startsWith('No finished requests yet')")
    assert urlparse(page.url).path == "/live"

    # 2) two waves of concurrent streamed requests; the screenshot while the second one streams
    first = [f"Name {n} fruits." for n in (2, 3, 4, 5, 6)]
    second = ["Write a haiku about rain.", "Count from one to ten in words.", "Describe the sea in one sentence."]
    wave1 = texts(send_chats(server, first))
    wave2 = send_chats(server, second)
    page.wait_for_function("(ps) => window.__live.requests.filter((q) => ps.includes(q.prompt) && q.tokens >= 8)"
                           ".length >= 2", arg=second)
    page.evaluate("() => window.scrollTo(0, 0)")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "live.png"))
    expected = {**wave1, **texts(wave2)}
    assert all(expected.values()), expected

    # 3) every request, newest first, with exactly the text the API streamed, in the table too
    rows = wait_finished(page, expected)
    for prompt, text in expected.items():
        q = rows[prompt]
        assert q["text"] == text and 0 < q["tokens"] <= MAX_TOKENS and q["ttft_ms"] > 0
        assert page.text_content(f"#request-rows tr[data-id='{q['id']}'] td.written") == text
    shown = live(page, "requests")
    assert [int(q["id"][1:]) for q in shown] == sorted((int(q["id"][1:]) for q in shown), reverse=True)
    assert not live(page, "empty")

    # 4) the figures of the last minute are the requests' own numbers, and the panel shows them
    f = live(page, "figures")
    assert f["finished_last_minute"] == len(expected) and f["running"] == 0 and f["waiting"] == 0
    assert f["tokens_last_minute"] >= sum(q["tokens"] for q in rows.values())
    assert f["tokens_per_s"] == pytest.approx(f["tokens_last_minute"] / 60)
    assert f["kv_pct"] > 0 and f["ttft_p50_ms"] > 0 and f["tpot_p50_ms"] > 0
    assert f["ttft_p50_ms"] <= f["ttft_p95_ms"] and f["tpot_p50_ms"] <= f["tpot_p95_ms"]
    assert page.text_content("#figures [data-figure='tokens_per_s']") == f"{f['tokens_per_s']:.1f}"
    assert page.text_content("#figures [data-figure='ttft']").endswith(" ms")
    assert f["queue_p50_ms"] <= f["queue_p95_ms"] and page.text_content("#figures [data-figure='queue']").endswith(" ms")
    # the figures and the lane options laid out on a laptop's and a projector's widths (at 1280-1440 px the options'
    # "1280 blocks of 16 · 900 MiB" once ran into its neighbour and past the page's edge)
    for width in (1280, 1300, 1366, 1440):
        assert figures_laid_out(page, width), width
    page.set_viewport_size({"width": 1280, "height": 900})
    # the line above the canvas names the lane's policy in the engine's words (its traits' label)
    assert ", continuous batching \u00b7 " in page.text_content("#live-status")

    # 5) once a second of idle shows after the last step, Pause freezes the window; the canvas then holds each
    #    request's cells, the waits and the KV use
    page.wait_for_function("() => window.__live.now > window.__live.lastEnd + 1000")
    page.click("#btn-follow")
    page.wait_for_function("() => !window.__live.following")
    frozen = live(page, "now")
    t0 = page.evaluate("() => performance.now()")
    page.wait_for_function("(t) => performance.now() > t + 400", arg=t0)
    assert live(page, "now") == frozen and page.text_content("#btn-follow") == "Follow"
    probe = page.evaluate("() => window.__live")
    assert probe["stepsDrawn"] > 0 and probe["records"] >= probe["stepsDrawn"]
    palette = probe["palette"]
    decode = [r for r in probe["runs"] if r["kind"] == "decode"]
    assert {r["request"] for r in decode} == {q["id"] for q in rows.values()}
    wide = [r for r in decode if r["rect"]["w"] >= 30]  # room for the fill around the id and the stop bar
    assert wide and all(colour_share(page, r["rect"], palette["decode"]) > 0.5 for r in wide), wide
    assert any(r["kind"] == "prefill" for r in probe["runs"])
    waits = [w for w in probe["waits"] if w["rect"]["w"] >= 12]
    assert waits and waits[-1]["t1"] == probe["now"] and waits[-1]["t0"] >= max(r["t1"] for r in probe["runs"])
    assert all(colour_share(page, w["rect"], palette["waiting"], inset=2) + colour_share(page, w["rect"],
               palette["waitingMark"], inset=2) > 0.8 for w in waits)
    assert share(rgb(palette["kv"]), pixels(page, probe["layout"]["kv"])) > 0
    page.click("#btn-follow")
    page.wait_for_function("(t) => window.__live.following && window.__live.now > t", arg=frozen)

    # 6) a second viewer, joining later, sees the same requests and text (from the snapshot)
    other = watched_page(context)
    open_live(other, server)
    assert {p: q["text"] for p, q in wait_finished(other, expected).items()} == expected
    no_problems(page, context)


def test_capture_of_the_last_requests_opens_on_the_main_page_and_runs_on_the_three_lanes(context, server):
    prompts = ["Say hello to a cat.", "Name a colour.", "What is two plus two?"]
    sent = texts(send_chats(server, prompts))
    page = watched_page(context)
    open_live(page, server)
    rows = wait_finished(page, sent)
    page.fill("#capture-n", "3")
    page.wait_for_function("() => window.__live.capture.n === 3")
    assert live(page, "capture.download") == "/api/live/capture?last=3&download=1"
    download = page.request.get(f"{server}/api/live/capture?last=3&download=1")
    assert "attachment" in download.headers["content-disposition"]
    captured = download.json()
    assert sorted(q["id"] for q in captured["requests"]) == sorted(q["id"] for q in rows.values())
    assert {q["id"]: q["max_new_tokens"] for q in captured["requests"]} == {q["id"]: q["tokens"] for q in rows.values()}

    page.click("#capture-open")
    page.wait_for_url(lambda u: urlparse(u).path == "/" and urlparse(u).fragment.startswith("mix="))
    page.wait_for_function("() => window.__lanes && ['finished', 'error'].includes(window.__lanes.status)",
                           timeout=RUN_TIMEOUT_MS)
    lanes = page.evaluate("() => window.__lanes")
    assert lanes["status"] == "finished", lanes["error"]
    assert lanes["mix"] == "captured" and lanes["order"] == LANES
    for lane in LANES:
        done = lanes["lanes"][lane]["metrics"]["requests"]
        assert {i: q["tokens"] for i, q in done.items()} == {q["id"]: q["max_new_tokens"] for q in captured["requests"]}
    no_problems(page, context)
