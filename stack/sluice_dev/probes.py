"""Small health probes used by the servers: a TCP connect and an HTTP(S) GET."""

from __future__ import annotations

import socket
import ssl
import urllib.error
import urllib.request


def tcp_open(host: str, port: int, timeout: float = 1.0) -> str | None:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except OSError as err:
        return f"{host}:{port} not accepting connections ({err.strerror or err})"


def http_ok(url: str, *, token: str | None = None, timeout: float = 2.0) -> str | None:
    """``None`` if ``url`` answers 200; TLS certificates are not verified (loopback)."""
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=context) as resp:
            status = int(resp.status)
    except urllib.error.HTTPError as err:
        return f"{url} answered {err.code}"
    except (OSError, urllib.error.URLError) as err:
        return f"{url} unreachable ({err})"
    return None if status == 200 else f"{url} answered {status}"
