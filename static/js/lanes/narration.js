/**
 * One line that says what happened at the playhead, lane by lane, from the step records alone:
 * "step 3 · static: R2 and R4 finished; 2 rows kept as padding · continuous: R5 and R6 take the
 * slots R2 and R4 freed", or that a lane waits for arrivals. What a lane does depends on its
 * policy's traits (a "chunked 64" lane is a continuous one: it admits slot by slot). Pure: returns a string, which the page writes
 * with textContent.
 */
import { evictions } from "../core/metrics.js";
import { admitsGroups } from "../core/policies.js";
import { Forward, SlotState, StopReason } from "../core/vocab.js";
import { headWait, isTelling } from "../core/waits.js";
import { count as plural } from "../core/words.js";

/** "R5", "R5 and R6", "R5, R6 and R7", or "R5, R6 … R9 (5)" for long lists. */
function listIds(ids) {
  const list = [...ids];
  if (list.length <= 1) return list.join("");
  if (list.length > 4) return `${list[0]}, ${list[1]} \u2026 ${list[list.length - 1]} (${list.length})`;
  return `${list.slice(0, -1).join(", ")} and ${list[list.length - 1]}`;
}

function count(record, state) {
  return record.slots.filter((c) => c.state === state).length;
}

const seconds = (ms) => `${(ms / 1000).toFixed(2)} s`;

/** A lane idle between two steps (ms clock): until when, and who arrives by then (`reveal`: not when it ends). */
function gapFacts(lane, reveal) {
  const { from, to } = lane.gap;
  if (reveal) return ["idle, waits for arrivals"];
  const coming = lane.arrivals.filter((a) => a.arrival_ms > from + 1e-6 && a.arrival_ms <= to + 1e-6).map((a) => a.id);
  const who = coming.length ? `: ${listIds(coming)} ${coming.length === 1 ? "arrives" : "arrive"}` : "";
  return [`idle, waits for arrivals until ${seconds(to)}${who}`];
}

/** "R7 waits: 3 KV blocks short", "R5 and R6 wait: no free slot": the record's most telling wait, or null. */
function waitFact(lane, r, timed) {
  const specs = Object.fromEntries((lane.workload ? lane.workload.requests : []).map((q) => [String(q.id), q]));
  const head = headWait(r, { specs, timed });
  if (!head) return null;
  return { telling: isTelling(head.reason), text: `${listIds(head.ids)} ${head.ids.length === 1 ? "waits" : "wait"}: ${head.text}` };
}

/** A step that computed nothing: what the lane waited for. */
function waitFacts(lane, r, timed) {
  const wait = waitFact(lane, r, timed);
  if (wait) return [`computes nothing: ${wait.text}`];
  if (r.waiting.length) {
    return [`computes nothing: ${listIds(r.waiting)} ${r.waiting.length === 1 ? "waits" : "wait"} for a fuller batch`];
  }
  const next = lane.arrivals.find((a) => a.arrival >= r.step);
  if (!next) return ["computes nothing this step"];
  return [`computes nothing: waits for ${next.id} (arrives ${timed ? `at ${seconds(next.arrival_ms)}` : `for step ${next.arrival + 1}`})`];
}

/** The facts of one lane's step, most telling first. */
function laneFacts(lane, timed, reveal) {
  const { records, step } = lane;
  const r = records[step - 1];
  if (!r) return [`done after ${plural(records.length, "step", "steps")}`];
  if (lane.gap) return gapFacts(lane, reveal);
  if (r.forward === Forward.NONE) return waitFacts(lane, r, timed);
  const prev = records[step - 2];
  const facts = [];
  const evicted = evictions(r);  // the metrics' definition: preempted cells (recomputed later) and swapped cells
  const dropped = evicted.filter((e) => !e.swapped).map((e) => e.id);
  const swapped = evicted.filter((e) => e.swapped).map((e) => e.id);
  if (dropped.length) facts.push(`${listIds(dropped)} preempted to free KV memory`);
  if (swapped.length) facts.push(`${listIds(swapped)} swapped out to the host pool to free KV memory`);
  const grouped = admitsGroups(lane.policy);  // its traits: a whole group at once, held until its longest is done
  if (r.admitted.length) {
    const freed = prev ? prev.returned.filter((id) => !r.slots.some((c) => c.request === id)) : [];
    const one = r.admitted.length === 1;
    if (!records.slice(0, step - 1).some((p) => p.admitted.length)) facts.push(`starts ${listIds(r.admitted)}`);
    else if (grouped) facts.push(`starts the next group: ${listIds(r.admitted)}`);
    else if (freed.length) {
      facts.push(`${listIds(r.admitted)} ${one ? "takes" : "take"} the ${freed.length === 1 ? "slot" : "slots"} ${listIds(freed)} freed`);
    } else facts.push(`admits ${listIds(r.admitted)}`);
  }
  if (r.finished.length) {
    const eos = r.slots.filter((c) => c.stop === StopReason.EOS).map((c) => c.request);
    // What happens to the freed slots, when nothing else competes for the line.
    const still = r.slots.some((c) => c.state === SlotState.DECODE && !r.finished.includes(c.request));
    const quiet = !facts.length && !count(r, SlotState.PADDING);
    const its = r.finished.length === 1 ? "its slot" : "their slots";
    const then = !quiet ? "" : grouped && still ? `, ${its} held until the group ends`
      : !grouped && r.waiting.length ? `, ${its} ${r.finished.length === 1 ? "goes" : "go"} to the queue next step` : "";
    facts.push(`${listIds(r.finished)} finished${eos.length ? ` (${listIds(eos)} at EOS)` : ""}${then}`);
  }
  const padding = count(r, SlotState.PADDING);
  if (padding) facts.push(`computes ${plural(padding, "finished row", "finished rows")} as padding`);
  const hit = r.slots.find((c) => c.cached && c.prefill);
  if (hit) facts.push(`${hit.request} takes ${hit.cached} of ${hit.prefill[1]} prompt tokens from the prefix cache`);
  const partial = r.slots.filter((c) => c.state === SlotState.PREFILL && c.prefill && c.token_id === null);
  if (partial.length) facts.push(`${partial[0].request} prefills ${partial[0].prefill[0]}/${partial[0].prefill[1]} prompt tokens`);
  const idle = count(r, SlotState.IDLE);
  const wait = waitFact(lane, r, timed);
  const idleWait = wait && `${idle ? `${plural(idle, "slot", "slots")} idle; ` : ""}${wait.text}`;
  if (wait && wait.telling) facts.splice(Math.min(1, facts.length), 0, idleWait);  // one a class would not guess: read second
  else if (idle && r.waiting.length) facts.push(`${plural(idle, "slot", "slots")} idle while ${listIds(r.waiting)} wait`);
  else if (idle && !facts.length) facts.push(`${plural(idle, "slot", "slots")} idle, nothing waiting`);
  if (!facts.length) facts.push(`${plural(count(r, SlotState.DECODE), "row decodes", "rows decode")}`);
  return facts;
}

