"""The drills' verdicts: pure functions over what a drill recorded (no I/O).

Inputs are plain values so the checks can be tested on hand-made data:

- status events: any objects with ``document_id``, ``version``, ``status`` (str),
  ``at`` (Unix seconds, float) and ``chunks_total`` (int) — e.g.
  :class:`schemas.StatusEvent` or :class:`Ev`;
- Milvus contents: ``{document_id: set of chunk ids present}``;
- callbacks: :class:`Callback` (idempotency key header, parsed JSON body, time);
- the versions a drill expects: ``{document_id: current version}``.

The promises checked (issue 8): every document's current version is terminal and
COMPLETED; Milvus holds exactly ``{document_id}:{version}:{i}`` for
``i < chunks_total`` of the current version (``lost`` = missing ids, ``extra`` =
any other id, including every id of another version); each version has at most one
COMPLETED event and never both COMPLETED and FAILED (``duplicate_completions``);
exactly one callback idempotency key per terminal version; no document already
COMPLETED is worked on again (``reprocessed``).
"""
from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Mapping, Optional, Sequence

TERMINAL = ("COMPLETED", "FAILED", "DELETED")
# stage statuses that mean "a worker started (re)processing this version"
STAGE_STATUSES = ("NORMALIZING", "PARTITIONING", "CHUNKING", "ENHANCING", "EMBEDDING", "INDEXING")
RESTART_STATUSES = ("NORMALIZING", "PARTITIONING")


@dataclass(frozen=True)
class Ev:
    """A status event reduced to what the checks read (same attribute names as
    schemas.StatusEvent)."""

    document_id: str
    version: int
    status: str
    at: float
    chunks_total: int = 0
    stage: str = ""
    error: Optional[str] = None


@dataclass(frozen=True)
class Callback:
    """One HTTP request the drill's receiver got: ``key`` is the Idempotency-Key
    header (None when missing), ``body`` the parsed JSON (None when not JSON)."""

    key: Optional[str]
    body: Optional[dict[str, Any]]
    at: float = 0.0


def event_key(ev: Any) -> tuple:
    """Identity of one emitted event: (document, version, status, at).  The same
    record read twice (a re-read of the changelog) has the same identity; two
    emissions never do (``at`` is the emission time)."""
    return (ev.document_id, int(ev.version), str(ev.status), float(ev.at))


def dedupe_events(events: Iterable[Any]) -> list[Any]:
    """Events with re-reads of the same record removed, ordered by ``at``."""
    seen: dict[tuple, Any] = {}
    for ev in events:
        seen.setdefault(event_key(ev), ev)
    return sorted(seen.values(), key=lambda e: float(e.at))


def by_version(events: Iterable[Any]) -> dict[tuple[str, int], list[Any]]:
    """``{(document_id, version): [events ordered by at]}`` (deduplicated)."""
    out: dict[tuple[str, int], list[Any]] = defaultdict(list)
    for ev in dedupe_events(events):
        out[(ev.document_id, int(ev.version))].append(ev)
    return dict(out)


def terminal_status(events: Sequence[Any]) -> Optional[str]:
    """The first terminal status among one version's events, or None."""
    for ev in events:
        if ev.status in TERMINAL:
            return ev.status
    return None


def all_terminal(expected: Mapping[str, int], events: Iterable[Any]) -> list[str]:
    """Documents whose expected version has no terminal event yet (sorted)."""
    versions = by_version(events)
    return sorted(d for d, v in expected.items() if terminal_status(versions.get((d, v), [])) is None)


def duplicate_completions(events: Iterable[Any]) -> dict[tuple[str, int], int]:
    """``{(document, version): duplicates}`` for versions completed more than once
    (``n - 1`` for n distinct COMPLETED emissions) or both COMPLETED and FAILED
    (+1); versions without duplicates are left out."""
    out = {}
    for key, evs in by_version(events).items():
        counts = Counter(e.status for e in evs)
        dup = max(0, counts["COMPLETED"] - 1) + (1 if counts["COMPLETED"] and counts["FAILED"] else 0)
        if dup:
            out[key] = dup
    return out


def completed_chunks_total(events: Sequence[Any]) -> Optional[int]:
    """``chunks_total`` of one version's first COMPLETED event, or None."""
    for ev in events:
        if ev.status == "COMPLETED":
            return int(ev.chunks_total)
    return None


def expected_chunk_ids(document_id: str, version: int, total: int) -> set[str]:
    """``{document_id}:{version}:{i}`` for ``i < total``."""
    return {f"{document_id}:{version}:{i}" for i in range(total)}


def chunk_diff(expected: set[str], present: set[str]) -> tuple[set[str], set[str]]:
    """``(lost, extra)``: expected ids missing from ``present``, and present ids not
    expected (another version's, or an index past the total)."""
    return expected - present, present - expected


