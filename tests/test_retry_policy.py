"""The stage retry policy as tenacity states it (agents/retry_policy.stage_retrying)
and as the stage runner applies it: which errors are retried, the waits, the
deadline, the unexpected-error limit, CancelledError.  No stack needed: the work
functions raise the errors themselves."""
from __future__ import annotations

import asyncio
import re
from types import SimpleNamespace

import pytest

from agents.retry_policy import BACKOFF_MAX_S, UNEXPECTED_ATTEMPTS, backoff_s, stage_retrying
from stages.errors import DocumentError
from tests.conftest import run


class Flaky:
    """Raises ``errors`` in turn, then returns ``"ok"``; counts calls."""

    def __init__(self, *errors: BaseException):
        self.errors, self.calls = list(errors), 0

    async def __call__(self):
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


async def _no_sleep(_seconds: float) -> None:
    return None


async def _run_policy(call, deadline_s=None, *, transient_only=False, sleep=_no_sleep):
    """(result or the exception raised, the waits tenacity chose)."""
    waits: list[float] = []
    retrying = stage_retrying(deadline_s, transient_only=transient_only,
                              before_sleep=lambda rs: waits.append(rs.upcoming_sleep))
    retrying.sleep = sleep
    try:
        async for attempt in retrying:
            with attempt:
                result = await call()
        return result, waits
    except BaseException as exc:  # noqa: BLE001 — the test inspects it
        return exc, waits


def test_transient_errors_wait_with_doubling_backoff_capped():
    flaky = Flaky(*[ConnectionRefusedError("connection refused")] * 9)
    result, waits = run(_run_policy(flaky))
    assert result == "ok" and flaky.calls == 10
    assert waits == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]
    assert waits == [backoff_s(n) for n in range(1, 10)] and max(waits) == BACKOFF_MAX_S


def test_permanent_error_is_not_retried():
    flaky = Flaky(DocumentError("encrypted PDF"))
    result, waits = run(_run_policy(flaky))
    assert isinstance(result, DocumentError) and flaky.calls == 1 and waits == []


def _converter_error(cause: BaseException) -> DocumentError:
    """A ConversionFailed raised as stages/office.py raises it (``from None`` over the
    client's error, which stays the context)."""
    from stages.errors import ConversionFailed

    try:
        try:
            raise cause
        except BaseException:
            raise ConversionFailed("warm converter (http://127.0.0.1:12003) failed on the DOCX") from None
    except ConversionFailed as exc:
        return exc


def test_a_retryable_document_error_is_not_failed_at_once():
    """issue 8, failure 9: ``permanent=False`` on a DocumentError was ignored, so a
    converter failure failed its document on the first try.  Over an outage (the
    converter restarting: connection refused) it waits like any outage; otherwise
    it gets the unexpected-error tries and then fails with its own reason."""
    from agents.retry_policy import classify
    from stages.errors import ConversionFailed, ConversionTimeout

    restarting = _converter_error(ConnectionRefusedError(111, "Connection refused"))
    assert classify(restarting) == "transient"
    flaky = Flaky(*[_converter_error(ConnectionRefusedError(111, "Connection refused")) for _ in range(5)])
    result, waits = run(_run_policy(flaky))
    assert result == "ok" and flaky.calls == 6 and len(waits) == 5

    assert classify(ConversionFailed("LibreOffice exited with 1 converting DOCX")) == "unexpected"
    flaky = Flaky(*[ConversionTimeout("LibreOffice conversion of DOCX timed out after 120 s")] * 5)
    result, waits = run(_run_policy(flaky))
    assert isinstance(result, ConversionTimeout) and flaky.calls == UNEXPECTED_ATTEMPTS
    assert result.reason.startswith("LibreOffice conversion of DOCX timed out")  # its own reason

    assert classify(ConversionFailed("the PDF parser failed on this file", permanent=True)) == "permanent"
    assert classify(ConversionTimeout("partitioning PDF timed out after 60 s", permanent=True)) == "permanent"


def test_unexpected_errors_fail_at_the_third():
    flaky = Flaky(*[RuntimeError("bug")] * 5)
    result, waits = run(_run_policy(flaky))
    assert isinstance(result, RuntimeError) and flaky.calls == UNEXPECTED_ATTEMPTS == 3
    assert waits == [0.5, 1.0]


def test_cancelled_error_propagates_at_once():
    flaky = Flaky(asyncio.CancelledError(), ConnectionError("x"))
    result, waits = run(_run_policy(flaky))
    assert isinstance(result, asyncio.CancelledError) and flaky.calls == 1 and waits == []


def test_transient_only_raises_anything_else_at_once():
    flaky = Flaky(ConnectionResetError("connection reset"), RuntimeError("bug"))
    result, waits = run(_run_policy(flaky, transient_only=True))
    assert isinstance(result, RuntimeError) and flaky.calls == 2 and waits == [0.5]


