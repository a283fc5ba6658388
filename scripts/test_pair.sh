#!/usr/bin/env bash
# make test's pytest: two pytest processes at once on CI's two cores. One runs the tests that mostly wait on the
# simulator processes they start (the Redis tier's deployments, the slow tier's servers and CLI runs: WAITS below),
# the other every other test (the real model, vLLM, the browser, in-process engines), so the waiting overlaps the
# computing instead of adding to it; a test marked model or browser is never in WAITS, so the two never both
# compute. (pytest-xdist's --dist loadgroup would say the same with marks, but under pytest 9 it ignores the groups.)
# The waiting half writes to a log printed after the other half ends; the exit status fails if either failed.
set -u
PY=${PY:-.venv/bin/python}
WAITS="(redis or slow) and not model and not browser"
log=$(mktemp "${TMPDIR:-/tmp}/batch-lanes-waits.XXXXXX")
"$PY" -m pytest -m "$WAITS" -p no:cacheprovider --durations=10 "$@" > "$log" 2>&1 &
waits=$!
trap 'kill "$waits" 2>/dev/null; rm -f "$log"' EXIT
"$PY" -m pytest -m "not ($WAITS)" --durations=25 "$@"
computes=$?
wait "$waits"
waited=$?
echo "== the tests that wait on simulator processes ($WAITS), run beside the rest:"
cat "$log"
# 5 is pytest's "no test selected" (a half that the arguments leave empty), not a failure
[ "$computes" = 5 ] && computes=0
[ "$waited" = 5 ] && waited=0
exit $(( computes || waited ))
