/**
 * The editor's live prompt-token count: when a request's prompt is edited, its row shows "N tok" — the
 * chat-templated prompt tokens the server's own tokenizer counts (POST /api/tokens) — about 300 ms
 * after the typing stops. Only the rows edited since the mix was loaded are counted; an answer that
 * arrives after a newer edit is dropped; while the model loads (503) or the server is away, the rows
 * show nothing, and a prompt over the server's limit is not sent (the editor names it on Run). A DOM widget of the editor: its own timer and fetch, text through textContent; it never
 * touches the run state.
 */
import { el } from "../ui/dom.js";

const DEBOUNCE_MS = 300;
const PROMPT = '[data-field^="requests["][data-field$="].prompt"]';

/** Count the prompts typed into `root` (the editor); `maxChars()` is the server's prompt limit as last known;
 * `fetcher` is window.fetch (a test may pass another). */
export function createTokenCount(root, { maxChars = () => Infinity, fetcher = window.fetch.bind(window) } = {}) {
  const edited = new Set();  // prompt inputs typed into since their row was made
  let timer = null;
  let asked = 0;

  function slotOf(input) {
    let slot = input.parentElement.querySelector(".tok-count");
    if (!slot) {
      slot = el("span", { className: "tok-count", ariaLive: "polite" });
      input.after(slot);
    }
    return slot;
  }

  function count() {
    const connected = [...edited].filter((input) => input.isConnected);
    edited.clear();
    for (const input of connected) edited.add(input);
    const inputs = connected.filter((input) => input.value.length <= maxChars());  // one over it: a 400 for all
    connected.filter((input) => !inputs.includes(input)).forEach((input) => { slotOf(input).textContent = ""; });
    if (!inputs.length) return;
    const ask = ++asked;
    const body = JSON.stringify({ prompts: inputs.map((input) => input.value) });
    fetcher("/api/tokens", { method: "POST", headers: { "Content-Type": "application/json" }, body })
      .then((r) => (r.ok ? r.json() : null))
      .then((answer) => {
        if (ask !== asked) return;  // a newer edit asked again
        const tokens = answer && Array.isArray(answer.tokens) ? answer.tokens : null;
        inputs.forEach((input, i) => {
          if (!input.isConnected) return;
          const n = tokens ? tokens[i] : null;
          slotOf(input).textContent = Number.isInteger(n) ? `${n} tok` : "";
        });
      })
      .catch(() => { if (ask === asked) inputs.forEach((input) => { if (input.isConnected) slotOf(input).textContent = ""; }); });
  }

  root.addEventListener("input", (e) => {
    const typed = e.target instanceof HTMLInputElement || e.target instanceof HTMLTextAreaElement;  // a prompt is a textarea
    if (!typed || !e.target.matches(PROMPT)) return;
    edited.add(e.target);
    clearTimeout(timer);
    timer = setTimeout(count, DEBOUNCE_MS);
  });
}
