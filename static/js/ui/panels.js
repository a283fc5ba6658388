/**
 * The DOM around the canvas: the metrics table (at the playhead), the request panel, the hover
 * tooltip and the status line. Every piece of user or model text goes in through textContent (never
 * innerHTML), so a prompt or a token that looks like markup shows literally; a special token of the
 * tokenizer (`<|im_end|>`) shows as a token chip ("⟨im_end⟩", the raw text in its title), never as text.
 */
import { el } from "./dom.js";
import { cellText, columnsOf } from "../core/columns.js";
import { isSimulated, writtenText } from "../core/metrics.js";
import { transferLine } from "../core/pdmetrics.js";
import { partsText } from "./pdtable.js";
import { watchOverflow } from "./scrollcue.js";
import { sampleLine, siblingOf } from "../core/siblings.js";
import { sloLine, sloWords } from "../core/slo.js";
import { termNode } from "./tips.js";
import { Forward, Phase, StopReason } from "../core/vocab.js";
import { waitTerm, waitText } from "../core/waits.js";
import { chipText } from "../core/words.js";
import { splitLines } from "../core/tpsplit.js";

const dash = "\u2013";
const ms = (v) => (v === null || v === undefined ? dash : `${Math.round(v)}`);

/** The metrics table's columns, as the metric table's "page" table declares them (a `when` column shows only for
 * a run with a speculative lane, with a prefix cache hit, with block tables, with a swap-out, with a fleet, or with an
 * SLO set: the table is full enough without them). */
const METRIC_COLUMNS = columnsOf("page");

/**
 * Fill the metrics table: one row per lane, its numbers up to the playhead. `metrics`: lane -> metrics;
 * `rowNote`: lane -> "" or what the row's numbers cover ("so far", "at step 2 of 15"); `check`: "" (no server
 * numbers yet), "ok", or a list of mismatches (always on the full records); `at`: null when the playhead is at
 * the end, else where it is ("step 2", "0.84 s"); `hidden`: lane -> true for a row predict-then-reveal keeps
 * back (its cells show "?"); `speculative`: the run has a speculative lane (its column shows). The header row is
 * built once per set of columns, so a focused header keeps its focus.
 */
export function renderMetrics(table, caption, metrics, rowNote, check, at = null, hidden = {}, speculative = false) {
  if (!table.parentElement.dataset.overflow) watchOverflow(table.parentElement);  // a column past the edge is cued
  const shows = { speculative, prefix_cache: Object.values(metrics).some((m) => m.prompt_tokens_cached > 0),
    slo: Object.values(metrics).some((m) => m.slo_met !== null && m.slo_met !== undefined),
    paged: Object.values(metrics).some((m) => m.token_utilization !== null && m.token_utilization !== undefined),
    swap: Object.values(metrics).some((m) => m.swaps > 0),
    fleet: Object.values(metrics).some((m) => m.max_load_imbalance !== null && m.max_load_imbalance !== undefined) };
  const columns = METRIC_COLUMNS.filter((c) => !c.when || shows[c.when]);
  const shown = columns.map((c) => c.key).join(" ");
  if (table.tHead && table.tHead.dataset.columns !== shown) table.tHead.remove();
  if (!table.tHead) {
    const head = el("thead", { dataset: { columns: shown } }, [el("tr", {}, [el("th", { text: "lane", scope: "col" }),
      ...columns.map((c) => el("th", { scope: "col" }, [termNode(c.term, c.label)]))])]);
    table.insertBefore(head, table.tBodies[0] || null);
  }
  const body = el("tbody", {}, Object.entries(metrics).map(([lane, m]) => el("tr", { dataset: { lane } }, [
    el("th", { scope: "row" }, [lane, ...(rowNote[lane] ? [el("span", { className: "row-note", text: rowNote[lane] })] : [])]),
    ...columns.map((c) => el("td", { text: hidden[lane] ? "?" : cellText(c, m),
      dataset: { lane, metric: c.key, ...(hidden[lane] ? { hidden: "true" } : {}) } }))])));
  if (table.tBodies[0]) table.tBodies[0].replaceWith(body);
  else table.append(body);
  const source = "Computed here from the step records";
  const held = Object.values(hidden).some(Boolean);
  caption.textContent = held ? "Predict, then reveal: a lane's numbers show when the playhead reaches its end (End jumps there)."
    : at ? `At the playhead (${at}): ${source.toLowerCase()} up to it; the end shows the run's final numbers.`
      : check === "ok" ? `${source} \u2014 identical to the server's numbers.`
        : check ? `${source} \u2014 differs from the server in: ${check}` : `${source} so far.`;
  caption.dataset.check = held ? "hidden" : at ? "playhead" : check === "ok" ? "match" : check ? "mismatch" : "pending";
}

