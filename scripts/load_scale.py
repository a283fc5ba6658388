"""Scale-out load on loopback: one run watched by many spectators spread over several web processes.

    python scripts/load_scale.py                                  # 1000 spectators, 4 webs, 2 sim engine workers
    python scripts/load_scale.py --spectators 40 --webs 2         # a quick one
    python scripts/load_scale.py --single --spectators 1000       # the same against one `python -m app --backend sim`
    python scripts/load_scale.py --real --eventlet                # real model in the workers, eventlet web processes
    python scripts/load_scale.py --pace 0                         # the simulator flat out (most watchers join late)
    python scripts/load_scale.py --redis-restart 2                # Redis killed mid-run, back after 2 s

It starts redis-server on a free port, M engine workers (`python -m app.engine_worker`: the simulator, paced to
real time by default (--pace), unless --real) and N web processes (`python -m app --message-queue ...`), all on
one temporary run store, and waits until every web's /healthz says ready. Then S spectators (python-socketio
asyncio clients, WebSocket only) connect round-robin across the webs. Each engine worker is kept busy with a
long "hold" run; one submitter on web 1 submits the preset, which waits in the queue while 90% of the spectators
are told its id and `watch` it; once every one of them has been answered the hold runs are cancelled and the run
starts, so these join before its first tick. The other 10% (--late) watch once it has ticked: they join mid-run
and get the backlog replayed (or, past its end, the whole run). --no-hold: nobody waits for anybody, and with
1000 spectators most join mid-run. It waits until every spectator has `run_finished`.

Reported (JSON, then a summary): spectators connected; complete (every tick t = 1..T exactly once, live or
replayed; duplicates and missing ticks are counted apart); whose final metrics equal the submitter's; p50/p95/max
of receive time - `sent_at` over live ticks (ms; includes this one process's own lag with 1000 sockets); each
process's peak RSS; wall time. --redis-restart S: once the late spectators are answered and the submitter has
RESTART_AT_TICK ticks, redis-server is killed (-9) and started again S seconds later (with its append-only file,
unless --no-persist), while every client stays connected: the counts above say what that cost. Exit code 0 when every spectator was complete with equal metrics, else 1.
`run_scale_load(...)` returns the same report for a test. Every process it started is stopped at the end, also on
Ctrl-C or an error; the logs are kept (and their folder printed) when something failed.
"""
import argparse
import asyncio
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
from engine.report.metrics import percentile  # noqa: E402  (the engine's nearest-rank definition, as scripts/load.py)
from scripts.scale_procs import (READY_TIMEOUT_S, Processes, RssSampler, ScaleError, kill_redis,  # noqa: E402
                                 start_processes, start_redis_again)
from scripts.scale_spectator import CONNECT_RETRIES, Watcher, steps_of  # noqa: E402

RUN_TIMEOUT_S = 300
CONNECT_BATCH = 50
LATE = 0.1               # the share of spectators that watch only once the run has ticked (they get a backlog)
RESTART_AT_TICK = 3      # --redis-restart: Redis is killed once the submitter has this many ticks
HOLD_TIMEOUT_S = 60      # longest the engine workers are kept busy while the early spectators join
# What keeps each engine worker busy while the spectators join the queued run (cancelled then): long enough
# (256 steps) for any pace but 0.
HOLD_WORKLOAD = {"name": "hold", "description": "keeps an engine worker busy; cancelled by load_scale.py",
                 "slots": 4, "requests": [{"id": f"H{i}", "prompt": "Count slowly to one hundred.",
                                           "max_new_tokens": 256, "ignore_eos": True} for i in range(1, 5)]}



