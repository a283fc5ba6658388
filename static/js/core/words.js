/**
 * Words the page writes around numbers and tokens, in one place: a count with its noun in the right
 * number ("1 step", "2 steps"), and how a special token of the tokenizer (`<|im_end|>`) is named on a
 * token chip ("⟨im_end⟩") so it never reads as text the model wrote. Pure string functions.
 */

/** "1 step", "2 steps", "1 KV block": the count and its noun (the plural is the noun + "s" unless given). */
export function count(n, one, many = `${one}s`) {
  return `${n} ${n === 1 ? one : many}`;
}

/** A special token's chip text: "<|im_end|>" -> "⟨im_end⟩", "</s>" -> "⟨/s⟩". */
export function chipText(token) {
  const inner = String(token ?? "").replace(/^<\|?/, "").replace(/\|?>$/, "").trim();
  return `\u27e8${inner || "special"}\u27e9`;
}
