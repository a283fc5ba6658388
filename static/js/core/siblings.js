/**
 * Parallel sampling on the page: a request written with `n` samples runs as n siblings, `R3·1` ... `R3·n`
 * (engine/workload/siblings.py has the one rule: the id, a middle dot, the sample number from 1; n = 1 is the request
 * itself). The wire's workload holds requests as written; the page expands them once (state.js, compare/runs.js)
 * so that every reader (metrics, timeline, tables, tooltip) meets one request per sibling, and the editor
 * collapses them back. Pure functions, no DOM.
 */
export const SEP = "\u00b7";

/** Sample `i` (from 1) of request `parent`: "R3·1". */
export const siblingId = (parent, i) => `${parent}${SEP}${i}`;

/** The workload with each request of n > 1 as its n siblings ({...request, id, group, sample, samples}). */
export function expandSiblings(workload) {
  if (!workload || !Array.isArray(workload.requests)) return workload;
  const requests = workload.requests.flatMap((q) => {
    const n = q && Number.isInteger(q.n) ? q.n : 1;
    if (n <= 1 || q.group !== undefined) return [q];
    const { n: _n, ...rest } = q;
    // each sibling's seed by the rule (seed + i - 1), where JSON numbers hold it exactly; the first's is the request's
    const seedOf = (k) => (Number.isSafeInteger(q.seed) && Number.isSafeInteger(q.seed + k) ? { seed: q.seed + k } : {});
    return Array.from({ length: n }, (_, k) => ({ ...rest, ...(k ? seedOf(k) : {}), id: siblingId(q.id, k + 1),
      group: String(q.id), sample: k + 1, samples: n }));
  });
  return { ...workload, requests };
}

/** The requests as written: each group's first sibling back as its request with its n (what the editor shows). */
export function collapseSiblings(requests) {
  const out = [];
  const at = new Map();
  for (const q of requests || []) {
    if (!q || q.group === undefined || q.group === null) { out.push(q); continue; }
    if (at.has(q.group)) { out[at.get(q.group)].n += 1; continue; }
    const { group, sample: _s, samples: _n, ...rest } = q;
    at.set(group, out.length);
    out.push({ ...rest, id: group, n: 1 });
  }
  return out;
}

/** {parent, sample, samples} of a sibling's id in `workload` (expanded), or null for a request of its own. */
export function siblingOf(id, workload) {
  const q = workload && (workload.requests || []).find((r) => String(r.id) === String(id));
  return q && q.group !== undefined && q.group !== null ? { parent: q.group, sample: q.sample, samples: q.samples }
    : null;
}

/** What a tooltip says of a sibling: "sample 1 of 3 of R3" (null for a request of its own). */
export function sampleLine(id, workload) {
  const s = siblingOf(id, workload);
  return s ? `sample ${s.sample} of ${s.samples} of ${s.parent}` : null;
}
