/**
 * The DOM around the canvas: the metrics table, the request panel, the hover tooltip and the
 * status line. Every piece of user or model text goes in through textContent (never innerHTML),
 * so a prompt or a token that looks like markup shows literally.
 */

function el(tag, text, props = {}) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = text;
  for (const [key, value] of Object.entries(props)) {
    if (key === "dataset") Object.assign(node.dataset, value);
    else node[key] = value;
  }
  return node;
}

const dash = "\u2013";
const num = (v, digits) => (v === null || v === undefined ? dash : v.toFixed(digits));
const ms = (v) => (v === null || v === undefined ? dash : `${Math.round(v)}`);

/** One decimal, as the classroom table prints it, plus the exact value when rounding hides it: "2.4 (2.375)". */
function formatMean(v) {
  if (v === null || v === undefined) return dash;
  const short = v.toFixed(1);
  const exact = Number(v.toFixed(3));
  return Math.abs(exact - Number(short)) > 1e-9 ? `${short} (${exact})` : short;
}

const METRIC_COLUMNS = [
  ["steps", "steps", (m) => String(m.steps)],
  ["tokens", "tokens", (m) => String(m.tokens)],
  ["tokens_per_step", "tokens/step", (m) => m.tokens_per_step.toFixed(2)],
  ["slot_use", "slot use", (m) => `${Math.round(m.slot_use * 100)}%`],
  ["mean_ttft_steps", "mean TTFT steps", (m) => formatMean(m.mean_ttft_steps)],
  ["mean_ttft_ms", "mean TTFT ms", (m) => ms(m.mean_ttft_ms)],
  ["ttft_ms_p50_p95", "TTFT ms p50 / p95", (m) => `${ms(m.p50_ttft_ms)} / ${ms(m.p95_ttft_ms)}`],
  ["mean_tpot_ms", "mean TPOT ms", (m) => ms(m.mean_tpot_ms)],
  ["latency_steps_p50_p95", "latency steps p50 / p95", (m) => `${m.p50_latency_steps ?? dash} / ${m.p95_latency_steps ?? dash}`],
  ["wall_s", "wall time s", (m) => num(m.wall_s, 2)],
  ["tokens_per_s", "tokens/s", (m) => num(m.tokens_per_s, 1)],
  ["padding_slot_steps", "padding cells", (m) => String(m.padding_slot_steps)],
  ["preemptions", "preempted", (m) => String(m.preemptions)],
];

/**
 * Fill the metrics table: one row per lane. `done`: lane -> finished (a running lane's row says "so far");
 * `check`: "" (no server numbers yet), "ok", or a list of mismatches.
 */
export function renderMetrics(table, caption, metrics, done, check) {
  const head = el("tr");
  head.append(el("th", "lane", { scope: "col" }));
  for (const [, label] of METRIC_COLUMNS) head.append(el("th", label, { scope: "col" }));
  const body = el("tbody");
  for (const [lane, m] of Object.entries(metrics)) {
    const tr = el("tr", null, { dataset: { lane } });
    tr.append(el("th", done[lane] ? lane : `${lane} (so far)`, { scope: "row" }));
    for (const [key, , fmt] of METRIC_COLUMNS) tr.append(el("td", fmt(m), { dataset: { lane, metric: key } }));
    body.append(tr);
  }
  const thead = el("thead");
  thead.append(head);
  table.replaceChildren(thead, body);
  caption.textContent = check === "ok" ? "Computed here from the step records \u2014 identical to the server's numbers."
    : check ? `Computed here from the step records \u2014 differs from the server in: ${check}` : "Computed here from the step records so far.";
  caption.dataset.check = check === "ok" ? "match" : check ? "mismatch" : "pending";
}

/** The text a request has written in `records` up to and including `step` (an EOS token writes nothing). */
function textUpTo(records, id, step) {
  let text = "";
  for (const r of records.slice(0, step)) {
    for (const c of r.slots) if (c.request === id && c.token && c.stop !== "eos") text += c.token;
  }
  return text;
}

/** The request panel for one lane at `step`: prompt, text so far, stop, TTFT / TPOT / latency once returned. */
export function renderRequests(tbody, workload, records, metrics, step) {
  const rows = workload.requests.map((spec) => {
    const id = String(spec.id);
    const q = metrics.requests[id] || {};
    const back = q.return_step !== null && q.return_step !== undefined && q.return_step <= step;
    const tr = el("tr", null, { dataset: { request: id } });
    tr.append(el("th", id, { scope: "row" }));
    const prompt = el("td", null, { className: "prompt" });
    prompt.append(el("div", spec.prompt, { className: "clamp", title: spec.prompt }));
    tr.append(prompt);
    const written = textUpTo(records, id, step);
    const out = el("td", written, { className: "written" });
    if (!back && q.first_token_step !== null && q.first_token_step <= step) out.classList.add("writing");
    tr.append(out);
    const stop = back ? (q.stop === "eos" ? `EOS after ${q.tokens}` : `length ${q.tokens}`) : dash;
    tr.append(el("td", stop, { className: back && q.stop === "eos" ? "stop eos" : "stop" }));
    tr.append(el("td", back ? `${q.ttft_steps} / ${ms(q.ttft_ms)}` : dash));
    tr.append(el("td", back ? ms(q.tpot_ms) : dash));
    tr.append(el("td", back ? `${q.latency_steps} / ${ms(q.latency_ms)}` : dash));
    return tr;
  });
  tbody.replaceChildren(...rows);
}

/** The hover tooltip's lines for a cell (`what` from renderer.cellAt). */
export function tooltipLines(laneName, step, what, view) {
  const lines = [];
  const rec = what.record;
  const where = what.slot !== undefined && what.slot !== null ? what.slot : null;
  const slot = view === "slots" ? rec.slots.indexOf(what.cell) : where;
  const head = [what.request || "no request", slot !== null && slot >= 0 ? `slot ${slot + 1}` : null, `step ${step}`];
  lines.push(head.filter(Boolean).join(" \u00b7 "));
  lines.push(`${laneName} lane \u00b7 ${what.kind}`);
  const cell = what.cell;
  if (cell && cell.prefill) lines.push(`prompt tokens cached: ${cell.prefill[0]} of ${cell.prefill[1]}`);
  if (cell && cell.token !== null && cell.token !== undefined) lines.push(`token: ${JSON.stringify(cell.token)} (id ${cell.token_id})`);
  if (cell && cell.stop) lines.push(cell.stop === "eos" ? "stopped: the model wrote EOS" : "stopped: max_new_tokens reached");
  lines.push(`step took ${rec.ms.toFixed(1)} ms (forward ${rec.forward_ms.toFixed(1)} ms, ${rec.forward})`);
  return lines;
}

export function setText(node, text) {
  if (node.textContent !== text) node.textContent = text;
}
