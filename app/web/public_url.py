"""The address a QR code or a shared link carries: where a phone in the room can open the page.

A configured public URL (`--public-url`, BATCH_LANES_PUBLIC_URL) wins. Else the address the page was opened by,
but only when its host is one of this server's own names (its bind host, localhost, the machine's hostname and
addresses): a client-chosen Host header is never encoded. Else the bind address. A loopback address reaches
this computer only, and says so. This module knows Flask's request and the settings, nothing of runs.
"""
import functools
import ipaddress
import socket
from urllib.parse import urlsplit

WILDCARDS = {"0.0.0.0", "::", ""}


@functools.lru_cache(maxsize=8)
def own_names(bind_host: str) -> frozenset[str]:
    """This machine's names and addresses, and the host the server listens on."""
    names = {"localhost", "127.0.0.1", "::1", bind_host.lower()}
    for name in {socket.gethostname(), socket.getfqdn()}:
        names.add(name.lower())
        try:
            names |= {info[4][0] for info in socket.getaddrinfo(name, None)}
        except OSError:
            pass
    return frozenset(names - WILDCARDS)


def _machine_address() -> str:
    """A non-loopback address of this machine (for a server bound to every interface), else 127.0.0.1."""
    found = sorted(n for n in own_names("") if _is_ip(n) and not ipaddress.ip_address(n).is_loopback and ":" not in n)
    return found[0] if found else "127.0.0.1"


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def public_base(config: dict, request) -> str:
    """The base URL (ending in /) a link or QR code for a phone carries."""
    if config.get("PUBLIC_URL"):
        return config["PUBLIC_URL"].rstrip("/") + "/"
    asked = urlsplit(f"//{request.host}").hostname or ""
    bind = config.get("HOST") or "127.0.0.1"
    if asked.lower() in own_names(bind):
        return request.host_url
    host = _machine_address() if bind in WILDCARDS else bind
    return f"http://{f'[{host}]' if ':' in host else host}:{config.get('PORT') or 5000}/"


def is_loopback(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    return host == "localhost" or (_is_ip(host) and ipaddress.ip_address(host).is_loopback)


def share_info(config: dict, request) -> dict:
    """`GET /api/share`: the base URL links carry, and, when it is loopback, why a phone cannot open it."""
    base = public_base(config, request)
    warning = None
    if is_loopback(base):
        warning = (f"{urlsplit(base).hostname} is this computer only: a phone cannot reach it. Start the server with "
                   f"--host 0.0.0.0 and open the page by this machine's network address, or with "
                   f"--public-url http://ADDRESS:PORT")
    return {"base": base, "loopback": warning is not None, "warning": warning}
