"""Schemathesis hooks for the API fuzz run (tests/test_tenants.py): a check that
fails any response carrying another project's data — the strings listed in
``RAGSTREAM_FUZZ_FORBIDDEN`` (comma-separated: a marker word of that project's
document, its file name, its scoped document id).  Loaded with
``SCHEMATHESIS_HOOKS=tests/fuzz_hooks.py``.  Each response checked appends a line to
the file ``RAGSTREAM_FUZZ_SEEN`` names, so the test knows the check ran (schemathesis
does not list its checks on success)."""
from __future__ import annotations

import os

import schemathesis

FORBIDDEN = [s for s in os.environ.get("RAGSTREAM_FUZZ_FORBIDDEN", "").split(",") if s]
SEEN = os.environ.get("RAGSTREAM_FUZZ_SEEN", "")


@schemathesis.check
def no_cross_project_data(ctx, response, case):
    """The response must not hold any forbidden string (another project's data)."""
    body = response.content or b""
    if SEEN:
        with open(SEEN, "a") as seen:
            seen.write(f"{case.method} {case.path} {response.status_code}\n")
    for word in FORBIDDEN:
        if word.encode() in body:
            raise AssertionError(f"response to {case.method} {case.path} holds another project's data ({word!r})")