/**
 * Once every lane is done: why a lane that admits slot by slot (continuous) can show a higher mean TPOT than one
 * that admits whole groups (static) — its joins are prefilled in the steps its running requests decode in, and
 * such a step is slower for every row it holds. "" when no lane pair shows it (or metrics are missing).
 */
export function tpotNote(lanes) {
  const tpot = (l) => (l.metrics && typeof l.metrics.mean_tpot_ms === "number" ? l.metrics.mean_tpot_ms : null);
  const groups = lanes.filter((l) => admitsGroups(l.policy) && tpot(l) !== null);
  const slots = lanes.filter((l) => !admitsGroups(l.policy) && tpot(l) !== null);
  for (const s of slots) {
    const lower = groups.filter((g) => tpot(g) < tpot(s)).sort((a, b) => tpot(a) - tpot(b))[0];
    if (lower) {
      return `${s.name}'s mean TPOT (${Math.round(tpot(s))} ms) is above ${lower.name}'s (${Math.round(tpot(lower))} ms): `
        + `its joins are prefilled in the same steps its other requests decode in, and those steps are slower for every `
        + "decoding request they share. That is the trade: less waiting for a first token, a little more time per token.";
    }
  }
  return "";
}

/**
 * lanes: [{name, policy, records, step, gap, ended, arrivals, metrics?, workload?}] where `step` is the lane's step under the
 * playhead, `gap` the wait it is in (ms clock) or null, `ended` whether the lane is done and the playhead at its end or
 * past it (scene.js), `arrivals` its timeline's arrivals. clock: "steps" | "ms";
 * t: the playhead; timed: arrivals are in ms; reveal (predict-then-reveal): say nothing of what comes later;
 * short (Present): the line a projector has room for. Once every lane is done, `tpotNote` follows (when a lane's
 * `metrics` show it), on the page only. A record's `waits` says why its
 * requests wait (`workload`, the run's, lets it say a request ahead has a higher priority).
 */
export function narrate(lanes, clock, t, streaming, timed = false, reveal = false, short = false) {
  if (!lanes.length) return "";  // before a run the lesson line says how to start, once (issue 38: it was said three times)
  if (lanes.every((l) => l.step === 0)) {
    return streaming ? "The engine is computing the first step\u2026" : "Press play (Space) or step with \u2192.";
  }
  const where = clock === "steps" ? `Step ${Math.max(...lanes.map((l) => l.step))}` : `${(t / 1000).toFixed(2)} s`;
  const parts = lanes.map((l) => {
    const facts = laneFacts(l, timed, reveal).slice(0, 2).join("; ");
    const done = l.ended;
    return clock === "steps" || done || l.gap ? `${l.name}: ${facts}` : `${l.name} (step ${l.step}): ${facts}`;
  });
  // `ended`, not `step` past the last: the longest lane's step never passes its last (the playhead stops at its end)
  const note = !reveal && !short && lanes.every((l) => l.ended) ? tpotNote(lanes) : "";
  return `${where} \u2014 ${parts.join(" \u00b7 ")}${note ? ` \u2014 ${note}` : ""}`;
}

/**
 * The line before a run has lanes to show: an unknown run id (`missingRun`), or a link's mix (`linkMix`, its name)
 * that runs by itself once the model is ready — a shared link is meant to be watched; null otherwise.
 */
export function startLine({ missingRun = "", linkMix = null, ready = false }) {
  if (missingRun) return `There is no run with id ${missingRun}.`;  // the placeholder says what to do instead
  if (linkMix) {
    return `This link starts a live run of \u201c${linkMix}\u201d ${ready ? "now" : "as soon as the model is ready"}, its`
      + " steps streaming in below: everyone who opens it starts a run of their own. To show a class one run, share"
      + " that run's \u201clink to this run\u201d (/runs/\u2026), which replays it.";
  }
  return null;
}
