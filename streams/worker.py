"""Running stage workers.

``ragstream worker --stages partition`` runs one stage's Faust agent in this process,
in the stage's own consumer group (``ragstream-partition``) — one Procfile process
type per stage.  ``ragstream worker`` (all stages, or several) is the development
shape: it starts one such process per stage and supervises them (restart with
backoff when one dies, SIGTERM/SIGINT forwarded to all, bounded stop).  Because a
stage's group id does not depend on the shape, moving between the two shapes
re-reads nothing (issue 8, failure 2).
"""
from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

from streams import tracing
from streams.app import STAGES, check_stages, create_app
from streams.log_format import configure, logging_config
from streams.settings import get_settings
from streams.shutdown import WATCHDOG_EXIT_CODE, install_shutdown_watchdog

STOP_GRACE_EXTRA_S = 5.0  # a child still alive this long after its own watchdog is killed
RESTART_BACKOFF_S = (1.0, 30.0)  # first and largest delay before restarting a dead child


def run_worker(stages: Sequence[str] = STAGES, loglevel: str = "info", autoscale: bool = False) -> int:
    """Run ``stages``: one stage in this process, several (or any with ``autoscale``)
    as supervised children.

    Returns the exit code: 0 after a clean stop; with children, a child's code when one
    did not stop cleanly (:func:`stop_exit_code`).  Raises UnknownStage.
    """
    chosen = check_stages(stages)
    if len(chosen) == 1 and not autoscale:
        run_stage(chosen[0], loglevel)
        return 0
    return supervise(chosen, loglevel, autoscale=autoscale)


def run_stage(stage: str, loglevel: str = "info") -> None:
    """Create the topics if missing, then run one stage's Faust worker until SIGTERM."""
    import faust

    from streams.lag import install_lag_gauges
    from streams.metrics import serve_metrics
    from topics.admin import ensure_topics

    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    settings = get_settings()
    configure(settings.log_format, loglevel)  # Faust applies the same config again when it starts
    tracing.configure(settings.tracing, stage, settings.trace_file)
    asyncio.run(ensure_topics(settings.kafka_bootstrap, settings.topic_partitions,
                              timeout_s=settings.broker_wait_s))
    serve_metrics(settings.metrics_port, settings.metrics_host)
    asyncio.set_event_loop(asyncio.new_event_loop())
    app = create_app(stage, settings)
    # the stage's own lag as Prometheus gauges, beside its other metrics
    install_lag_gauges(app, stage, settings.kafka_bootstrap, settings.lag_refresh_s,
                       settings.lag_refresh_idle_s)
    logging.getLogger("aiokafka").setLevel(logging.WARNING)
    _say(f"stage {stage}; consumer group {app.conf.id}; broker {settings.kafka_bootstrap}")

    @app.on_partitions_assigned.connect
    async def _ready(sender, assigned, **kwargs) -> None:  # noqa: ARG001
        _say(f"{stage} ready, assigned {describe_assignment(assigned, app.conf.id)}")

    worker = faust.Worker(app, loglevel=loglevel, quiet=True,
                          logging_config=logging_config(settings.log_format, loglevel))
    if not worker.stdout.isatty():
        # faust's start-up spinner (at loglevel warning and above) writes its cursor
        # hide/show codes and backspaces even to a file: a redirected log kept them
        # (tests/test_worker_log.py)
        worker.spinner = None
    install_shutdown_watchdog(settings.shutdown_grace_s)  # bounded stop in any state
    try:
        worker.execute_from_commandline()
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    else:
        code = 0
    # Faust has stopped, flushed its producer and closed its loop, and the stage's
    # clients and pool are closed (on_before_shutdown): leave without interpreter
    # finalization.  A stage child was seen alive 15 s after SIGTERM although its
    # Faust stop had ended in 3 s; the watchdog's daemon thread no longer runs in the
    # late phase of finalization (objects of grpc, aiokafka, pebble torn down), so
    # nothing bounded it but the supervisor's SIGKILL.
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def describe_assignment(assigned, app_id: str) -> str:
    """The stage's topic partitions, e.g. ``"ragstream.uploads [0, 1, 2, 3]"``, from
    ``assigned`` (a set of TPs).  Faust's own leader topic
    (``<app id>-__assignor-__leader``, one partition, which every member of the group
    is assigned) is left out: it carries no work."""
    leader = f"{app_id}-__assignor-__leader"
    by_topic: dict[str, list[int]] = {}
    for tp in assigned:
        if tp.topic != leader:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
    if not by_topic:
        return "no partitions (more consumers than partitions)"
    return "; ".join(f"{topic} {sorted(parts)}" for topic, parts in sorted(by_topic.items()))


