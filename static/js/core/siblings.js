/**
 * Parallel sampling on the page: a request written with `n` samples runs as n siblings, `R3·1` ... `R3·n`
 * (engine/workload/siblings.py has the one rule: the id, a middle dot, the sample number from 1; n = 1 is the request
 * itself). The engine expands them (run_started's `requests`, engine/workload/announce.py), so that every reader
 * (metrics, timeline, tables, tooltip) meets one request per sibling; the editor collapses them back. Pure
 * functions, no DOM.
 */
export const SEP = "\u00b7";

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
