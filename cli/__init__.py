"""The ``ragstream`` command line: :mod:`cli.main` is the one entry point (console
script ``ragstream = "cli.main:main"``); every other module here is one command group
(``worker``/``topics``, ``ingest``/``status``, ``search``, ``api``/``apikey``,
``profiles``, ``dlq``, ``partition``, ``eval``, ``triton``, ``dev``, ``drill``,
``demo``), plus ``progress`` (the ingest/status bodies, imported when a command
runs) and ``status_view`` (rich renderings of status events and rows).

Owns: argument parsing, console output, exit codes.  It holds no pipeline logic.
May import every other project package (streams, api, devstack, search, drills,
agents, adapters, stages, schemas, topics, bench); nothing imports ``cli`` except
tests and benchmarks that reuse :func:`cli.progress.ingest_and_follow` (the worker
supervisor and the drills start ``ragstream`` by command line, not by import).
"""
