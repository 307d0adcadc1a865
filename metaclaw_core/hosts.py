"""What a host name says about where it is: only loopback addresses stay on this machine."""

from __future__ import annotations

import ipaddress


def is_loopback(host: str) -> bool:
    """True only for addresses that cannot be reached from another machine."""
    host = host.strip().strip("[]")
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name could resolve anywhere: treat it as exposed
