"""The machine statement every split lane carries (engine/report/placement.py)."""
import os

from engine.report import placement as P


def test_three_one_thread_ranks_on_fewer_cores_are_oversubscribed_and_the_line_says_so(monkeypatch):
    monkeypatch.setattr(P, "cores", lambda: 2)
    monkeypatch.setattr(P, "memory_domains", lambda: 1)
    procs = [{"role": "driver", "pid": 1, "threads": 2}] + \
        [{"role": f"tp rank {i}", "pid": 10 + i, "threads": 1} for i in range(3)]
    out = P.placement(procs, "gloo all-reduce over loopback TCP", "cpu")
    assert out["oversubscribed"] is True and out["cores"] == 2 and out["memory_domains"] == 1
    assert out["says"] == "3 rank processes of 1 thread on 2 cores, one memory domain: oversubscribed"
    assert out["processes"] == procs and out["transport"] == "gloo all-reduce over loopback TCP"


def test_two_processes_on_two_cores_are_not_oversubscribed(monkeypatch):
    monkeypatch.setattr(P, "cores", lambda: 2)
    monkeypatch.setattr(P, "memory_domains", lambda: 2)
    out = P.placement([{"role": "prefill", "pid": 1, "threads": 1}, {"role": "decode", "pid": 2, "threads": 1}],
                      "shared memory (multiprocessing.shared_memory)")
    assert out["oversubscribed"] is False
    assert out["says"] == "2 processes of 1 thread on 2 cores, 2 memory domains: not oversubscribed"


def test_engines_of_one_process_step_in_turn_so_its_threads_count_once(monkeypatch):
    monkeypatch.setattr(P, "cores", lambda: 2)
    monkeypatch.setattr(P, "memory_domains", lambda: 1)
    both = [{"role": "prefill", "pid": 7, "threads": 2}, {"role": "decode", "pid": 7, "threads": 2}]
    out = P.placement(both, "shared memory (multiprocessing.shared_memory), both sides in this one process")
    assert out["oversubscribed"] is False
    assert out["says"] == ("2 engines in one process of 2 threads, computing in turn, on 2 cores, one memory domain: "
                           "not oversubscribed")
    assert P.placement([{**p, "threads": 3} for p in both], "")["oversubscribed"] is True


def test_cores_and_domains_are_read_from_this_machine(tmp_path):
    assert P.cores() == len(os.sched_getaffinity(0))
    for name in ("node0", "node1", "online", "possible"):
        (tmp_path / name).mkdir()
    assert P.memory_domains(tmp_path) == 2
    assert P.memory_domains(tmp_path / "absent") == 1
