"""A socket test client for the in-process app (`connect` in tests/conftest.py makes them)."""
import time


class SocketProbe:
    """A Flask-SocketIO test client that keeps every event it received, in order, as (name, payload).

    It reads the client's packet list by index and never clears it, so events the engine worker appends
    from its own thread can't be lost between two reads."""

    def __init__(self, client):
        self.client = client
        self.events: list[tuple[str, object]] = []

    def emit(self, event: str, *args) -> None:
        self.client.emit(event, *args)

    def poll(self) -> list[tuple[str, object]]:
        new = self.client.queue[len(self.events):]
        self.events += [(p["name"], p["args"][0] if p["args"] else None) for p in new]
        return self.events

    def named(self, name: str, run_id: str | None = None) -> list:
        return [p for n, p in self.poll() if n == name and (run_id is None or p.get("run_id") == run_id)]

    def wait_for(self, name: str, run_id: str | None = None, timeout: float = 180) -> dict:
        """The first `name` event (for `run_id`, if given); fails the test after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while not self.named(name, run_id):
            assert time.monotonic() < deadline, f"no {name} event within {timeout} s; got {[n for n, _ in self.events]}"
            time.sleep(0.02)
        return self.named(name, run_id)[0]

    def disconnect(self) -> None:
        if self.client.is_connected():
            self.client.disconnect()
