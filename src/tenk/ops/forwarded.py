"""Who a request comes from, seen through the proxies in front of tenk (TENK_TRUSTED_PROXIES).

Behind a proxy, every request's peer is the proxy, so whatever keys on the peer (anonymous search's
budget, the access log, which callers' trace context is continued) would see one client. A proxy adds the
address it took the request from at the right end of X-Forwarded-For; a client may send the header too,
with any addresses in it. So the header is read only from a peer in the trusted networks, and from its
right end: every entry right of the client's was written by a trusted proxy, and the client is the
right-most entry not in a trusted network. The left-most, which servers take once they trust the peer
(uvicorn's and gunicorn's `--forwarded-allow-ips` trust 127.0.0.1 by default), is whatever the client
wrote. When every entry is trusted, the left-most is the farthest hop known. An entry that is not an IP
address (`unknown`, a name) ends the walk: the client is the last address trusted, to its right.

tenk resolves the client here for every server alike, at the edge (`tenk.platform.edge`); the servers' own handling
is switched off (`tenk.serving`). A leaf: it imports nothing of tenk.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

from starlette.types import Scope

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Client = tuple[str, int]

FORWARDED_FOR = b"x-forwarded-for"


def parse_networks(networks: Iterable[str]) -> tuple[Network, ...]:
    """Networks as the settings give them (`tenk.ops.settings.Networks` has checked that each parses)."""
    return tuple(ipaddress.ip_network(network, strict=False) for network in networks)


def address_of(host: str) -> Address | None:
    """The IP address in a peer's host or an X-Forwarded-For entry (bare, `v4:port`, `[v6]` or `[v6]:port`),
    an IPv4-mapped IPv6 address as its IPv4 one; None for anything else."""
    if host.startswith("["):
        end = host.find("]")
        if end < 0:
            return None
        host = host[1:end]
    elif host.count(":") == 1:
        host = host.partition(":")[0]
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def is_in(address: Address | None, networks: tuple[Network, ...]) -> bool:
    return address is not None and any(address in network for network in networks)


class TrustedProxies:
    """The proxies whose X-Forwarded-For is believed, and the client that makes of a request."""

    __slots__ = ("networks",)

    def __init__(self, networks: Iterable[str]) -> None:
        self.networks = parse_networks(networks)

    def client(self, scope: Scope) -> Client | None:
        """The request's client: its peer, or, from a peer in the trusted networks, the right-most address
        of X-Forwarded-For not in them (port 0: the header carries none that can be believed)."""
        peer: Client | None = scope.get("client")
        if not peer or not is_in(address_of(peer[0]), self.networks):
            return peer
        entries = [
            entry
            for name, value in scope["headers"]
            if name == FORWARDED_FOR
            for entry in value.decode("latin-1").split(",")
        ]
        client = peer
        for entry in reversed(entries):
            address = address_of(entry.strip())
            if address is None:
                break
            client = (str(address), 0)
            if not is_in(address, self.networks):
                break
        return client
