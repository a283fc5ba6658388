"""A lane's fleet options, checked at the edge: `data_parallel_size` (2 to 4 replicas), `router` and its knobs.

A lane that sets them runs as a fleet (engine/fleet.py): N continuous engines behind a router (engine/sched/router.py).
Every refusal names the field: an unknown router, a size out of range, a router option on a lane of one replica, a
knob of another router. It does not know how a fleet runs.
"""
from engine.config import MAX_REPLICAS, MIN_REPLICAS, ROUTER_OPTIONS, ROUTERS, FleetConfig
from engine.limits import Limits, WorkloadError

FLEET_KEYS = {"data_parallel_size", "router", *ROUTER_OPTIONS}


def fleet_option(item: dict, at: str, limits: Limits) -> FleetConfig | None:
    """A lane's data_parallel_size, router and router knobs as a FleetConfig (None: a lane of one engine)."""
    given = [k for k in sorted(FLEET_KEYS) if k in item]
    size, others = item.get("data_parallel_size", 1), [k for k in given if k != "data_parallel_size"]
    if size != 1 and (isinstance(size, bool) or not isinstance(size, int) or not MIN_REPLICAS <= size <= MAX_REPLICAS):
        raise WorkloadError(f"{at}.data_parallel_size", f"must be an integer from {MIN_REPLICAS} to {MAX_REPLICAS} "
                                                        f"(1: a lane of one engine), got {str(size)[:40]}")
    if size == 1:
        if others:
            raise WorkloadError(f"{at}.{others[0]}", "is a router option, and this lane has one replica: give it "
                                                     f"data_parallel_size {MIN_REPLICAS} to {MAX_REPLICAS}")
        return None
    if not limits.fleets:
        raise WorkloadError(f"{at}.data_parallel_size", "data-parallel lanes are off on this server (limits.fleets)")
    if item.get("engine", "batch-lanes") != "batch-lanes" or item.get("policy") != "continuous":
        raise WorkloadError(f"{at}.data_parallel_size", "takes a continuous lane of our engine: each replica is a "
                                                        "whole continuous engine")
    if "router" not in item:
        raise WorkloadError(f"{at}.router", f"is required with data_parallel_size: one of {', '.join(ROUTERS)}")
    for key, routers in ROUTER_OPTIONS.items():
        if key in item and item["router"] not in routers:
            raise WorkloadError(f"{at}.{key}", f"applies to the {' and '.join(routers)} router, not to "
                                               f"{str(item['router'])[:40]!r}")
    try:
        return FleetConfig(size, item["router"], **{k: item[k] for k in ROUTER_OPTIONS if k in item})
    except ValueError as e:
        key = next((k for k in ("data_parallel_size", "router", *ROUTER_OPTIONS) if str(e).startswith(k)), None)
        raise WorkloadError(f"{at}.{key}" if key else at, str(e).split(" ", 1)[1]) from None