async def _drive(urls: list[str], spectators: int, workload: dict, run_timeout_s: float, connect_batch: int,
                 connect_retries: int, holders: int, late: float, phases: dict, blink=None) -> dict:
    """Connect everyone; hold the engine workers busy (`holders` runs) while the early spectators join the
    submitted run, then let it start; the late ones watch once it has ticked. Returns the clients, by role."""
    names = [f"web{i + 1}" for i in range(len(urls))]
    watchers = [Watcher(i, urls[i % len(urls)], names[i % len(urls)]) for i in range(spectators)]
    submitter = Watcher(-1, urls[0], names[0])
    blockers = [Watcher(-2 - i, urls[i % len(urls)], names[i % len(urls)]) for i in range(holders)]
    clients = [submitter, *blockers, *watchers]
    n_late = min(spectators, round(spectators * late))
    early, tardy = watchers[:spectators - n_late], watchers[spectators - n_late:]  # the last ones: every web has some
    hold = {"runs": 0, "early_joined_before_release": None, "released_after_s": None}
    restart = None   # --redis-restart: the submitter's ticks when Redis was killed, and whether its run had ended
    lags: list[float] = []
    probe = None
    try:
        t0 = time.monotonic()
        for i in range(0, spectators, connect_batch):
            await asyncio.gather(*(w.connect(connect_retries) for w in watchers[i:i + connect_batch]))
        await asyncio.gather(*(c.connect(connect_retries) for c in (submitter, *blockers)))
        phases["connect"] = time.monotonic() - t0
        if not submitter.connected:
            raise ScaleError(f"the submitter could not connect to {urls[0]}: {submitter.connect_errors}")
        t1 = time.monotonic()
        probe = asyncio.ensure_future(_loop_lag(lags))
        blockers = [b for b in blockers if b.connected]
        for b in blockers:
            await b.submit(HOLD_WORKLOAD)
        if blockers:  # every engine worker busy: the run will wait in the queue while the spectators join it
            await _until(lambda: all(b.started[b.run_id] or b.done.is_set() for b in blockers), HOLD_TIMEOUT_S)
            hold["runs"] = sum(1 for b in blockers if b.started[b.run_id])
        run_id = await submitter.submit(workload)
        early = [w for w in early if w.connected]
        await asyncio.gather(*(w.watch(run_id) for w in early))
        phases["watches_sent"] = time.monotonic() - t1
        if blockers:
            await _wait_all([w.joined for w in early], HOLD_TIMEOUT_S)
            hold["early_joined_before_release"] = sum(any(q.get("run_id") == run_id for q in w.queued)
                                                      and not w.ticks.get(run_id) for w in early)
            hold["released_after_s"] = round(time.monotonic() - t1, 2)
            await asyncio.gather(*(b.cancel() for b in blockers))
        tardy = [w for w in tardy if w.connected]
        if tardy:
            await _wait_all([submitter.ticked], run_timeout_s)
            await asyncio.gather(*(w.watch(run_id) for w in tardy))
        if blink is not None:  # Redis restarts mid-run, every client still connected
            await _wait_all([w.joined for w in tardy], 30)
            await _until(lambda: sum(submitter.ticks[run_id].values()) >= RESTART_AT_TICK, run_timeout_s)
            t2 = time.monotonic()
            restart = {"at_tick": sum(submitter.ticks[run_id].values()), "run_done_before": submitter.done.is_set()}
            await blink()
            phases["redis_restart"] = time.monotonic() - t2
        await _wait_all([c.done for c in (submitter, *early, *tardy)], run_timeout_s - (time.monotonic() - t1))
        phases["run"] = time.monotonic() - t1
        await asyncio.sleep(1.0)  # a tick sent twice, or after run_finished, would arrive about now
        return {"submitter": submitter, "watchers": watchers, "late": n_late, "hold": hold, "loop_lags": lags,
                "restart": restart}
    finally:
        if probe is not None:
            probe.cancel()
        for i in range(0, len(clients), 100):
            await asyncio.gather(*(c.close() for c in clients[i:i + 100]), return_exceptions=True)


async def _loop_lag(lags: list[float], every: float = 0.05) -> None:
    """How late this process's event loop wakes up (seconds): the part of the tick latency that is the client's."""
    while True:
        t = time.monotonic()
        await asyncio.sleep(every)
        lags.append(time.monotonic() - t - every)


