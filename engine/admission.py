"""Admission orders: in which order a continuous lane admits its waiting requests (`scheduling_policy`).

One registry, `ORDERS`; the config checks names against it, the scheduler sorts by it, the page and the
CLI list it. An order is a sort key over waiting requests (first = admitted first; the sort is stable, so
equal keys stay in arrival order) and a rank that joins a running request's precedence when the lane must
preempt (lower = kept longer). Adding an order is one entry here. This module knows requests' specs,
nothing of slots, blocks or tensors.
"""
from collections.abc import Callable
from dataclasses import dataclass

from engine.request import Request


@dataclass(frozen=True)
class AdmissionOrder:
    name: str                              # the `scheduling_policy` value
    label: str                             # how the page and the CLI name it
    description: str                       # one sentence for the editor's tip and the glossary
    queue_key: Callable[[Request], tuple]  # waiting requests are admitted in ascending key order (stable)
    rank: Callable[[Request], tuple]       # a running request's precedence before its admission step: lower stays

    def to_dict(self) -> dict:
        return {"name": self.name, "label": self.label, "description": self.description}


def _none(r: Request) -> tuple:
    return ()


def _priority(r: Request) -> tuple:
    return (-r.spec.priority,)


FCFS = AdmissionOrder("fcfs", "first come, first served",
                      "Waiting requests take free slots in arrival order.", _none, _none)
PRIORITY = AdmissionOrder("priority", "priority",
                          "Higher priority first (arrival order within a priority); under memory pressure the "
                          "lowest priority is preempted first.", _priority, _priority)
SJF = AdmissionOrder("sjf", "shortest job first",
                     "Fewest max_new_tokens first (arrival order on ties): short requests stop waiting behind "
                     "long ones, which lowers the mean latency, and the longest request waits longest.",
                     lambda r: (r.spec.max_new_tokens,), _none)

ORDERS: dict[str, AdmissionOrder] = {o.name: o for o in (FCFS, PRIORITY, SJF)}