def reprocessed(events: Iterable[Any], *, completed_before: Optional[float] = None,
                after: Optional[float] = None,
                statuses: Sequence[str] = RESTART_STATUSES) -> set[str]:
    """Documents that a worker started on again after their version was COMPLETED.

    A document counts when one of its versions has a COMPLETED event (at ``t_c``,
    and ``t_c < completed_before`` when given) and a later event of that same version
    whose status is in ``statuses`` and whose time is after ``t_c`` (and after
    ``after`` when given: e.g. the moment of a redeploy).
    """
    out = set()
    for (doc, _version), evs in by_version(events).items():
        done = [e.at for e in evs if e.status == "COMPLETED"]
        if not done:
            continue
        t_c = min(done)
        if completed_before is not None and t_c >= completed_before:
            continue
        floor = max(t_c, after) if after is not None else t_c
        if any(e.status in statuses and e.at > floor for e in evs):
            out.add(doc)
    return out


def reprocess_evidence(events: Iterable[Any], docs: Iterable[str], *, after: Optional[float] = None,
                       statuses: Sequence[str] = RESTART_STATUSES) -> dict[str, str]:
    """For each document in ``docs``: the first event that counts as reprocessing,
    as ``"v{version} {status} by {stage}, {s:.1f}s after COMPLETED"``."""
    wanted, out = set(docs), {}
    for (doc, version), evs in by_version(events).items():
        done = [e.at for e in evs if e.status == "COMPLETED"]
        if doc not in wanted or doc in out or not done:
            continue
        floor = max(min(done), after) if after is not None else min(done)
        for e in evs:
            if e.status in statuses and e.at > floor:
                out[doc] = f"v{version} {e.status} by {e.stage or '?'}, {e.at - min(done):.1f}s after COMPLETED"
                break
    return out


def callback_problems(expected: Mapping[str, int], events: Iterable[Any],
                      callbacks: Iterable[Callback]) -> list[str]:
    """What is wrong with the callbacks (empty list = fine).

    Each expected (document, version) that reached a terminal state must have exactly
    one distinct idempotency key, and that key must be ``{doc}:v{version}:{status}``
    for the version's terminal status.  No version may get two distinct keys (a
    second terminal state); requests without a key are a problem.  Repeats of one
    key (retries) are not counted here.
    """
    problems: list[str] = []
    keys: dict[tuple[str, int], set[str]] = defaultdict(set)
    for cb in callbacks:
        body = cb.body or {}
        if not cb.key:
            problems.append(f"callback without idempotency key: {str(body)[:120]}")
            continue
        doc, version = body.get("document_id"), body.get("version")
        if doc is None or version is None:
            problems.append(f"callback {cb.key} without document_id/version in its body")
            continue
        keys[(doc, int(version))].add(cb.key)
    versions = by_version(events)
    for (doc, version), ks in keys.items():
        if len(ks) > 1:
            problems.append(f"{doc} v{version}: {len(ks)} distinct callbacks {sorted(ks)}")
    for doc, version in expected.items():
        status = terminal_status(versions.get((doc, version), []))
        if status is None:
            continue
        want = f"{doc}:v{version}:{status}"
        got = keys.get((doc, version), set())
        if not got:
            problems.append(f"{doc} v{version}: no callback for {status}")
        elif want not in got:
            problems.append(f"{doc} v{version}: callback {sorted(got)} but status {status}")
    return problems


