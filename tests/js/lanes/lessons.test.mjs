// The lessons of `arrivals` and `long-prompt` are true of the run they describe, whichever way the noise falls:
// simulated runs with injected step-time noise (tests/golden/lessons.json, `python -m tests.golden.lessons`: seeds,
// and noise forced each way) go through the page's own code (scene.js deriveRun, lesson.js fillLesson), and each
// sentence the lesson then says is checked here against the run's own numbers, computed from its records.
// `node --test tests/js/`: no browser. LESSON_RUNS=path reads another file of runs (tests/engine/report/test_lessons.py).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { CHECKS } from "../../../static/js/lanes/claims.js";
import { fillLesson } from "../../../static/js/lanes/lesson.js";
import { laneMetrics } from "../../../static/js/core/metrics.js";
import { deriveRun } from "../../../static/js/canvas/scene.js";

const PATH = process.env.LESSON_RUNS || new URL("../../golden/lessons.json", import.meta.url);
const RUNS = JSON.parse(readFileSync(PATH, "utf8"));
const demo = (name) => JSON.parse(readFileSync(new URL(`../../../demos/${name}.json`, import.meta.url), "utf8"));
const CLAIMS = { arrivals: demo("arrivals").claims, "long-prompt": demo("long-prompt").claims };  // as /api/presets sends them
const TRACE_CLAIMS = { "azure-code-burst": demo("azure-code-burst").claims,  // the replayed traces' (docs/traces.md)
  "mooncake-conversation": demo("mooncake-conversation").claims, "fleet-sessions": demo("fleet-sessions").claims,
  "fleet-herding": demo("fleet-herding").claims, "fleet-one-vs-two": demo("fleet-one-vs-two").claims,
  "pd-vs-colocated": demo("pd-vs-colocated").claims };

function lessonOf(stored, id) {
  const records = Object.fromEntries(Object.entries(stored.records).map(([lane, recs]) => [lane, recs.map((r) => ({ ...r, lane }))]));
  const run = { id, status: "finished", workload: stored.workload, lanes: stored.lanes, records,
    done: Object.fromEntries(stored.lanes.map((l) => [l, true])), promptTokens: stored.prompt_tokens, t: 0 };
  return { text: fillLesson(stored.description, stored.preset, deriveRun(run), CLAIMS[stored.preset] || TRACE_CLAIMS[stored.preset]), records };
}

const wall = (recs) => recs.reduce((end, r) => Math.max(end, r.start_ms + r.ms), 0);
const longest = (recs) => Math.max(...recs.map((r) => r.ms));
const secs = (ms) => `${(ms / 1000).toFixed(2)} s`;
const ms0 = (ms) => `${Math.round(ms)} ms`;
const seen = new Map();  // claim phrase -> Set of verdicts the runs gave (true: the phrase said, false: rewritten)

function saw(says, holds) {
  if (!seen.has(says)) seen.set(says, new Set());
  seen.get(says).add(holds);
}

/** The lesson either makes the claim and the numbers bear it out, or does not make it and states the numbers. */
function claim(text, says, holds, figures, where) {
  saw(says, holds);
  if (holds) {
    assert.ok(text.includes(says), `${where}: the run bears out "${says}", the lesson should say it:\n${text}`);
  } else {
    assert.ok(!text.includes(says), `${where}: the run contradicts "${says}", yet the lesson says it:\n${text}`);
    for (const f of figures) assert.ok(text.includes(f), `${where}: the lesson should state ${f}:\n${text}`);
    assert.match(text, /step times varied (\u00b1\d+%|up to \d+\.\dx) on this machine during the run|no step shape repeated/, where);
  }
}