/** A special token as a chip: "⟨im_end⟩" in a styled span, the raw token in its title. */
export function tokenChip(token) {
  return el("span", { className: "token-chip", text: chipText(token), title: `${token} \u2014 a special token of the tokenizer, not text` });
}

/** Text and chips for a run of cells: ordinary tokens as text (merged), special tokens as chips. */
function written(cells) {
  const parts = [];
  for (const c of cells) {
    const text = writtenText(c);
    if (!text) continue;
    if (c.special) parts.push(tokenChip(text));
    else if (typeof parts[parts.length - 1] === "string") parts[parts.length - 1] += text;
    else parts.push(text);
  }
  return parts;
}

/**
 * Why a fixed-length request's text runs on past a special token ("…⟨im_end⟩⟨im_start⟩system"): it ignores EOS, so
 * the model writes on past the end of its turn into what looks like a new chat turn. "" when that did not happen.
 */
export function pastEosNote(spec, cells) {
  if (!spec || spec.ignore_eos === false || !cells.some((c) => c.special && writtenText(c))) return "";
  return " \u2014 past the end of its turn: this request ignores EOS (a fixed length), so the model writes on through "
    + "\u27e8im_end\u27e9 into what looks like a new chat turn";
}

/** What a request has written in `records` up to and including `step` (an EOS token writes nothing), as parts. */
function cellsUpTo(records, id, step) {
  return records.slice(0, step).flatMap((r) => r.slots.filter((c) => c.request === id));
}

/** "SIMULATED words:" before a simulated request's text (its words are the simulator's placeholders), or nothing. */
function simulatedNote(records, id, step) {
  if (!records.length || !isSimulated(records[0]) || !written(cellsUpTo(records, id, step)).length) return [];
  return [el("span", { className: "sim-words", text: "SIMULATED words: ", title: "the simulator's placeholder tokens read as words; no model ran" })];
}

function writtenUpTo(records, id, step) {
  return written(cellsUpTo(records, id, step));
}

const PARTS_TITLE = "TTFT in five parts (ms): prefill queue + prefill + KV copy + decode queue + first decode step";
const seconds = (v) => `${(v / 1000).toFixed(2)} s`;

/** "waits: 3 KV blocks short": why request `id` waits after record `rec`'s admissions, or "" (it does not wait). */
export function waitLine(rec, id, workload) {
  const wait = rec && rec.waits && rec.waits[id];
  if (!wait) return "";
  const requests = (workload && workload.requests) || [];
  const specs = Object.fromEntries(requests.map((q) => [String(q.id), q]));
  const timed = requests.some((q) => q.arrival_ms !== undefined && q.arrival_ms !== null);
  return `waits: ${waitText(wait, { specs, timed, id })}`;
}

/** The request panel's reason a request waits at `step`: a glossary term (hover: what the reason means), or none. */
function waitNode(records, id, step, workload) {
  const rec = records[step - 1];
  const text = waitLine(rec, id, workload);
  if (!text) return [];
  const term = waitTerm(rec.waits[id]);
  return [term ? termNode(term, text, "span", { className: "wait-reason" }) : el("span", { className: "wait-reason", text })];
}

/**
 * When a request arrived: its ms (arrivals in ms) or the step it could first join, with that step's start on the lane
 * clock once the playhead (`step`) got there.
 */
