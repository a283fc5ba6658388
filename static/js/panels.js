/**
 * The DOM around the canvas: the metrics table, the request panel, the hover tooltip and the
 * status line. Every piece of user or model text goes in through textContent (never innerHTML),
 * so a prompt or a token that looks like markup shows literally.
 */
import { el } from "./dom.js";
import { writtenText } from "./metrics.js";
import { StopReason } from "./vocab.js";

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
  const head = el("tr", {}, [el("th", { text: "lane", scope: "col" }),
    ...METRIC_COLUMNS.map(([, label]) => el("th", { text: label, scope: "col" }))]);
  const body = el("tbody", {}, Object.entries(metrics).map(([lane, m]) => el("tr", { dataset: { lane } }, [
    el("th", { text: done[lane] ? lane : `${lane} (so far)`, scope: "row" }),
    ...METRIC_COLUMNS.map(([key, , fmt]) => el("td", { text: fmt(m), dataset: { lane, metric: key } }))])));
  table.replaceChildren(el("thead", {}, [head]), body);
  caption.textContent = check === "ok" ? "Computed here from the step records \u2014 identical to the server's numbers."
    : check ? `Computed here from the step records \u2014 differs from the server in: ${check}` : "Computed here from the step records so far.";
  caption.dataset.check = check === "ok" ? "match" : check ? "mismatch" : "pending";
}

/** The text a request has written in `records` up to and including `step` (an EOS token writes nothing). */
function textUpTo(records, id, step) {
  let text = "";
  for (const r of records.slice(0, step)) {
    for (const c of r.slots) if (c.request === id) text += writtenText(c);
  }
  return text;
}

/** The request panel for one lane at `step`: prompt, text so far, stop, TTFT / TPOT / latency once returned. */
export function renderRequests(tbody, workload, records, metrics, step) {
  const rows = workload.requests.map((spec) => {
    const id = String(spec.id);
    const q = metrics.requests[id] || {};
    const back = q.return_step !== null && q.return_step !== undefined && q.return_step <= step;
    const writing = !back && q.first_token_step !== null && q.first_token_step <= step;
    const eos = q.stop === StopReason.EOS;
    return el("tr", { dataset: { request: id } }, [
      el("th", { text: id, scope: "row" }),
      el("td", { className: "prompt" }, [el("div", { text: spec.prompt, className: "clamp", title: spec.prompt })]),
      el("td", { text: textUpTo(records, id, step), className: writing ? "written writing" : "written" }),
      el("td", { text: back ? (eos ? `EOS after ${q.tokens}` : `length ${q.tokens}`) : dash,
        className: back && eos ? "stop eos" : "stop" }),
      el("td", { text: back ? `${q.ttft_steps} / ${ms(q.ttft_ms)}` : dash }),
      el("td", { text: back ? ms(q.tpot_ms) : dash }),
      el("td", { text: back ? `${q.latency_steps} / ${ms(q.latency_ms)}` : dash })]);
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
  if (cell && cell.stop) lines.push(cell.stop === StopReason.EOS ? "stopped: the model wrote EOS" : "stopped: max_new_tokens reached");
  lines.push(`step took ${rec.ms.toFixed(1)} ms (forward ${rec.forward_ms.toFixed(1)} ms, ${rec.forward})`);
  return lines;
}

export function setText(node, text) {
  if (node.textContent !== text) node.textContent = text;
}
