"""One TLS context for every HTTP client of the process.

httpx builds a new SSL context for each client it makes, parsing certifi's CA bundle each time (about 20 ms of
CPU). Pitcrew makes clients often (a metrics reader per read, a fleet per service), so each of them is given this
one instead; contexts are safe to share between clients and threads once made."""

from __future__ import annotations

import functools
import ssl

import httpx


@functools.cache
def tls_context() -> ssl.SSLContext:
    """httpx's own default verification (certifi's bundle, or SSL_CERT_FILE / SSL_CERT_DIR), made on first use."""
    return httpx.create_ssl_context()
