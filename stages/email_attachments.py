"""The attachments of an e-mail and the messages forwarded in it, each partitioned as a
document of its own, to a bounded depth; one that fails never loses the others.

unstructured's ``partition_email`` partitions attachments itself (``auto.partition``:
none of our type checks, limits or converter sandbox) and lets any error of one
attachment fail the whole message; a forwarded message (a ``message/rfc822`` part)
trips its bytes-only assertion.  ``stages.partition`` therefore asks it for the body
only and calls :func:`attachment_elements`, which walks the message's attachments
(``EmailMessage.iter_attachments``: every part that is not the body, inline ones
included) and hands each to a ``partition`` callback (normalize + partition of the
stage, so every check of a top-level upload applies): a forwarded message as an
``eml``, which recurses here one level deeper.

Below ``RAGSTREAM_MAX_EMAIL_DEPTH`` levels (``stages.limits``) attachments are not
opened; each one left out, and each that failed, is named with its reason in the
returned ``skipped`` list (partition records it as ``metadata.skipped_parts``).  An
attachment with no text (an empty file, a logo OCR finds nothing in) is dropped
silently.  Elements of an attachment keep their own ``filename`` and ``page_number``
and get ``attached_to_filename`` (the message that holds it) as unstructured sets it;
their ids are re-derived from the attachment's position so that the same file
attached twice gives distinct ids.
"""
from __future__ import annotations

import hashlib
import logging
import re
from contextvars import ContextVar
from pathlib import Path
from typing import Callable

from stages.errors import DocumentError, EmptyDocument
from stages.limits import limit

log = logging.getLogger(__name__)

#: ``partition(file, filetype or None to detect, display name) -> element dicts``
PartitionPart = Callable[[Path, "str | None", str], list]

_depth: ContextVar[int] = ContextVar("email_depth", default=0)  # messages open around this one


def attachment_elements(message: Path, filename: str, tmp: Path,
                        partition: PartitionPart) -> tuple[list[dict], list[str]]:
    """``(element dicts of every attachment, skipped)`` of the e-mail file ``message``.

    ``filename`` is the message's display name (``attached_to_filename`` of what it
    holds); ``tmp`` a scratch directory for the attachments' bytes; ``partition`` the
    callback described in the module docstring.  ``skipped`` holds
    ``"<name>: <reason>"`` for each attachment that failed or lies deeper than the
    depth limit.  Raises only what reading the message raises (the caller's parse
    failure) and BaseExceptions (the partition deadline).
    """
    import email
    import email.policy

    with open(message, "rb") as fh:
        msg = email.message_from_binary_file(fh, policy=email.policy.default)
    parts = list(msg.iter_attachments())
    if not parts:
        return [], []
    depth, cap = _depth.get() + 1, limit("max_email_depth")
    if cap and depth > cap:
        return [], [f"{_name(part, n)}: not opened, attachments nested deeper than {cap} levels "
                    "(RAGSTREAM_MAX_EMAIL_DEPTH)" for n, part in enumerate(parts, start=1)]
    elements: list[dict] = []
    skipped: list[str] = []
    token = _depth.set(depth)
    try:
        for n, part in enumerate(parts, start=1):
            name = _name(part, n)
            try:
                found = _one(part, n, name, tmp, partition)
            except EmptyDocument:
                continue
            except DocumentError as exc:
                skipped.append(f"{name}: {exc.reason}")
                continue
            except Exception as exc:  # noqa: BLE001 - one attachment's failure is its own
                log.warning("attachment %s of %s failed: %r", name, filename, exc)
                skipped.append(f"{name}: {type(exc).__name__}")
                continue
            for d in found:
                d["element_id"] = hashlib.sha256(f"{n}\0{d['element_id']}".encode()).hexdigest()[:32]
                d["metadata"].setdefault("attached_to_filename", filename)
                skipped += [f"{name}/{s}" for s in d["metadata"].pop("skipped_parts", [])
                            if f"{name}/{s}" not in skipped]
            elements += found
    finally:
        _depth.reset(token)
    return elements, skipped


def _one(part, n: int, name: str, tmp: Path, partition: PartitionPart) -> list[dict]:
    """Element dicts of one attachment (a forwarded message is partitioned as e-mail)."""
    if part.get_content_type() == "message/rfc822":
        inner = part.get_payload(0) if part.is_multipart() else part.get_content()
        path = tmp / f"attachment-{_depth.get()}-{n}.eml"
        path.write_bytes(inner.as_bytes())
        return partition(path, "eml", name)
    data = part.get_payload(decode=True) or b""
    if not data:
        raise EmptyDocument("empty attachment")
    path = tmp / f"attachment-{_depth.get()}-{n}{_suffix(name)}"
    path.write_bytes(data)
    return partition(path, None, name)


def _name(part, n: int) -> str:
    """The attachment's file name (no directories), else what it is and its position."""
    raw = part.get_filename()
    if raw:
        return re.split(r"[\\/]", raw.strip())[-1][:200] or f"attachment {n}"
    if part.get_content_type() == "message/rfc822":
        inner = part.get_payload(0) if part.is_multipart() else None
        subject = inner.get("Subject", "") if inner is not None else ""
        return f"forwarded message {n}" + (f" ({subject[:100]})" if subject else "")
    return f"attachment {n} ({part.get_content_type()})"


def _suffix(name: str) -> str:
    """A short, safe extension of ``name`` (detection's tie-breaker), or ``""``."""
    suffix = Path(name).suffix.lower()
    return suffix if re.fullmatch(r"\.[a-z0-9]{1,8}", suffix) else ""