function arrivalText(spec, q, step) {
  if (spec.arrival_ms !== undefined && spec.arrival_ms !== null) return seconds(spec.arrival_ms);
  const joins = (spec.arrival || 0) + 1;
  return q && q.arrival_ms !== undefined && joins <= step ? `step ${joins} (${seconds(q.arrival_ms)})` : `step ${joins}`;
}

/**
 * The request panel for one lane at `step`: prompt, arrival, text so far, stop, TTFT / TPOT / latency once returned;
 * `reveal` (predict-then-reveal): a step arrival's time on the lane clock only once the playhead got there.
 */
export function renderRequests(tbody, workload, records, metrics, step, reveal = false) {
  const rows = workload.requests.map((spec) => {
    const id = String(spec.id);
    const q = metrics.requests[id] || {};
    const back = q.return_step !== null && q.return_step !== undefined && q.return_step <= step;
    const writing = !back && q.first_token_step !== null && q.first_token_step <= step;
    const eos = q.stop === StopReason.EOS;
    const sib = siblingOf(id, workload);  // a request's samples sit together; the prompt is said once, on the first
    const prompt = sib && sib.sample > 1 ? `(the prompt of ${sib.parent}: sample ${sib.sample} of ${sib.samples})` : spec.prompt;
    return el("tr", { dataset: sib ? { request: id, group: sib.parent } : { request: id }, className: sib ? "sibling" : "" }, [
      el("th", { text: id, scope: "row", title: sib ? `sample ${sib.sample} of ${sib.samples} of ${sib.parent}` : id }),
      el("td", { className: "prompt" }, [el("div", { text: prompt, className: "clamp", title: spec.prompt })]),
      el("td", { className: "arrival", text: arrivalText(spec, q, reveal ? step : Infinity) }),
      el("td", { className: writing ? "written writing" : "written" }, [...simulatedNote(records, id, step),
        ...writtenUpTo(records, id, step),
        ...waitNode(records, id, step, workload),
        el("span", { className: "past-eos", text: pastEosNote(spec, cellsUpTo(records, id, step)) })]),
      el("td", { text: back ? (eos ? `EOS after ${q.tokens}` : `length ${q.tokens}`) : dash,
        className: back && eos ? "stop eos" : "stop" }),
      el("td", { text: back ? `${q.ttft_steps} / ${ms(q.ttft_ms)}` : dash }, back && q.ttft_parts  // a P/D lane: its five parts
        ? [el("div", { className: "ttft-parts", text: partsText(q.ttft_parts), title: PARTS_TITLE })] : []),
      el("td", { text: back ? ms(q.tpot_ms) : dash }),
      el("td", { text: back ? `${q.latency_steps} / ${ms(q.latency_ms)}` : dash })]);
  });
  tbody.replaceChildren(...rows);
}

/** What a token line says: ordinary text quoted, a special token as a chip and what it meant for this request. */
function tokenLines(cell, spec, simulated) {
  if (simulated) return [`token: ${JSON.stringify(cell.token)} (id ${cell.token_id}), a SIMULATED word: no model ran`];
  const lookup = cell.proposed === undefined || cell.proposed === null ? []
    : [`prompt lookup: proposed ${cell.proposed}, the model agreed with ${cell.accepted}`];
  if (cell.tokens) return [`${cell.tokens.length} tokens in one step: ${JSON.stringify(cell.token)} (ids ${cell.tokens.join(", ")})`, ...lookup];
  const id = `(id ${cell.token_id})`;
  if (!cell.special) return [`token: ${JSON.stringify(cell.token)} ${id}`, ...lookup];
  const lines = [["token: ", tokenChip(cell.token), ` ${id}, a special token`]];
  if (spec && spec.ignore_eos !== false && cell.stop !== StopReason.EOS) {
    lines.push(cell.stop ? "the request ignores EOS (fixed length): this token did not stop it"
      : "the request ignores EOS (fixed length): it writes on past this token");
  }
  return lines;
}

