/**
 * Scale arithmetic beside the toy (issue 38): the K/V bytes one token takes are 2 (K and V) x layers x KV heads x
 * head dim x the dtype's bytes, so a pool the memory map draws in kilobytes maps to a named production model on a
 * named card. Model shapes are their published configs; the card is an 80 GB accelerator (H100/A100 80 GB). Pure.
 */
export const MODELS = Object.freeze({
  // what the page runs: engine/worker/sim.py's SIM_KV_BYTES_PER_TOKEN is the same product, float32
  smollm2: Object.freeze({ name: "SmolLM2-135M", layers: 30, kvHeads: 3, headDim: 64, dtypeBytes: 4, params: 134.5e6 }),
  llama8b: Object.freeze({ name: "Llama-3.1-8B", layers: 32, kvHeads: 8, headDim: 128, dtypeBytes: 2, params: 8.03e9 }),
  llama70b: Object.freeze({ name: "Llama-3.1-70B", layers: 80, kvHeads: 8, headDim: 128, dtypeBytes: 2, params: 70.6e9 }),
});
export const CARD_BYTES = 80e9;
export const ANSWER_TOKENS = 2048;  // a long chat turn: prompt and answer

/** Bytes of K/V one token takes in `model`. */
export function kvBytesPerToken({ layers, kvHeads, headDim, dtypeBytes }) {
  return 2 * layers * kvHeads * headDim * dtypeBytes;
}

/** Tokens of K/V that fit on `cards` cards beside `model`'s weights (in its dtype); 0 when the weights alone do not fit. */
export function tokensOnCards(model, cards = 1, cardBytes = CARD_BYTES) {
  const free = cards * cardBytes - model.params * model.dtypeBytes;
  return free > 0 ? Math.floor(free / kvBytesPerToken(model)) : 0;
}

const kib = (n) => `${Math.round(n / 1024)} KiB`;
const roughly = (n) => (n >= 1e4 ? `${Math.round(n / 1e3)},000` : String(n));

/** Bytes as a person reads them: "2.6 MB", "960 KB", "16.1 GB". */
export function bytesText(n) {
  return n >= 1e9 ? `${(n / 1e9).toFixed(1)} GB` : n >= 1e6 ? `${(n / 1e6).toFixed(1)} MB` : `${Math.round(n / 1e3)} KB`;
}
/**
 * The line under the memory map: what `tokens` positions of K/V take here and on a production model, and how many
 * tokens (and answers of ANSWER_TOKENS) an 80 GB card holds beside the weights. "" for an empty pool.
 */
export function scaleLine(tokens) {
  if (!(tokens > 0)) return "";
  const [small, mid, big] = [MODELS.smollm2, MODELS.llama8b, MODELS.llama70b];
  const onOne = tokensOnCards(mid, 1);
  const onTwo = tokensOnCards(big, 2);
  return `At scale: this pool's ${tokens} tokens take ${bytesText(tokens * kvBytesPerToken(small))} of K/V here`
    + ` (${small.name}, float32: ${kib(kvBytesPerToken(small))} a token). ${mid.name} in bf16 takes`
    + ` ${kib(kvBytesPerToken(mid))} a token, so the same tokens would take ${bytesText(tokens * kvBytesPerToken(mid))};`
    + ` an 80 GB card holds about ${roughly(onOne)} tokens beside its weights \u2014 ${Math.floor(onOne / ANSWER_TOKENS)}`
    + ` answers of ${ANSWER_TOKENS} tokens at once. ${big.name}: ${kib(kvBytesPerToken(big))} a token, about`
    + ` ${roughly(onTwo)} tokens on two such cards.`;
}