async def _until(condition, timeout: float) -> bool:
    """True once `condition()` holds (checked every 20 ms); False after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


async def _wait_all(events: list[asyncio.Event], timeout: float) -> bool:
    """True once every event is set; False after `timeout` seconds."""
    try:
        await asyncio.wait_for(asyncio.gather(*(e.wait() for e in events)), max(0.0, timeout))
        return True
    except asyncio.TimeoutError:
        return False


# -------------------------------------------------------------------------------------------------- the run

def run_scale_load(spectators: int = 1000, webs: int = 4, workers: int = 2, preset: str = "mixed",
                   real: bool = False, single: bool = False, eventlet: bool = False, pace: float = 1.0,
                   hold: bool = True, late: float = LATE, run_timeout_s: float = RUN_TIMEOUT_S,
                   ready_timeout_s: float = READY_TIMEOUT_S,
                   connect_batch: int = CONNECT_BATCH, connect_retries: int = CONNECT_RETRIES,
                   log_dir: str | os.PathLike | None = None, keep_logs: bool = False,
                   python: str = sys.executable, redis_restart_s: float | None = None, persist: bool = True) -> dict:
    """Start the processes, run the load, stop them; the report (see the module's doc). Call it from outside an
    event loop. Raises ScaleError when the processes do not start (its message names the logs); the logs' folder
    is removed afterwards unless `log_dir` was given, `keep_logs` is set or the run was not clean."""
    if spectators < 1 or webs < 1 or workers < 1:
        raise ValueError("spectators, webs and workers must be at least 1")
    workload = json.loads((ROOT / "demos" / f"{preset}.json").read_text())
    _raise_fd_limit()
    wall0 = time.monotonic()
    logs = Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix="batch-lanes-scale-"))
    logs.mkdir(parents=True, exist_ok=True)
    keep = keep_logs or log_dir is not None
    data_dir = logs / "data"
    procs = Processes(logs)
    sampler = None
    clean = False
    try:
        started = start_processes(procs, webs=1 if single else webs, workers=workers, single=single, real=real,
                                  eventlet=eventlet, data_dir=data_dir, python=python,
                                  ready_timeout_s=ready_timeout_s, pace=pace, persist=persist)
        blink = None

        async def blink_redis():  # kill it, and after redis_restart_s start it again on this thread
            await asyncio.to_thread(kill_redis, procs)
            await asyncio.sleep(redis_restart_s)
            start_redis_again(procs, started["redis_cmd"])
        if not single and redis_restart_s is not None:
            blink = blink_redis
        phases = {"startup": time.monotonic() - wall0, "timeout_s": run_timeout_s}
        sampler = RssSampler(procs.procs)
        sampler.start()
        holders = (1 if single else workers) if hold else 0
        drove = asyncio.run(_drive(started["urls"], spectators, workload, run_timeout_s, connect_batch,
                                   connect_retries, holders, late, phases, blink))
        rss = sampler.stop()
        procs.check_alive()
        report = _report(drove, rss, phases, procs, single=single, real=real, eventlet=eventlet,
                         pace=None if real else pace, preset=preset, webs=len(started["urls"]),
                         workers=0 if single else workers)
        report["wall_s"] = round(time.monotonic() - wall0, 1)
        clean = report["ok"]
        report["log_dir"] = str(logs) if keep or not clean else None
        return report
    finally:
        if sampler is not None and sampler.is_alive():
            sampler.halt.set()
        procs.stop()
        if clean and not keep:
            shutil.rmtree(logs, ignore_errors=True)
        elif procs.procs:
            print(f"logs of every process: {logs}", file=sys.stderr)


def _report(drove: dict, rss: dict, phases: dict, procs: Processes, *,
            single: bool, real: bool, eventlet: bool, pace: float | None, preset: str, webs: int, workers: int) -> dict:
    submitter, watchers = drove["submitter"], drove["watchers"]
    run_id = submitter.run_id
    sub_finished = submitter.finished.get(run_id) or []
    metrics = sub_finished[0] if sub_finished and isinstance(sub_finished[0], dict) else None
    steps = steps_of(metrics) if metrics else None
    sub = submitter.check(steps, metrics)
    checks = [w.check(steps, metrics) for w in watchers]
    connected = [w for w in watchers if w.connected]
    latencies = [x for w in [submitter, *watchers] for x in w.latencies]
    lags = drove["loop_lags"]
    by_web: dict[str, dict] = {}
    for w, c in zip(watchers, checks):
        row = by_web.setdefault(w.web, {"spectators": 0, "connected": 0, "complete": 0, "metrics_equal": 0})
        row["spectators"] += 1
        row["connected"] += w.connected
        row["complete"] += c["complete"]
        row["metrics_equal"] += c["metrics_equal"]
    problems = []
    if not sub["finished"]:
        problems.append(f"the submitter got no run_finished for {run_id} (errors: {submitter.errors[:3]}, "
                        f"dropped: {submitter.dropped})")
    unfinished = sum(1 for w, c in zip(watchers, checks) if w.connected and not c["finished"])
    if unfinished:
        problems.append(f"{unfinished} connected spectators got no run_finished (timeout {phases.get('timeout_s')} s, "
                        f"or a run_error, or a dropped connection)")
    for name, code in procs.died.items():
        problems.append(f"{name} exited with code {code} during the run; see {procs.log_path(name)}")
    for w, c in zip(watchers, checks):
        if len(problems) >= 20:
            break
        if not w.connected:
            problems.append(f"spectator {w.index} ({w.web}) could not connect: {w.connect_errors[-1:]}")
        elif not c["complete"] or not c["metrics_equal"]:
            problems.append(f"spectator {w.index} ({w.web}): finished {c['finished']}, missing {c['missing']}, "
                            f"duplicated {c['duplicated']}, unexpected {c['unexpected']}, metrics equal "
                            f"{c['metrics_equal']}, live {c['live']}, replayed {c['replayed']}"
                            + (f", errors {w.errors[:2]}" if w.errors else "")
                            + (f", dropped ({w.dropped})" if w.dropped else ""))
    tracebacks = [name for name in procs.procs
                  if "Traceback (most recent call last)" in procs.log_path(name).read_text(errors="replace")]
    joined = Counter(c["joined"] for c in checks if c["joined"])
    complete = sum(c["complete"] for c in checks)
    equal = sum(c["metrics_equal"] for c in checks)
    report = {
        "mode": "single" if single else "scale-out", "backend": "model" if real else "sim", "pace": pace,
        "async_mode": "eventlet" if eventlet else "threading", "preset": preset, "webs": webs, "workers": workers,
        "run_id": run_id, "steps": steps,
        "spectators": {
            "requested": len(watchers), "connected": len(connected),
            "connect_retried": sum(1 for w in connected if w.connect_errors),
            "complete": complete, "metrics_equal": equal,
            "with_missing": sum(1 for c in checks if c["missing"]),
            "with_duplicates": sum(1 for c in checks if c["duplicated"]),
            "finished_twice": sum(c["finished_twice"] for c in checks),
            "dropped": sum(1 for w in connected if w.dropped), "with_run_error": sum(1 for w in watchers if w.errors),
            "watched_late": drove["late"],
            "joined": {k: joined.get(k, 0) for k in ("before_first_tick", "mid_run", "after_last_tick")},
        },
        "ticks": {"missing": sum(c["missing"] for c in checks), "duplicated": sum(c["duplicated"] for c in checks),
                  "unexpected": sum(c["unexpected"] for c in checks), "live": sum(c["live"] for c in checks),
                  "replayed": sum(c["replayed"] for c in checks)},
        "hold": drove["hold"],
        "redis_restart": drove["restart"],
        "submitter": {"complete": sub["complete"], "missing": sub["missing"], "duplicated": sub["duplicated"]},
        "latency_ms": {"n": len(latencies), "p50": _ms(percentile(latencies, 50)),
                       "p95": _ms(percentile(latencies, 95)), "max": _ms(max(latencies, default=None))},
        "client_loop_lag_ms": {"p50": _ms(percentile(lags, 50)), "p95": _ms(percentile(lags, 95)),
                               "max": _ms(max(lags, default=None))},
        "rss_peak_mib": rss,
        "by_web": by_web,
        "phases_s": {k: round(v, 2) for k, v in phases.items() if k != "timeout_s"},
        "logs_with_traceback": tracebacks,
        "problems": problems,
    }
    report["ok"] = (bool(watchers) and complete == equal == len(watchers) and sub["complete"]
                    and not procs.died)
    return report


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 1)


def format_report(r: dict) -> str:
    s, t, lat = r["spectators"], r["ticks"], r["latency_ms"]
    what = (f"{r['webs']} web process(es) + {r['workers']} engine worker(s) over Redis" if r["mode"] == "scale-out"
            else "one single-process server")
    backend = r["backend"] + (f" (pace {r['pace']:g})" if r["pace"] is not None else "")
    lines = [
        f"{what}, backend {backend}, {r['async_mode']}, preset {r['preset']} ({r['steps']} steps), "
        f"run {r['run_id']}",
        f"spectators {s['requested']}: connected {s['connected']} ({s['connect_retried']} after a retry), "
        f"complete {s['complete']}, metrics equal to the submitter's {s['metrics_equal']}",
        f"joined before the first tick {s['joined']['before_first_tick']}, mid-run {s['joined']['mid_run']}, "
        f"after the last tick {s['joined']['after_last_tick']} ({s['watched_late']} watched late; "
        f"{r['hold']['runs']} hold runs, {r['hold']['early_joined_before_release']} early spectators answered before "
        f"the run was let go); dropped {s['dropped']}, with a run_error {s['with_run_error']}",
        f"ticks: live {t['live']}, replayed {t['replayed']}; missing {t['missing']} "
        f"({s['with_missing']} spectators), duplicated {t['duplicated']} ({s['with_duplicates']} spectators), "
        f"out of range {t['unexpected']}",
        f"engine step -> tick arrival (live, n={lat['n']}): p50 {lat['p50']} ms, p95 {lat['p95']} ms, "
        f"max {lat['max']} ms (this client's own event-loop lag: p50 {r['client_loop_lag_ms']['p50']} ms, "
        f"p95 {r['client_loop_lag_ms']['p95']} ms, max {r['client_loop_lag_ms']['max']} ms)",
        "peak RSS MiB: " + ", ".join(f"{k} {v}" for k, v in r["rss_peak_mib"].items()),
        "phases s: " + ", ".join(f"{k} {v}" for k, v in r["phases_s"].items()) + f"; wall time {r['wall_s']} s",
    ]
    if r["redis_restart"]:
        lines.append(f"Redis killed at the submitter's tick {r['redis_restart']['at_tick']} (its run "
                     f"{'had ended' if r['redis_restart']['run_done_before'] else 'in flight'}), back after "
                     f"{r['phases_s'].get('redis_restart')} s")
    if r["logs_with_traceback"]:
        lines.append(f"a traceback in the logs of: {', '.join(r['logs_with_traceback'])}")
    lines += [f"problem: {p}" for p in r["problems"]]
    lines.append("OK" if r["ok"] else "NOT CLEAN")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spectators", type=int, default=1000)
    parser.add_argument("--webs", type=int, default=4, help="web processes (ignored with --single)")
    parser.add_argument("--workers", type=int, default=2, help="engine workers (ignored with --single)")
    parser.add_argument("--preset", default="mixed", help="a demo name (demos/NAME.json)")
    parser.add_argument("--real", action="store_true", help="the real model in the engine workers (default: sim)")
    parser.add_argument("--single", action="store_true", help="one `python -m app` process, no Redis")
    parser.add_argument("--eventlet", action="store_true", help="web processes in eventlet mode")
    parser.add_argument("--pace", type=float, default=1.0,
                        help="simulator steps take X times their modelled time (default 1: real time; 0: flat out)")
    parser.add_argument("--late", type=float, default=LATE,
                        help=f"share of spectators that watch only once the run has ticked (default {LATE})")
    parser.add_argument("--no-hold", dest="hold", action="store_false",
                        help="do not keep the engine workers busy while the spectators join")
    parser.add_argument("--timeout", type=float, default=RUN_TIMEOUT_S, help="seconds to wait for run_finished")
    parser.add_argument("--batch", type=int, default=CONNECT_BATCH, help="spectators connecting at once")
    parser.add_argument("--keep-logs", action="store_true", help="keep the logs' folder also after a clean run")
    parser.add_argument("--json-out", help="also write the JSON report to this file")
    parser.add_argument("--redis-restart", type=float, metavar="S", help="kill Redis mid-run, start it S s later")
    parser.add_argument("--no-persist", dest="persist", action="store_false",
                        help="Redis without its append-only file (a restart comes back empty)")
    args = parser.parse_args(argv)

    def terminated(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, terminated)
    try:
        report = run_scale_load(args.spectators, args.webs, args.workers, args.preset, args.real, args.single,
                                args.eventlet, args.pace, args.hold, args.late, run_timeout_s=args.timeout,
                                connect_batch=args.batch, keep_logs=args.keep_logs,
                                redis_restart_s=args.redis_restart, persist=args.persist)
    except ScaleError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted: every process it started has been stopped", file=sys.stderr)
        return 130
    print(json.dumps(report, indent=2))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(report, indent=2) + "\n")
    print(format_report(report))
    return 0 if report["ok"] else 1


def _raise_fd_limit() -> None:
    """1000 sockets here (and in a single server process, which inherits it) pass the usual soft limit of 1024."""
    try:
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        want = 65536 if hard == resource.RLIM_INFINITY else hard
        if soft != resource.RLIM_INFINITY and soft < want:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    except (ImportError, ValueError, OSError):
        pass


if __name__ == "__main__":
    sys.exit(main())