@dataclass
class DrillResult:
    """One drill's verdict; ``line()`` is its report line."""

    name: str
    passed: bool = False
    seconds: float = 0.0
    documents: int = 0
    lost: int = 0
    extra: int = 0
    duplicate_completions: int = 0
    reprocessed: int = 0
    not_terminal: int = 0
    failed: int = 0
    callbacks_ok: bool = False
    leaked: int = 0
    notes: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)

    def line(self) -> str:
        """``name passed=… seconds=… lost=… extra=… duplicate_completions=…
        reprocessed=… leaked=… callbacks_ok=… notes=…``."""
        notes = "; ".join(self.notes) or "-"
        return (f"{self.name:<18} passed={str(self.passed).lower():<5} seconds={self.seconds:6.1f} "
                f"lost={self.lost} extra={self.extra} duplicate_completions={self.duplicate_completions} "
                f"reprocessed={self.reprocessed} leaked={self.leaked} "
                f"callbacks_ok={str(self.callbacks_ok).lower()} "
                f"notes={notes}")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def evaluate(name: str, *, expected: Mapping[str, int], events: Iterable[Any],
             present: Mapping[str, set[str]], callbacks: Iterable[Callback],
             chunk_totals: Optional[Mapping[tuple[str, int], int]] = None,
             reprocess_after: Optional[float] = None,
             reprocess_statuses: Sequence[str] = RESTART_STATUSES,
             seconds: float = 0.0, notes: Sequence[str] = ()) -> DrillResult:
    """Every check of one drill.

    Args:
        expected: ``{document_id: current version}`` for every document ingested.
        events: the project's status events (re-reads are deduplicated).
        present: ``{document_id: chunk ids in Milvus}`` (documents absent = none).
        callbacks: every request the receiver got for the project.
        chunk_totals: ``{(document, version): chunks}`` from another source (the
            processed JSON) for versions without a COMPLETED event.
        reprocess_after: the redeploy (or fault) time: with it, documents completed
            before it that get any event in ``reprocess_statuses`` after it count as
            reprocessed; without it, any restart status after COMPLETED counts.
    """
    events = dedupe_events(events)
    versions = by_version(events)
    result = DrillResult(name, seconds=round(seconds, 1), documents=len(expected), notes=list(notes))
    lost_ids, extra_ids, unknown = set(), set(), []
    for doc, version in sorted(expected.items()):
        evs = versions.get((doc, version), [])
        status = terminal_status(evs)
        if status is None:
            result.not_terminal += 1
        elif status != "COMPLETED":
            result.failed += 1
            errs = [e.error for e in evs if e.status == "FAILED" and getattr(e, "error", None)]
            result.details.setdefault("failed", {})[doc] = f"v{version} {status}: {errs[0] if errs else ''}"
        total = completed_chunks_total(evs)
        if total is None and chunk_totals:
            total = chunk_totals.get((doc, version))
        have = set(present.get(doc, set()))
        if total is None:
            unknown.append(doc)
            # expected ids unknown: any id of another version is still extra
            extra_ids |= {c for c in have if not c.startswith(f"{doc}:{version}:")}
            continue
        lost, extra = chunk_diff(expected_chunk_ids(doc, version, total), have)
        lost_ids |= lost
        extra_ids |= extra
    for doc, ids in present.items():  # documents the drill did not ingest
        if doc not in expected:
            extra_ids |= set(ids)
    result.lost, result.extra = len(lost_ids), len(extra_ids)
    dups = duplicate_completions(events)
    result.duplicate_completions = sum(dups.values())
    if reprocess_after is None:
        again = reprocessed(events, statuses=reprocess_statuses)
    else:
        again = reprocessed(events, completed_before=reprocess_after, after=reprocess_after,
                            statuses=reprocess_statuses)
    result.reprocessed = len(again)
    cb_problems = callback_problems(expected, events, callbacks)
    result.callbacks_ok = not cb_problems
    if result.not_terminal:
        result.notes.append(f"not terminal: {result.not_terminal}/{len(expected)}")
    if result.failed:
        result.notes.append(f"failed: {result.failed}")
    if unknown:
        result.notes.append(f"chunk count unknown (no COMPLETED): {len(unknown)}")
    if cb_problems:
        result.notes.append(f"callback problems: {len(cb_problems)}")
    result.details.update({
        "lost": sorted(lost_ids)[:50], "extra": sorted(extra_ids)[:50],
        "duplicate_completions": {f"{d}:v{v}": n for (d, v), n in dups.items()},
        "reprocessed": reprocess_evidence(events, again, after=reprocess_after,
                                          statuses=reprocess_statuses),
        "callback_problems": cb_problems[:50],
        "not_terminal": all_terminal(expected, events),
    })
    result.passed = (not result.not_terminal and not result.failed and not unknown
                     and not result.lost and not result.extra and not result.duplicate_completions
                     and not result.reprocessed and result.callbacks_ok)
    return result


def summary_line(results: Sequence[DrillResult]) -> str:
    """``drills_passed=<n>/<m> lost=<chunks> extra=<chunks>
    duplicate_completions=<n> reprocessed=<docs> leaked=<n>`` over all drills
    (``leaked``: finds of another project's or a deleted document's data, the
    tenants and lifecycle drills: drills/leaks.py)."""
    return (f"drills_passed={sum(r.passed for r in results)}/{len(results)} "
            f"lost={sum(r.lost for r in results)} extra={sum(r.extra for r in results)} "
            f"duplicate_completions={sum(r.duplicate_completions for r in results)} "
            f"reprocessed={sum(r.reprocessed for r in results)} "
            f"leaked={sum(r.leaked for r in results)}")


def report_json(results: Sequence[DrillResult], **meta: Any) -> str:
    """The JSON report: ``{"meta": …, "drills": [...], "summary": line}``."""
    return json.dumps({"meta": meta, "drills": [r.as_dict() for r in results],
                       "summary": summary_line(results)}, indent=2, default=str)