def stage_metrics_port(base: int, stage: str, replica: int = 0) -> int:
    """The /metrics port of ``stage``'s child number ``replica`` (0 = the first) under
    a supervisor whose settings say ``metrics_port=base``:
    ``base + position of the stage in STAGES + replica * len(STAGES)`` (0 stays off)."""
    return base + STAGES.index(stage) + replica * len(STAGES) if base else 0


def _child_command(stage: str, loglevel: str) -> list[str]:
    # the console script beside this interpreter, not `python -m` (README: triton/ shadowing)
    script = Path(sys.executable).with_name("ragstream")
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "cli.main"]
    return [*cmd, "worker", "--stages", stage, "--loglevel", loglevel]


def _say(text: str) -> None:
    """A worker life-cycle line (started, ready, restarted, scaled): on stderr as
    ``ragstream worker: TEXT``, or with ``RAGSTREAM_LOG_FORMAT=json`` a JSON line of
    the logger ``streams.worker`` on stdout."""
    if get_settings().log_format == "json":
        logging.getLogger(__name__).info("ragstream worker: %s", text)
    else:
        print(f"ragstream worker: {text}", file=sys.stderr, flush=True)


def supervise(stages: Sequence[str], loglevel: str = "info", autoscale: bool = False) -> int:
    """Run child processes per stage until SIGTERM/SIGINT; restart dead children.

    One child per stage, or with ``autoscale`` as many as the stage's
    :class:`streams.autoscale.StageScaler` wants (lag read every
    ``autoscale_interval_s``; each decision is logged on stderr).  Every child of a
    stage is ``ragstream worker --stages S`` in group ``ragstream-S``.  A child that
    exits on its own is restarted after a backoff that doubles from
    ``RESTART_BACKOFF_S[0]`` up to ``RESTART_BACKOFF_S[1]`` seconds (reset after a
    minute of healthy running); a child scaled away gets SIGTERM and is not
    restarted.  On SIGTERM/SIGINT every child gets SIGTERM, and SIGKILL when still
    alive ``STOP_GRACE_EXTRA_S`` after its own shutdown watchdog.  Children inherit
    stdout/stderr.

    Not tenacity (the code base's one retry pattern): this is one loop watching
    many children at once, each with its own restart timer, that must stay
    responsive to a signal; tenacity retries one call at a time and sleeps in it.
    """
    stopping = False
    Slot = tuple[str, int]  # (stage, replica)
    children: dict[Slot, subprocess.Popen] = {}
    started: dict[Slot, float] = {}
    backoff: dict[Slot, float] = {}
    due: dict[Slot, float] = {}
    retiring: list[tuple[subprocess.Popen, float]] = []  # (child, SIGKILL after)
    settings = get_settings()
    configure(settings.log_format, loglevel)
    grace_s = settings.shutdown_grace_s + STOP_GRACE_EXTRA_S

    def _stop(signum, _frame) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    _say(f"stages {', '.join(stages)}, " + ("autoscaled on lag" if autoscale else "one process each")
         + " (consumer groups ragstream-<stage>)")

    def _start(slot: Slot) -> None:
        stage, replica = slot
        env = {**os.environ,
               "RAGSTREAM_METRICS_PORT": str(stage_metrics_port(settings.metrics_port, stage, replica))}
        children[slot] = subprocess.Popen(_child_command(stage, loglevel), env=env)
        started[slot] = time.monotonic()
        backoff.setdefault(slot, RESTART_BACKOFF_S[0])

    def _retire(slot: Slot) -> None:
        proc = children.pop(slot)
        due.pop(slot, None)
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            retiring.append((proc, time.monotonic() + grace_s))

    poller, scalers = None, {}
    if autoscale:
        from streams.autoscale import LagPoller, scalers as make_scalers

        scalers = make_scalers(stages, settings)
        poller = LagPoller(settings.kafka_bootstrap, stages, settings.autoscale_interval_s)
        poller.start()
        for sc in scalers.values():
            sc.last_change = time.monotonic()  # the first consumers are only starting
            _say(f"autoscale {sc.stage}: {sc.current} consumer(s), bounds {sc.min_n}..{sc.max_n}")
    for stage in stages:
        for replica in range(scalers[stage].current if autoscale else 1):
            _start((stage, replica))
    while not stopping:
        time.sleep(0.2)
        now = time.monotonic()
        if poller is not None:
            for stage, reading in poller.latest().items():
                sc = scalers[stage]
                before = sc.current
                want, why = sc.observe(reading.at, reading.lag, reading.processed, reading.partitions)
                if want != before:
                    _say(f"autoscale {stage}: {before} -> {want} consumer(s) ({why})")
                    for replica in range(before, want):
                        _start((stage, replica))
                    for replica in range(before - 1, want - 1, -1):
                        _retire((stage, replica))
        for slot, proc in list(children.items()):
            if proc.poll() is None:
                if now - started[slot] > 60:
                    backoff[slot] = RESTART_BACKOFF_S[0]
                continue
            if slot not in due:
                _say(f"{slot[0]} exited with {proc.returncode}; restarting in {backoff[slot]:.0f} s")
                due[slot] = now + backoff[slot]
                backoff[slot] = min(backoff[slot] * 2, RESTART_BACKOFF_S[1])
            elif now >= due[slot] and not stopping:
                del due[slot]
                _start(slot)
        for proc, kill_at in list(retiring):
            if proc.poll() is not None:
                retiring.remove((proc, kill_at))
            elif now > kill_at:
                _say(f"child {proc.pid} (stage {proc.args[-3]}) still running {grace_s:.0f} s after SIGTERM; SIGKILL")
                proc.kill()
    if poller is not None:
        poller.stop()
    for proc in [*children.values(), *(p for p, _ in retiring)]:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    stopped = [*children.values(), *(p for p, _ in retiring)]
    for proc in stopped:
        try:
            proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _say(f"child {proc.pid} (stage {proc.args[-3]}) still running "
                 f"{grace_s:.0f} s after SIGTERM; SIGKILL")
            proc.kill()
            proc.wait(5)
    return stop_exit_code([(proc.args[-3], proc.returncode) for proc in stopped])


def stop_exit_code(codes: Sequence[tuple[str, Optional[int]]]) -> int:
    """The supervisor's exit code from its children's ``(stage, returncode)`` at a stop:
    0 when every child stopped cleanly, else the first unclean one's code — 75
    (streams.shutdown.WATCHDOG_EXIT_CODE: its watchdog ended it, work in flight was
    abandoned), or 128 + n for a child killed by signal n — each logged with its stage.
    Before, the supervisor said 0 even when a stage was cut off mid-parse."""
    unclean = [(stage, code) for stage, code in codes if code not in (0, None)]
    for stage, code in unclean:
        _say(f"{stage} did not stop cleanly: exit code {code}"
             + (" (its shutdown watchdog ended it)" if code == WATCHDOG_EXIT_CODE else ""))
    if not unclean:
        return 0
    code = unclean[0][1]
    return 128 - code if code < 0 else code