function stopLine(cell, spec) {
  if (cell.stop === StopReason.EOS) return "stopped: the model wrote EOS";
  const most = spec && spec.max_new_tokens ? ` (${spec.max_new_tokens})` : "";
  return `stopped at its length: max_new_tokens${most} reached`;
}

/**
 * The lines of a cell's tooltip (`what` from renderer.cellAt); `lane` is the scene's lane, `workload` the run's.
 * A line is a string or an array of strings and nodes (a token chip).
 */
function cellLines(lane, step, what, view, workload) {
  const lines = [];
  const rec = what.record;
  const where = what.slot !== undefined && what.slot !== null ? what.slot : null;
  const slot = view === "slots" ? rec.slots.indexOf(what.cell) : where;
  const head = [what.request || "no request", slot !== null && slot >= 0 ? `slot ${slot + 1}` : null, `step ${step}`];
  lines.push(head.filter(Boolean).join(" \u00b7 "));
  const sample = what.request && sampleLine(what.request, workload);
  if (sample) lines.push(sample);  // "sample 1 of 3 of R3": a sibling of parallel sampling
  lines.push(`${lane.name} lane${lane.name === lane.policy ? "" : ` (${lane.policy})`} \u00b7 ${what.kind}`);
  const arrival = what.request && lane.timeline.arrivals.find((a) => a.id === what.request);
  if (arrival) lines.push(`arrived at ${seconds(arrival.arrival_ms)} on this lane's clock`);
  if (arrival && lane.slo) {  // the SLO it is held to: its verdict once the playhead passed its answer, else its targets
    const answered = lane.verdicts && lane.verdicts.get(what.request);
    const verdict = answered && !(lane.revealed < answered.finish_step) ? answered : null;
    lines.push(verdict ? sloLine(verdict, lane.slo) : `SLO: ${sloWords(lane.slo)}${lane.slo.ttft_ms
      ? ` (first token due by ${seconds(arrival.arrival_ms + lane.slo.ttft_ms)})` : ""}`);
  }
  if (what.kind === Phase.QUEUED && waitLine(rec, what.request, workload)) lines.push(waitLine(rec, what.request, workload));
  const cell = what.cell;
  // two facts, two words: how much of the prompt's K/V exists after this step; and, on a lane with a prefix cache,
  // how much of it was copied from earlier prompts instead of computed
  if (cell && cell.prefill) lines.push(`prompt K/V written so far: ${cell.prefill[0]} of ${cell.prefill[1]} tokens`);
  const prefixCache = Boolean((lane.config && lane.config.options.prefix_cache) || (workload && workload.prefix_cache));
  if (cell && cell.cached && prefixCache) {
    lines.push(`from the prefix cache: ${cell.cached} of ${cell.prefill ? cell.prefill[1] : "?"} tokens (copied, not computed)`);
  }
  const spec = workload && what.request && workload.requests.find((q) => String(q.id) === what.request);
  if (cell && cell.token !== null && cell.token !== undefined) lines.push(...tokenLines(cell, spec, isSimulated(rec)));
  if (cell && cell.stop) lines.push(stopLine(cell, spec));
  const start = lane.timeline.starts[step - 1];
  lines.push(`step ran ${seconds(start)} \u2192 ${seconds(lane.timeline.ends[step - 1])}: ${rec.ms.toFixed(1)} ms`);
  if (rec.forward === Forward.NONE) lines.push("computed nothing: the lane waited (a median step's time)");
  else lines.push(`forward ${rec.forward_ms.toFixed(1)} ms (${rec.forward})`);
  return lines;
}

/**
 * The hover tooltip's lines for what `layout.hitTest` found (a cell, a wait, arrival marks) on a scene lane: each a
 * string or an array of strings and nodes (a special token's chip). `workload` (the run's) lets a token line say
 * what a special token meant for its request.
 */
