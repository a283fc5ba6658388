"""The worker processes of a lane whose model is split over processes (tensor-parallel ranks, pipeline stages): spawned,
joined to the driver by one pipe each, waited on with a timeout, and stopped with the lane.

`RankGroup` is what a split lane's runner drives: it spawns one process per part (each runs `target(i, *args[i])`,
which joins the lane's gloo group through the driver's `GroupStore` and answers on its pipe), collects every process's reply with a
deadline, and turns a process that dies, fails or stops answering into one error naming it (the others stopped,
never left hanging). Processes end when the lane is done (`close`), when the group is dropped, or when the driver's
process goes (each checks its parent while idle). It knows nothing of models, rows or what the processes compute.
"""
import datetime
import os
import random
import socket
import time
import weakref

import torch.multiprocessing as mp

PORTS = range(29800, 29900)  # this project's torch.distributed master ports
START_TIMEOUT_S = 300        # spawning, importing torch and loading a part of the model, on a loaded 2-core machine
IDLE_POLL_S = 1.0            # how often an idle worker process checks that its driver still lives


class SplitLaneError(RuntimeError):
    """A process of a split lane died, failed or stopped answering: the lane cannot go on."""


class GroupStore:
    """The rendezvous of a split lane's gloo group: a TCPStore the driver holds for the lane's life, on a port the OS
    picks as it binds. Lanes starting at once (the suite's two halves, a server's runs) never share one, as they
    could with a port tried free here and bound by a worker seconds later (a group joined by another lane's ranks)."""

    def __init__(self, timeout_s: float):
        import torch.distributed as dist
        self.store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                                   timeout=datetime.timedelta(seconds=timeout_s))
        self.port = self.store.port


def join_group(rank: int, size: int, port: int, timeout_s: float) -> None:
    """A worker process's side: join the lane's gloo group as `rank` of `size` through the driver's store on `port`."""
    import torch.distributed as dist
    timeout = datetime.timedelta(seconds=timeout_s)
    store = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=timeout)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=size, timeout=timeout)


def free_port() -> int:
    """A port of PORTS nothing listens on, tried in random order (scripts' own groups; a lane's uses `GroupStore`)."""
    for port in random.sample(PORTS, len(PORTS)):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
                return port
            except OSError:
                continue
    raise SplitLaneError(f"no free port in {PORTS.start}-{PORTS.stop - 1} for a split lane's group")


def next_message(conn, parent: int) -> tuple | None:
    """A worker process's side: the driver's next message, waited for; None when the driver says "stop" or its
    process `parent` is gone (the worker then ends)."""
    while not conn.poll(IDLE_POLL_S):
        if os.getppid() != parent:
            return None
    msg = conn.recv()
    return None if msg[0] == "stop" else msg


def one_line(e: BaseException) -> str:
    """An exception as the one line a worker says to its driver."""
    return f"{str(e).splitlines()[0][:300]}" if str(e) else type(e).__name__


def stop_processes(procs: list, conns: list) -> None:
    """Tell every process to stop, then end any that did not within a few seconds."""
    for conn in conns:
        try:
            conn.send(("stop",))
        except (OSError, ValueError):
            pass
    for p in procs:
        p.join(timeout=5)
        if p.is_alive():
            p.terminate()
            p.join(timeout=5)


class RankGroup:
    """`len(args)` processes, process i running `target(i, its pipe's end, *args[i])` under the name `f"{name}{i}"`;
    errors say `f"{label} {noun} {i}"` ("tensor-parallel rank 1", "pipeline stage 1") and are raised as `error`."""

    def __init__(self, target, args: list[tuple], name: str, label: str, noun: str,
                 error: type[RuntimeError] = SplitLaneError):
        self.size, self.label, self.noun, self.error = len(args), label, noun, error
        ctx = mp.get_context("spawn")
        self.procs, self.conns = [], []
        for i, a in enumerate(args):
            mine, theirs = ctx.Pipe()
            p = ctx.Process(target=target, args=(i, theirs, *a), name=f"{name}{i}", daemon=True)
            p.start()
            self.procs.append(p)
            self.conns.append(mine)
        self.stopper = weakref.finalize(self, stop_processes, self.procs, self.conns)  # a lane dropped mid-run

    def replies(self, timeout_s: float, kind: str) -> list:
        """Each process's next reply payload, in order ("ready": its one payload; else the tuple after the kind);
        `error` (every process stopped) if one fails, dies or is silent for `timeout_s`."""
        out, deadline = [None] * self.size, time.monotonic() + timeout_s
        waiting = set(range(self.size))
        while waiting:
            for i in sorted(waiting):
                conn, proc = self.conns[i], self.procs[i]
                if conn.poll(0.05 if len(waiting) > 1 else 0.005):
                    try:
                        msg = conn.recv()
                    except (EOFError, OSError):
                        msg = ("error", f"{self.noun} {i} closed its pipe")
                    if msg[0] == "error":
                        self.fail(msg[1])
                    out[i] = msg[1] if kind == "ready" else msg[1:]
                    waiting.discard(i)
                elif not proc.is_alive():
                    self.fail(f"{self.noun} {i} stopped")
            if waiting and time.monotonic() > deadline:
                self.fail(f"{self.noun} {min(waiting)} did not answer within {timeout_s:.0f} s")
        return out

    def ask(self, i: int, timeout_s: float) -> tuple:
        """Process i's next reply (the tuple after its kind), as `replies` would wait for it alone."""
        conn, deadline = self.conns[i], time.monotonic() + timeout_s
        while not conn.poll(0.005):
            if not self.procs[i].is_alive():
                self.fail(f"{self.noun} {i} stopped")
            if time.monotonic() > deadline:
                self.fail(f"{self.noun} {i} did not answer within {timeout_s:.0f} s")
        msg = conn.recv()
        if msg[0] == "error":
            self.fail(msg[1])
        return msg[1:]

    def fail(self, what: str):
        """Stop every process and raise, naming first one that died (the others' errors follow from it)."""
        for p in self.procs:
            p.join(timeout=0.5)
        dead = sorted(((i, p) for i, p in enumerate(self.procs) if p.exitcode is not None),
                      key=lambda d: d[1].exitcode == 0)  # one killed or crashed before one that ended cleanly
        self.close()
        if dead:
            i, p = dead[0]
            raise self.error(f"{self.label} {self.noun} {i} (pid {p.pid}) died with exit code {p.exitcode}; "
                             f"the lane's run ends ({what})")
        raise self.error(f"{self.label} {what}; the lane's run ends")

    def send(self, msg: tuple, to: int | None = None) -> None:
        """`msg` to every process (or to process `to` alone)."""
        for i, conn in enumerate(self.conns):
            if to is not None and i != to:
                continue
            try:
                conn.send(msg)
            except (OSError, ValueError):
                self.fail(f"{self.noun} {i} is gone")

    def close(self) -> None:
        """Stop every process (the lane is done, or failed). Idempotent."""
        self.stopper()
