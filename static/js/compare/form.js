/**
 * The compare page's "pick two runs" form: each field takes a run id or a pasted link (/runs/<id>, or a
 * whole /compare/<a>/<b> link in the first field), and a good pair becomes the address
 * /compare/<a>/<b>. Parsing is pure; `bindCompareForm` only queues actions for compare/main.js, and
 * `showFormErrors` writes each error next to its field (textContent).
 */

const ID = "[A-Za-z0-9_-]{1,64}";  // app/protocol.py RUN_ID
const BARE = new RegExp(`^${ID}$`);
const RUN_LINK = new RegExp(`/runs/(${ID})(?:[/?#]|$)`);
const COMPARE_LINK = new RegExp(`/compare/(${ID})/(${ID})(?:[/?#]|$)`);

/** A run id from what was typed or pasted: the id itself or a /runs/<id> link; null if neither. */
export function runIdOf(text) {
  const t = String(text || "").trim();
  if (BARE.test(t)) return t;
  const m = t.match(RUN_LINK);
  return m ? m[1] : null;
}

/** {ids: [a, b] | null, errors: [{field: "a" | "b", message}]} from the two fields' text. */
export function readPair(textA, textB) {
  const both = String(textA || "").trim().match(COMPARE_LINK);
  if (both && !String(textB || "").trim()) return { ids: [both[1], both[2]], errors: [] };
  const ids = [runIdOf(textA), runIdOf(textB)];
  const errors = ["a", "b"].flatMap((field, i) => {
    if (ids[i]) return [];
    const empty = !String([textA, textB][i] || "").trim();
    return [{ field, message: empty ? "paste a run's id or its /runs/<id> link"
      : "not a run id (letters, digits, - and _) or a /runs/<id> link" }];
  });
  return { ids: errors.length ? null : ids, errors };
}

/** The page comparing two runs. */
export function comparePath([a, b]) {
  return `/compare/${encodeURIComponent(a)}/${encodeURIComponent(b)}`;
}

/** Submit queues {type: "pick", a, b} with the fields' text; the swap button {type: "swap"}. */
export function bindCompareForm(dom, push) {
  dom.form.addEventListener("submit", (e) => {
    e.preventDefault();
    push({ type: "pick", a: dom.inputA.value, b: dom.inputB.value });
  });
  dom.swap.addEventListener("click", () => push({ type: "swap" }));
}

export function showFormErrors(dom, errors) {
  for (const [field, input] of [["a", dom.inputA], ["b", dom.inputB]]) {
    const error = errors.find((e) => e.field === field);
    const out = dom.form.querySelector(`[data-error-for="${field}"]`);
    if (out.textContent !== (error ? error.message : "")) out.textContent = error ? error.message : "";
    if (error) input.setAttribute("aria-invalid", "true");
    else input.removeAttribute("aria-invalid");
  }
}