export function tooltipParts(lane, hit, view, workload = null) {
  if (hit.kind === "gap") {
    const { from, to } = hit.gap;
    const coming = lane.timeline.arrivals.filter((a) => a.arrival_ms > from + 1e-6 && a.arrival_ms <= to + 1e-6);
    return [`${lane.name} lane \u00b7 waiting for arrivals`, `idle ${seconds(from)} \u2192 ${seconds(to)} (${Math.round(to - from)} ms)`,
      coming.length ? `arrivals meanwhile: ${coming.map((a) => `${a.id} at ${seconds(a.arrival_ms)}`).join(", ")}`
        : "arrivals meanwhile: none (a wait deadline ends it)"];
  }
  if (hit.kind === "split") return splitLines(lane.name, lane.records, hit.step);
  if (hit.kind === "mark") {
    if (lane.pd && lane.pd.role === "decode") {  // a decode engine: its marks are the hand-offs that reached it
      return [`${lane.fleet} \u00b7 decode engine ${lane.pd.index + 1} \u00b7 KV copied in`, ...hit.marks.flatMap((a) =>
        [transferLine(a.transfer), `  in its queue at ${seconds(a.arrival_ms)} (copy ${seconds(a.transfer.start_ms)} \u2192 ${seconds(a.arrival_ms)})`])];
    }
    if (lane.pd) {
      return [`${lane.fleet} \u00b7 prefill engine ${lane.pd.index + 1} \u00b7 arrivals`, ...hit.marks.map((a) =>
        `${a.id} arrives at ${seconds(a.arrival_ms)}: its prompt is computed here, then its KV blocks go to a decode engine`)];
    }
    if (lane.fleet) {  // a replica of a fleet: its marks are the router's decisions
      return [`${lane.fleet} \u00b7 replica ${lane.replica + 1} \u00b7 routed here`, ...hit.marks.map((a) =>
        `${a.id} arrives at ${seconds(a.arrival_ms)}: the router sent it to replica ${a.replica + 1} (${a.branch})`)];
    }
    return [`${lane.name} lane \u00b7 arrivals`, ...hit.marks.map((a) =>
      `${a.id} arrives at ${seconds(a.arrival_ms)}; can join step ${a.arrival + 1}`)];
  }
  return cellLines(lane, hit.step, hit.what, view, workload);
}

/** The tooltip as plain lines of text (a chip as its "⟨im_end⟩" text). */
export function tooltipLines(lane, hit, view, workload = null) {
  return tooltipParts(lane, hit, view, workload).map((line) => (Array.isArray(line)
    ? line.map((part) => (typeof part === "string" ? part : part.textContent)).join("") : line));
}

/** Write tooltipParts lines into `node`: one div each, text through textContent, chips as their own spans. */
export function renderTooltip(node, lines) {
  node.replaceChildren(...lines.map((line) => el("div", {}, Array.isArray(line) ? line : [line])));
}

export function setText(node, text) {
  if (node.textContent !== text) node.textContent = text;
}

/** What a lane's row of the metrics table covers (a scene lane): "" (the whole run), "so far", or "at step 2 of 15". */
export function rowNote(lane) {
  const n = lane.records.length;
  const shown = Math.min(lane.step, n);
  if (shown < n) return `at step ${shown} of ${n}${lane.done ? "" : " so far"}`;
  return lane.done ? "" : "so far";
}

const floors = new WeakMap();  // node -> {key, h}
/**
 * Let a box that wraps (the narration on a phone or a zoomed page) grow but not shrink while `key` stays the same
 * (a run and a width): what is below it moves at most a few times a run, never every frame. Reads the box's height
 * only when its text changed.
 */
export function holdHeight(node, key) {
  let floor = floors.get(node);
  if (floor && floor.key === key && floor.text === node.textContent) return;
  if (!floor || floor.key !== key) {
    floor = { key, text: "", h: 0 };
    floors.set(node, floor);
    node.style.minHeight = "";
  }
  floor.text = node.textContent;
  const h = node.offsetHeight;
  if (h > floor.h) {
    floor.h = h;
    node.style.minHeight = `${h}px`;
  }
}
