"""A failover TCP proxy for tests: every new connection goes to the first backend that accepts it, so all of a
page's requests reach web process A while it lives and web process B once A is gone — what a balancer in front
of several web processes does for a page when one of them dies.

    with failover_proxy([("127.0.0.1", 5001), ("127.0.0.1", 5002)]) as url:
        page.goto(url)

This module knows sockets, nothing of HTTP or of the app.
"""
import socket
import threading
from contextlib import contextmanager


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass  # either side closed: the other copy loop ends the pair
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed


def _connect_first(backends: list[tuple[str, int]]) -> socket.socket | None:
    for address in backends:
        try:
            return socket.create_connection(address, timeout=2)
        except OSError:
            continue  # this backend is down: the next one
    return None


@contextmanager
def failover_proxy(backends: list[tuple[str, int]]):
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    stopping = threading.Event()

    def serve() -> None:
        while not stopping.is_set():
            try:
                client, _ = listener.accept()
            except OSError:
                return  # the listener was closed
            upstream = _connect_first(backends)
            if upstream is None:
                client.close()
                continue
            upstream.settimeout(None)
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pipe, args=(a, b), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stopping.set()
        listener.close()
