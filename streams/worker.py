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
from typing import Sequence

from streams.app import STAGES, check_stages, create_app
from streams.settings import get_settings
from streams.shutdown import install_shutdown_watchdog

STOP_GRACE_EXTRA_S = 5.0  # a child still alive this long after its own watchdog is killed
RESTART_BACKOFF_S = (1.0, 30.0)  # first and largest delay before restarting a dead child


def run_worker(stages: Sequence[str] = STAGES, loglevel: str = "info") -> int:
    """Run ``stages``: one stage in this process, several as supervised children.

    Returns the exit code (0 after a requested stop).  Raises UnknownStage.
    """
    chosen = check_stages(stages)
    if len(chosen) == 1:
        run_stage(chosen[0], loglevel)
        return 0
    return supervise(chosen, loglevel)


def run_stage(stage: str, loglevel: str = "info") -> None:
    """Create the topics if missing, then run one stage's Faust worker until SIGTERM."""
    import faust

    from streams.metrics import serve_metrics
    from topics.admin import ensure_topics

    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    settings = get_settings()
    asyncio.run(ensure_topics(settings.kafka_bootstrap, settings.topic_partitions,
                              timeout_s=settings.broker_wait_s))
    serve_metrics(settings.metrics_port, settings.metrics_host)
    asyncio.set_event_loop(asyncio.new_event_loop())
    app = create_app(stage, settings)
    logging.getLogger("aiokafka").setLevel(logging.WARNING)
    print(f"ragstream worker: stage {stage}; consumer group {app.conf.id}; "
          f"broker {settings.kafka_bootstrap}", file=sys.stderr, flush=True)

    @app.on_partitions_assigned.connect
    async def _ready(sender, assigned, **kwargs) -> None:  # noqa: ARG001
        print(f"ragstream worker: {stage} ready, {len(assigned)} topic partitions assigned",
              file=sys.stderr, flush=True)

    worker = faust.Worker(app, loglevel=loglevel, quiet=True)
    install_shutdown_watchdog(settings.shutdown_grace_s)  # bounded stop in any state
    worker.execute_from_commandline()


def stage_metrics_port(base: int, stage: str) -> int:
    """The /metrics port of ``stage``'s child under a supervisor whose settings say
    ``metrics_port=base``: ``base + position of the stage in STAGES`` (0 stays off)."""
    return base + STAGES.index(stage) if base else 0


def _child_command(stage: str, loglevel: str) -> list[str]:
    # the console script beside this interpreter, not `python -m` (README: triton/ shadowing)
    script = Path(sys.executable).with_name("ragstream")
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "cli.main"]
    return [*cmd, "worker", "--stages", stage, "--loglevel", loglevel]


def supervise(stages: Sequence[str], loglevel: str = "info") -> int:
    """Run one child process per stage until SIGTERM/SIGINT; restart dead children.

    A child that exits on its own is restarted after a backoff that doubles from
    ``RESTART_BACKOFF_S[0]`` up to ``RESTART_BACKOFF_S[1]`` seconds (reset after a
    minute of healthy running).  On SIGTERM/SIGINT every child gets SIGTERM, and
    SIGKILL when still alive ``STOP_GRACE_EXTRA_S`` after its own shutdown watchdog.  Children inherit stdout/stderr.

    Not tenacity (the code base's one retry pattern): this is one loop watching
    many children at once, each with its own restart timer, that must stay
    responsive to a signal; tenacity retries one call at a time and sleeps in it.
    """
    stopping = False
    children: dict[str, subprocess.Popen] = {}
    started: dict[str, float] = {}
    backoff: dict[str, float] = {s: RESTART_BACKOFF_S[0] for s in stages}
    due: dict[str, float] = {}

    def _stop(signum, _frame) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    print(f"ragstream worker: stages {', '.join(stages)}, one process each "
          f"(consumer groups ragstream-<stage>)", file=sys.stderr, flush=True)

    base_port = get_settings().metrics_port

    def _start(stage: str) -> None:
        env = {**os.environ, "RAGSTREAM_METRICS_PORT": str(stage_metrics_port(base_port, stage))}
        children[stage] = subprocess.Popen(_child_command(stage, loglevel), env=env)
        started[stage] = time.monotonic()

    for stage in stages:
        _start(stage)
    while not stopping:
        time.sleep(0.2)
        now = time.monotonic()
        for stage, proc in list(children.items()):
            if proc.poll() is None:
                if now - started[stage] > 60:
                    backoff[stage] = RESTART_BACKOFF_S[0]
                continue
            if stage not in due:
                print(f"ragstream worker: {stage} exited with {proc.returncode}; restarting in "
                      f"{backoff[stage]:.0f} s", file=sys.stderr, flush=True)
                due[stage] = now + backoff[stage]
                backoff[stage] = min(backoff[stage] * 2, RESTART_BACKOFF_S[1])
            elif now >= due[stage] and not stopping:
                del due[stage]
                _start(stage)
    for proc in children.values():
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + get_settings().shutdown_grace_s + STOP_GRACE_EXTRA_S
    for proc in children.values():
        try:
            proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
    return 0