for (const [id, stored] of Object.entries(RUNS).filter(([, s]) => s.preset in CLAIMS || s.preset in TRACE_CLAIMS)) {  // the memory lessons: memmap-lesson.test.mjs
  test(`the ${id} lesson is true of its run`, () => {
    const { text, records } = lessonOf(stored, id);
    const m = Object.fromEntries(Object.entries(records).map(([lane, recs]) => [lane, laneMetrics(recs, stored.workload)]));
    assert.ok(!text.includes("\u2026") && !text.includes("{"), `${id}: every fill-in is known once the run is done:\n${text}`);
    if (stored.preset === "arrivals") {
      const [c, s, d] = ["continuous", "static", "dynamic"].map((l) => wall(records[l]));
      const later = [["static", s], ["dynamic", d]].filter(([, w]) => w < c);
      claim(text, "so it finishes no later", c <= s && c <= d, [`finished at ${secs(c)}`, ...later.map(([l, w]) => `${l} (${secs(w)}`)], id);
      const [tc, ts, td] = ["continuous", "static", "dynamic"].map((l) => m[l].mean_ttft_ms);
      const far = tc <= Math.min(ts, td) / 2;
      saw("and its first tokens come far sooner", far);
      if (far) assert.ok(text.includes("and its first tokens come far sooner"), `${id}:\n${text}`);
      else {
        assert.ok(!text.includes("far sooner"), `${id}: continuous's mean TTFT ${tc} is not half of ${Math.min(ts, td)}:\n${text}`);
        assert.ok(text.includes(ms0(tc)) && text.includes(ms0(Math.min(ts, td))), `${id}: the TTFTs are stated:\n${text}`);
        if (tc >= Math.min(ts, td)) assert.ok(text.includes("no better than"), `${id}:\n${text}`);
      }
    } else if (stored.preset === "azure-code-burst") {
      const [c, s] = ["continuous", "static"].map((l) => wall(records[l]));
      claim(text, "so it finishes no later", c <= s, [`finished at ${secs(c)}`, `static (${secs(s)}`], id);
      const [tc, ts] = ["continuous", "static"].map((l) => m[l].mean_ttft_ms);
      const far = tc <= ts / 2;  // as arrivals: "far" at most half; between, "sooner" with both TTFTs
      saw("and its first tokens come far sooner", far);
      assert.ok(text.includes("and its first tokens come far sooner") === far, `${id}:\n${text}`);
      if (!far) assert.ok(text.includes(ms0(tc)) && text.includes(ms0(ts)), `${id}: the TTFTs are stated:\n${text}`);
      const whole = records.continuous.find((r) => r.slots.some((c) => c.request === "T26" && c.prefill)).ms;
      claim(text, "so no step stalls for long", longest(records["chunked 64"]) < whole, [ms0(whole)], id);
      assert.ok(text.includes(`T1's prompt: ${stored.prompt_tokens.T1} tokens`), `${id}:\n${text}`);
    } else if (stored.preset === "fleet-sessions") {  // two replicas behind each router (docs/fleets.md)
      const [rr, ca] = [m["round robin"], m["cache-aware"]];
      const pct = (v) => `${Math.round(v * 100)}%`;
      claim(text, "so it takes more of the hits on offer", ca.prefix_hit_rate_achieved > rr.prefix_hit_rate_achieved,
        [`took ${pct(ca.prefix_hit_rate_achieved)}`, `round robin (${pct(rr.prefix_hit_rate_achieved)})`], id);
      assert.ok(text.includes(`held ${pct(rr.prefix_hit_rate_available)} of the prompt tokens`), `${id}:\n${text}`);
      assert.ok(text.includes(`${ca.prompt_tokens_computed} prompt tokens computed, not ${rr.prompt_tokens_computed}`), id);
    } else if (stored.preset === "fleet-herding") {  // one hot prefix, the imbalance guard at 64 and at 4 (docs/fleets.md)
      const [g64, g4, rr] = [m["guard 64"], m["guard 4"], m["round robin"]];
      const f2 = (v) => v.toFixed(2);
      claim(text, "so the guard keeps the load level", g4.mean_load_imbalance < g64.mean_load_imbalance,
        [`(${f2(g4.mean_load_imbalance)} on average)`, `guard 64's (${f2(g64.mean_load_imbalance)})`], id);
      assert.ok(text.includes(`never fires here, imbalance ${f2(g64.mean_load_imbalance)} on average, ${g64.max_load_imbalance} at worst,`
        + ` TTFT ${Math.round(g64.mean_ttft_ms)} ms`), `${id}: the imbalance before the guard:\n${text}`);
      assert.ok(text.includes(`${f2(g4.mean_load_imbalance)}, ${g4.max_load_imbalance} at worst, TTFT ${Math.round(g4.mean_ttft_ms)} ms`),
        `${id}: the imbalance after it:\n${text}`);
      assert.ok(text.includes(`Round robin: ${f2(rr.mean_load_imbalance)}.`), `${id}:\n${text}`);
      assert.ok(g64.max_load_imbalance === 16, `${id}: every request herds onto one replica`);
    } else if (stored.preset === "fleet-one-vs-two") {  // one engine of 4 slots, one of 8, two replicas of 4
      const [four, eight, two] = [m["4 slots"], m["8 slots"], m["2 × 4"]];
      claim(text, "so its first tokens come soonest", two.mean_ttft_ms < Math.min(four.mean_ttft_ms, eight.mean_ttft_ms),
        [`its mean TTFT (${ms0(two.mean_ttft_ms)})`], id);
      assert.ok(text.includes(`4 slots queue them: TTFT ${Math.round(four.mean_ttft_ms)} ms`), `${id}:\n${text}`);
      assert.ok(text.includes(`${two.slo_met} of 16 within the SLO (${eight.slo_met}, ${four.slo_met})`), `${id}:\n${text}`);
      assert.ok(text.includes(`goodput ${two.request_goodput.toFixed(2)}/s`), `${id}:\n${text}`);
    } else if (stored.preset === "pd-vs-colocated") {  // prefill/decode engines beside colocated lanes (docs/disaggregation.md)
      const [c, k, pd] = [m.continuous, m["chunked 64"], m["P/D 1+1"]];
      const w = (v) => (v < 10 ? v.toFixed(1) : String(Math.round(v)));
      claim(text, "so the decoders never stall", pd.p99_itl_ms < Math.min(c.p99_itl_ms, k.p99_itl_ms),
        [`its ITL p99 (${w(pd.p99_itl_ms)} ms)`], id);
      claim(text, "but its first tokens come later, by the copy and the decode queue",
        pd.p50_ttft_ms > Math.max(c.p50_ttft_ms, k.p50_ttft_ms), [`its TTFT p50 (${w(pd.p50_ttft_ms)} ms)`], id);
      assert.ok(text.includes(`stalls every decoder (ITL p99 ${w(c.p99_itl_ms)} ms);`), `${id}:\n${text}`);
      assert.ok(text.includes(`(${pd.pd.blocks} blocks in ${w(pd.pd.ms)} ms)`), `${id}:\n${text}`);
      assert.ok(text.includes(`TTFT p50 ${w(pd.p50_ttft_ms)} ms against ${w(c.p50_ttft_ms)} ms`), `${id}:\n${text}`);
      assert.ok(text.includes(`two long prompts (${stored.prompt_tokens.L1} tokens)`), `${id}:\n${text}`);
    } else if (stored.preset === "mooncake-conversation") {
      const [p, c] = ["prefix cache", "continuous"].map((l) => wall(records[l]));
      claim(text, "so it finishes no later", p <= c, [`finished at ${secs(p)}`, `continuous (${secs(c)}`], id);
      const [mp, mc] = [m["prefix cache"], m.continuous];
      assert.ok(text.includes(`found ${mp.prefix_cache_hit_rate.toFixed(2)} of prompt tokens`), `${id}:\n${text}`);
      assert.ok(text.includes(`computes ${mp.prompt_tokens_computed} prompt tokens, not ${mc.prompt_tokens_computed}`), `${id}`);
      assert.ok(mp.prefix_cache_hit_rate > 0.05 && !mc.prefix_cache_hit_rate, id);
    } else {
      const chunk = longest(records["chunked 64"]);
      const whole = records.continuous.find((r) => r.slots.some((c) => c.request === "LONG" && c.prefill)).ms;  // its one prefill step
      claim(text, "so no step stalls for long", chunk < whole, [ms0(chunk), ms0(whole)], id);
      const [lc, lw] = [m["chunked 64"].requests.LONG.ttft_ms, m.continuous.requests.LONG.ttft_ms];
      claim(text, "but LONG's own first token comes later", lc > lw, [ms0(lc), ms0(lw)], id);
      assert.ok(text.startsWith(`A ${stored.prompt_tokens.LONG}-token prompt`), `${id}:\n${text}`);
    }
  });
}

