/**
 * This page's own submits: how many a minute the server takes from it (/api/limits) and when it sent its recent
 * ones, so that a submit the server would refuse (the class's submits locked, or this page's submits a minute
 * spent) is refused here with the server's words, and the run on screen is never stopped for a submit that cannot
 * start. It knows the class's lock and its role, nothing of the run state.
 */
export function createSubmits() {
  let limit = null;  // submits a minute the server takes from this page, outside a class's teacher
  let times = [];    // when this page sent its recent submits (performance.now() ms)
  return {
    setLimit(value) { limit = Number(value) || null; },
    sent() { times = [...times.slice(-60), performance.now()]; },
    /** Why a submit would be refused now ({message, field, code}); null: it may go. `klass`: class.js's. */
    refusal(klass) {
      if (klass.locked()) {
        return { message: `class ${klass.info.code}: the teacher has locked submits for now; watch the teacher's run `
          + "(your own can go once they unlock them)", field: "class", code: "locked" };
      }
      const recent = times.filter((t) => performance.now() - t < 60_000);
      if (limit && klass.role !== "teacher" && recent.length >= limit) {
        const wait = Math.ceil((60_000 - (performance.now() - recent[recent.length - limit])) / 1000);
        return { message: `too many submits: the limit is ${limit} per minute per client; wait ${wait} s`,
          field: "submit", code: "rate_limited" };
      }
      return null;
    },
  };
}
