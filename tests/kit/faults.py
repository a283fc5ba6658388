"""A lane (or a fleet's replica) that fails as a crashed engine would: its `step` raises from its Nth call on."""


def fail_from(lane, call: int, message: str) -> None:
    """Make `lane.step` raise RuntimeError(`message`) on its `call`-th call and every later one."""
    real, calls = lane.step, []

    def step():
        calls.append(1)
        if len(calls) >= call:
            raise RuntimeError(message)
        return real()
    lane.step = step