test("every claim is met both ways by the runs: the noise fell each way", () => {
  for (const claims of Object.values(CLAIMS)) {
    for (const c of claims) assert.deepEqual([...(seen.get(c.says) || [])].sort(), [false, true], c.says);
  }
});

test("fleet-sessions: a run where round robin took more of the hits on offer has its lesson say so", () => {
  const stored = RUNS["fleet-sessions: no noise"];
  const { records } = lessonOf(stored, "fleet");
  const run = { id: "fleet", status: "finished", workload: stored.workload, lanes: stored.lanes, records,
    done: Object.fromEntries(stored.lanes.map((l) => [l, true])), promptTokens: stored.prompt_tokens, t: 0 };
  const backwards = [{ ...TRACE_CLAIMS["fleet-sessions"][0], lane: "round robin", others: ["cache-aware"] }];
  const text = fillLesson(stored.description, stored.preset, deriveRun(run), backwards);
  assert.ok(!text.includes("so it takes more of the hits on offer") && /yet on this run it took \d+%, no more than cache-aware \(\d+%\)/.test(text), text);
});

test("each claim a preset declares is a phrase of its description, of a known kind, on lanes it has", async () => {
  const { readdirSync } = await import("node:fs");
  for (const file of readdirSync(new URL("../../../demos/", import.meta.url)).filter((f) => f.endsWith(".json"))) {
    const d = demo(file.replace(/\.json$/, ""));
    const names = (d.lanes || []).map((l) => (typeof l === "string" ? l : l.name));
    for (const c of d.claims || []) {
      assert.ok(d.description.includes(c.says), `${file}: "${c.says}"`);
      assert.ok(c.check in CHECKS, `${file}: ${c.check}`);
      for (const lane of [c.lane, ...c.others]) assert.ok(names.includes(lane), `${file}: no lane ${lane}`);
    }
  }
});

