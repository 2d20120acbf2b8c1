"""Whether the Hugging Face hub can be reached, asked once per process and answered in seconds.

The hub's clients retry an unreachable host for about a minute (5 retries with back-off) before
they fail. A run that would fail anyway learns it here instead: ``HF_HUB_OFFLINE`` set means no
attempt at all; otherwise one TCP connection to the hub (``$HF_ENDPOINT`` or huggingface.co)
with a short timeout decides for the rest of the process, and every later hub access reads only
the local cache.
"""

from __future__ import annotations

import os
import socket
from typing import Any
from urllib.parse import urlsplit

from imprint.data.catalog import HUB_URL

__all__ = [
    "OFFLINE_ADVICE",
    "hub_endpoint",
    "hub_offline",
    "hub_reachable",
    "hub_unreachable_reason",
]

_TRUE = {"1", "true", "yes", "on"}

#: seconds the one probe waits for the hub to accept a connection
PROBE_TIMEOUT = 4.0
#: endpoint -> whether it accepted the probe (a first failed connection is remembered)
_PROBED: dict[str, bool] = {}

OFFLINE_ADVICE = (
    "Offline, use a local folder, gguf:PATH or an alias, or fetch the files on a connected "
    "machine into the hub cache (HF_HOME) and set HF_HUB_OFFLINE=1 here"
)


def hub_reachable() -> bool:
    """False when ``HF_HUB_OFFLINE`` is set or the hub refused (or ignored) one connection
    attempt this process made; the answer is kept, so the network is asked at most once."""
    if hub_offline():
        return False
    endpoint = hub_endpoint()
    if endpoint not in _PROBED:
        parts = urlsplit(endpoint)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            socket.create_connection((parts.hostname or "", port), timeout=PROBE_TIMEOUT).close()
            _PROBED[endpoint] = True
        except OSError:  # no route, no DNS, refused or timed out: all mean "not reachable now"
            _PROBED[endpoint] = False
    return _PROBED[endpoint]


def hub_unreachable_reason() -> str:
    """Why :func:`hub_reachable` said no, for an error message."""
    if hub_offline():
        return "the Hugging Face hub is switched off (HF_HUB_OFFLINE is set)"
    return (
        f"the Hugging Face hub ({hub_endpoint()}) did not accept a connection within "
        f"{PROBE_TIMEOUT:g} s; HF_HUB_OFFLINE=1 skips the attempt"
    )


def hub_offline() -> bool:
    """True when the user switched the hub off (``HF_HUB_OFFLINE``): no network attempt."""
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in _TRUE:
        return True
    try:
        return bool(_hub_constants().HF_HUB_OFFLINE)
    except ImportError:
        return True


def hub_endpoint() -> str:
    """The hub to talk to: ``$HF_ENDPOINT`` (a mirror) or huggingface.co, read at call time."""
    return os.environ.get("HF_ENDPOINT", "").strip().rstrip("/") or HUB_URL


def _hub_constants() -> Any:
    import huggingface_hub.constants

    return huggingface_hub.constants