def test_deadline_stops_before_an_attempt_past_it():
    """Deadline 1.2 s: attempt 1 at 0 s, wait 0.5 s, attempt 2 at ~0.5 s; the next
    wait (1 s) would start attempt 3 past the deadline, so it stops there."""
    flaky = Flaky(*[TimeoutError("timed out")] * 10)
    result, waits = run(_run_policy(flaky, 1.2, sleep=asyncio.sleep))
    assert isinstance(result, TimeoutError) and flaky.calls == 2 and waits == [0.5]


def _runner(deadline_s: float):
    from agents.runner import Stage, _Runner
    from topics import UPLOADS

    async def work(_ctx, _record):
        return None

    async def delivered() -> None:  # the work here sends nothing
        return None

    ctx = SimpleNamespace(settings=SimpleNamespace(document_deadline_s=deadline_s),
                          delivered=delivered)
    return _Runner(ctx, Stage(name="t", source=UPLOADS, work=work))


def test_runner_turns_a_transient_error_at_the_deadline_into_a_timeout():
    from agents.runner import _DeadlineExceeded

    runner = _runner(1.2)
    flaky = Flaky(*[ConnectionRefusedError("connection refused")] * 10)
    error, attempts = run(runner.attempt(flaky, deadline=runner.deadline))
    assert isinstance(error, _DeadlineExceeded) and attempts == 2 == flaky.calls
    assert re.fullmatch(r"timeout after \d+ s: a service the t stage needs stayed unavailable",
                        error.reason)
    assert error.code == "dependency_unavailable"
    assert error.detail.startswith("last error: ConnectionRefusedError: ")


def test_runner_returns_success_and_attempts():
    runner = _runner(60.0)
    flaky = Flaky(ConnectionRefusedError("connection refused"))
    error, attempts = run(runner.attempt(flaky, deadline=runner.deadline))
    assert error is None and attempts == 2


def test_runner_forever_returns_the_result_and_raises_non_transient():
    runner = _runner(60.0)
    assert run(runner.forever(Flaky(ConnectionRefusedError("connection refused")))) == "ok"
    with pytest.raises(RuntimeError):
        run(runner.forever(Flaky(RuntimeError("bug"))))


def test_an_error_caused_by_a_connection_failure_is_transient():
    """asyncpg raised InternalClientError("cannot switch to state 15; another
    operation (2) is in progress") while PostgreSQL shut down under a ledger read; its
    context was ConnectionResetError: the outage, retried, not a bug."""
    import asyncpg

    from agents.retry_policy import classify

    def raised() -> BaseException:
        try:
            try:
                raise ConnectionResetError(104, "Connection reset by peer")
            except ConnectionResetError:
                raise asyncpg.exceptions._base.InternalClientError(
                    "cannot switch to state 15; another operation (2) is in progress")
        except Exception as exc:  # noqa: BLE001
            return exc

    assert classify(raised()) == "transient"
    assert classify(asyncpg.exceptions._base.InternalClientError("a bug")) == "unexpected"
    try:
        try:
            raise KeyError("x")
        except KeyError:
            raise ValueError("y")
    except ValueError as exc:
        assert classify(exc) == "unexpected"


def test_asyncpg_state_error_without_a_cause_is_transient():
    """The same asyncpg InternalClientError raised with nothing in its cause chain (the
    reset on release of a connection PostgreSQL's shutdown broke; CI 2026-12-02, where
    it was called unexpected and the partition event was dead-lettered) is transient;
    another InternalClientError still is not."""
    import asyncpg

    from agents.retry_policy import classify

    state = asyncpg.exceptions._base.InternalClientError(
        "cannot switch to state 15; another operation (2) is in progress")
    assert classify(state) == "transient"
    assert classify(asyncpg.exceptions._base.InternalClientError(
        "PoolConnectionHolder.release() called on a free connection holder")) == "unexpected"


def test_retry_transient_waits_out_transient_errors_and_raises_others(caplog):
    """agents/retry_policy.retry_transient (the runner's ``forever`` and the
    announcement's marker): a transient error is retried with a WARNING naming
    what was being done; a permanent one raises at once."""
    from agents.retry_policy import retry_transient

    flaky = Flaky(ConnectionRefusedError("connection refused"))
    with caplog.at_level("WARNING", logger="agents.retry_policy"):
        assert run(retry_transient(flaky, describe="index: marking d v1 announced")) == "ok"
    assert flaky.calls == 2
    assert "index: marking d v1 announced: connection refused; retrying in 0.5 s" in caplog.text
    permanent = Flaky(DocumentError("encrypted PDF"))
    with pytest.raises(DocumentError):
        run(retry_transient(permanent, describe="index"))
    assert permanent.calls == 1