test("a spectator mid-run reads a prompt's tokens from run_started, before any record holds them", () => {
  const stored = RUNS["long-prompt: no noise"];
  const run = { id: "mid", status: "running", workload: stored.workload, lanes: stored.lanes,
    records: Object.fromEntries(stored.lanes.map((l) => [l, []])), done: {}, promptTokens: stored.prompt_tokens, t: 0 };
  const text = fillLesson(stored.description, stored.preset, deriveRun(run), CLAIMS[stored.preset]);
  assert.ok(text.startsWith(`A ${stored.prompt_tokens.LONG}-token prompt`), text);
  assert.ok(text.includes("so no step stalls for long"), "a claim stays as written while its lanes run");
});

test("a lesson names a request's arrival step as the requests table does: counted from 1", async () => {
  const { readdirSync } = await import("node:fs");
  const dir = new URL("../../../demos/", import.meta.url);
  let named = 0;
  for (const file of readdirSync(dir).filter((f) => f.endsWith(".json"))) {
    const demo = JSON.parse(readFileSync(new URL(file, dir), "utf8"));
    for (const q of demo.requests || []) {
      const said = new RegExp(`\\b${q.id}\\)? arrives at step (\\d+)`).exec(demo.description || "");
      if (!said) continue;
      named += 1;
      assert.equal(Number(said[1]), (q.arrival || 0) + 1, `${file}: ${q.id} has arrival ${q.arrival}`);
    }
  }
  assert.ok(named >= 1, "priorities names the VIP's arrival step");
});

test("the page's lesson stays short when a claim fails: the claim marked, its numbers and noise one click away (issue 38)", async () => {
  const { lessonParts } = await import("../../../static/js/lanes/lesson.js");
  const { NOT_THIS_RUN } = await import("../../../static/js/lanes/claims.js");
  let failed = 0;
  for (const [id, stored] of Object.entries(RUNS).filter(([, s]) => s.preset in CLAIMS || s.preset in TRACE_CLAIMS)) {
    const records = Object.fromEntries(Object.entries(stored.records).map(([lane, recs]) => [lane, recs.map((r) => ({ ...r, lane }))]));
    const run = { id, status: "finished", workload: stored.workload, lanes: stored.lanes, records,
      done: Object.fromEntries(stored.lanes.map((l) => [l, true])), promptTokens: stored.prompt_tokens, t: 0 };
    const claims = CLAIMS[stored.preset] || TRACE_CLAIMS[stored.preset];
    const { text, details } = lessonParts(stored.description, stored.preset, deriveRun(run), claims);
    const plain = lessonParts(stored.description, stored.preset, deriveRun(run), null).text;  // no claim checked
    assert.equal(text.length, plain.length + details.length * (NOT_THIS_RUN.length + 1), `${id}: only the short marks are added`);
    assert.equal(text.split(NOT_THIS_RUN).length - 1, details.length, id);
    for (const d of details) {
      assert.match(d, /^\u201c[^\u201d]+\u201d: /, id);
      assert.match(d, /\d+(\.\d+)? (ms|s)\b/, `${id}: the numbers are in the details: ${d}`);
      if (/usual result|no later on this run/.test(d)) {  // a claim the noise overturned: the noise and any outlier step
        assert.match(d, /step times varied|no step shape repeated/, `${id}: the noise is in the details: ${d}`);
      }
    }
    failed += details.length;
  }
  assert.ok(failed > 0, "the stored runs include a failed claim");
});
