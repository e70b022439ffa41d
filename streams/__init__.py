"""The stream runtime: what runs the pipeline's Faust agents on Kafka.

Owns:
    app.py            the Faust app factory (one app = one stage = one consumer group)
    worker.py         ``ragstream worker``: one stage in-process, or a supervisor of
                      one process per stage
    settings.py       every RAGSTREAM_* setting (pydantic-settings)
    broker_quirks.py  the embedded broker's quirks and their workarounds
    bound_topics.py   the catalogue's topics bound to an app
    kafka_io.py       produce / read / tail topics outside an agent
    resources.py      per-worker clients (S3, PostgreSQL, Milvus, embedder)
    metrics.py        Prometheus metrics of the stages
    shutdown.py       the shutdown watchdog
    ingest.py         the producer side of the runtime: store raw bytes, register a
                      version, produce its upload event (used by the API and CLI)

May import: ``agents``, ``adapters``, ``stages``, ``schemas``, ``topics``.  Never
``api``, ``cli``, ``devstack``, ``search`` or ``drills`` (those sit on top of it).
"""
