"""The callback signature: ``X-Ragstream-Signature: t=<unix seconds>,v1=<hex>[,v1=<hex>]``.

Each ``v1`` is the hex HMAC-SHA256 of ``f"{t}.".encode() + body`` under one of the
project's signing secrets (the secret string's UTF-8 bytes as ``ragstream apikey
secret`` prints them, not hex-decoded).  ``t`` is the time of the attempt, so a
retried callback carries a fresh one.  Normally there is one ``v1``; for
``settings.callback_secret_overlap_s`` (24 h) after ``ragstream apikey secret
--rotate`` there are two, the new secret's first, so a receiver may switch to the
new secret at any time in that window.

A receiver verifies in three steps (:func:`verify_signature` does them, and has no
dependency beyond the standard library, so it can be copied as is):

1. split the header on ``,`` into ``key=value`` items; take ``t`` and every ``v1``;
2. refuse when ``|now - t|`` exceeds its tolerance (300 s here): a captured callback
   cannot be replayed later;
3. compute ``hmac.new(secret, f"{t}.".encode() + body, sha256).hexdigest()`` over the
   raw request body (before any JSON parsing) and accept when it equals any ``v1``
   (constant-time compare).

The scheme is the one Stripe documents for its webhooks, so receivers may know it.
"""
from __future__ import annotations

import hashlib
import hmac
import time
from typing import Iterable, Optional

SIGNATURE_HEADER = "X-Ragstream-Signature"
DEFAULT_TOLERANCE_S = 300.0  # 5 minutes, as Stripe's and Slack's webhook libraries use


def _digest(secret: str, t: int, body: bytes) -> str:
    return hmac.new(secret.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()


def sign(secrets: str | Iterable[str], body: bytes, t: Optional[int] = None) -> str:
    """The header value ``t=<t>,v1=<hex>[,v1=<hex>…]`` for ``body``.

    ``secrets``: one secret or several (the current one first; during a rotation's
    overlap also the previous one).  ``t``: Unix time in whole seconds (default now).
    Raises ValueError when no secret is given.
    """
    keys = [secrets] if isinstance(secrets, str) else [s for s in secrets if s]
    if not keys:
        raise ValueError("sign() needs at least one secret")
    t = int(time.time()) if t is None else int(t)
    return ",".join([f"t={t}"] + [f"v1={_digest(k, t, body)}" for k in keys])


def parse_signature(header: str) -> tuple[Optional[int], list[str]]:
    """``(t, [v1 values])`` of a header; t is None when missing or not an integer.
    Unknown keys (a future ``v2``) are ignored."""
    t: Optional[int] = None
    v1: list[str] = []
    for item in header.split(","):
        key, sep, value = item.strip().partition("=")
        if not sep:
            continue
        if key == "t":
            try:
                t = int(value)
            except ValueError:
                return None, []
        elif key == "v1":
            v1.append(value.strip())
    return t, v1


def verify_signature(header: Optional[str], body: bytes, secret: str,
                     tolerance_s: float = DEFAULT_TOLERANCE_S, now: Optional[float] = None) -> bool:
    """True when ``header`` signs ``body`` under ``secret`` with a timestamp within
    ``tolerance_s`` seconds of ``now`` (default: the current Unix time).

    False for a missing or malformed header, a stale or future timestamp, or no
    matching ``v1`` (constant-time compare against each).  ``body`` must be the raw
    request bytes.
    """
    if not header or not secret:
        return False
    t, candidates = parse_signature(header)
    if t is None or not candidates:
        return False
    if abs((time.time() if now is None else now) - t) > tolerance_s:
        return False
    expected = _digest(secret, t, body)
    return any(hmac.compare_digest(expected, c) for c in candidates)
