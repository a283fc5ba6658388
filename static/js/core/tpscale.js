/**
 * The tensor-parallel lesson's scale arithmetic: what the same split does for a named model on N devices, computed
 * from the model's config (its Hugging Face config.json's numbers), never typed in as results. Weights per device (every
 * linear layer cut N ways: q/k/v/o and gate/up/down; the embedding and lm_head cut by vocabulary rows), KV per token
 * per device (each device holds kv_heads / N heads), and the activations all-reduced per token (two all-reduces a
 * layer, each of one hidden vector). Pure; knows nothing of runs.
 */

/** Configs of the models the lesson names (meta-llama/Llama-3.1-70B's config.json). */
export const MODELS = Object.freeze({
  "Llama-3.1-70B": Object.freeze({ layers: 80, hidden: 8192, intermediate: 28672, heads: 64, kvHeads: 8, headDim: 128,
    vocab: 128256, bytes: 2, devices: 8 }),  // bf16, on 8 GPUs
});

const GB = 1e9;
const KIB = 1024;
const MIB = 1024 * 1024;

/** Parameters of a Llama-shaped model: per layer q, k, v, o and the gated MLP, plus an untied embedding and lm_head. */
export function parameters(c) {
  const attention = c.hidden * c.heads * c.headDim * 2 + c.hidden * c.kvHeads * c.headDim * 2;  // q, o; k, v
  const mlp = 3 * c.hidden * c.intermediate;                                                     // gate, up, down
  const norms = 2 * c.hidden;
  return c.layers * (attention + mlp + norms) + 2 * c.vocab * c.hidden + c.hidden;
}

/** The figures of `c` split over `c.devices`: {params_b, weights_gb_per_device, kv_kib_per_token_per_device,
 * kv_heads_per_device, allreduce_mib_per_token, allreduces_per_token}. */
export function scaleFigures(c) {
  const n = c.devices;
  return {
    params_b: parameters(c) / 1e9,
    weights_gb_per_device: (parameters(c) * c.bytes) / n / GB,
    kv_heads_per_device: c.kvHeads / n,
    kv_kib_per_token_per_device: (2 * c.layers * (c.kvHeads / n) * c.headDim * c.bytes) / KIB,  // K and V
    allreduces_per_token: 2 * c.layers,
    allreduce_mib_per_token: (2 * c.layers * c.hidden * c.bytes) / MIB,
  };
}

/** `{Llama-3.1-70B.key}` in a lesson: the figure as the lesson writes it, undefined for a name that is no model here. */
export function scaleValue(name, key) {
  if (!Object.prototype.hasOwnProperty.call(MODELS, name)) return undefined;
  const model = MODELS[name];
  if (key === "devices") return String(model.devices);
  const v = scaleFigures(model)[key];
  if (typeof v !== "number") return null;
  return Number.isInteger(v) ? String(v) : v.toFixed(1);
}
