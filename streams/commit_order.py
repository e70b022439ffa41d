"""Offsets committed in order: never past an event that is still being worked on.

faust-streaming 0.15.3 (``faust/transport/consumer.py``, ``Consumer._new_offset``)
commits the first run of consecutive acknowledged offsets of a partition.  With agent
``concurrency`` > 1 a later event can finish before an earlier one, and Faust's guard
against committing past the unfinished head is off by one and skipped when the
partition has no committed offset yet (``perform_seek`` stores offset 0 as None):

* committed 1 (the next offset to read), offset 1 still parsing, 2 and 3 done:
  Faust commits 4 (its guard is ``min(acked) - committed > 1``);
* nothing committed yet, offset 0 still parsing, 1 done: Faust commits 2.

A worker killed then restarts after the unfinished event, which is lost: the kill-workers
drill lost a split PDF's first page range (partition stage, ``partition_concurrency`` 2)
and the document stayed at PARTITIONING (2026-12-04; tests/test_commit_order.py shows
Faust's answer on the same state).

The workaround, in this one place: :func:`in_order_new_offset` replaces the method.  It
commits Faust's first run of consecutive acknowledged offsets, cut before the lowest
offset the consumer has delivered to an agent and not yet seen acknowledged (Faust's
``_unacked_messages``, the set it already drains before a rebalance).  Records reach
the agents in offset order within a partition, so no offset below a delivered one is
still to come; Faust's gap bookkeeping (offsets the broker never delivered, e.g.
compacted away) is kept as it was, so a missing offset never holds commits back.
"""
from __future__ import annotations

from typing import Any, Optional

_FAUST_NEW_OFFSET: Any = None  # faust's own method, kept by install() (tests compare)


def in_order_new_offset(consumer: Any, tp: Any) -> Optional[int]:
    """The offset to commit for ``tp`` (the next one to read), or None for none now.

    ``consumer`` is a faust ``Consumer``: its ``_acked[tp]`` (acknowledged offsets,
    consumed here as Faust does), ``_acked_index[tp]``, ``_gap[tp]`` (an IntervalTree of
    offsets never delivered) and ``_unacked_messages`` (delivered, not yet
    acknowledged) are read under faust's ``ack_lock``, which its acknowledgements
    hold too."""
    from faust.types.tuples import ack_lock

    with ack_lock:
        return _new_offset(consumer, tp)


def _new_offset(consumer: Any, tp: Any) -> Optional[int]:
    from faust.utils.functional import consecutive_numbers

    acked = consumer._acked[tp]
    if not acked:
        return None
    gaps = consumer._gap[tp]
    if gaps:  # as faust: never-delivered offsets up to the highest acked count as acked
        top = max(acked)
        spans = sorted(gaps.overlap(0, top), key=lambda iv: iv.begin)
        if spans:
            filled = [o for iv in spans for o in range(iv.begin, iv.end)]
            acked.extend(o for o in filled if o not in consumer._acked_index[tp])
            gaps.chop(0, max(filled[-1], top + 1))
    acked.sort()
    pending = [m.offset for m in list(consumer._unacked_messages)
               if getattr(m, "tp", None) == tp and not getattr(m, "acked", False)]
    run = next(consecutive_numbers(acked))  # faust's own: the leading run
    if pending:
        lowest = min(pending)
        run = [o for o in run if o < lowest]
        if not run:
            return None  # an earlier event is still being worked on
    del acked[:len(run)]
    consumer._acked_index[tp].difference_update(run)
    return run[-1] + 1


def faust_new_offset() -> Any:
    """faust's own ``Consumer._new_offset`` (installed or not), to show its answers."""
    from faust.transport.consumer import Consumer

    return _FAUST_NEW_OFFSET or Consumer._new_offset


def install() -> None:
    """Make every faust ``Consumer`` use :func:`in_order_new_offset` (idempotent)."""
    global _FAUST_NEW_OFFSET
    if _FAUST_NEW_OFFSET is not None:
        return
    from faust.transport.consumer import Consumer

    def _new_offset(self, tp):  # noqa: ANN001, ANN202 — faust's signature
        return in_order_new_offset(self, tp)

    _FAUST_NEW_OFFSET = Consumer._new_offset
    Consumer._new_offset = _new_offset
