"""The ragstream HTTP API (FastAPI): uploads, status, deletes, live status, dashboard.

``create_app(settings)`` builds the app; ``ragstream api --host H --port P`` serves
it with uvicorn (one Procfile process type).  Endpoints:

- ``POST /v1/documents`` (multipart ``file`` + ``project``/``category``/…, or JSON
  reference to an S3 object) → 202 ``{document_id, version, status_url, …}``
- ``GET /v1/documents/{id}``, ``GET /v1/documents?project=&status=&limit=&offset=``
- ``DELETE /v1/documents/{id}`` → 202 (a delete event)
- ``GET /v1/status/stream`` — server-sent events from the status topic
- ``GET /v1/stats`` — per-status counts, per-stage consumer lag, callbacks
- ``GET /dashboard`` — the live web page (no external assets)
- ``GET /healthz``, ``GET /readyz``, ``GET /metrics``; OpenAPI at ``/docs``

Every ``/v1`` route needs ``X-API-Key`` (per project); see api/auth.py.

Owns: the FastAPI app (``app.py``), auth (``auth.py``), document routes
(``documents.py``), streaming multipart uploads (``uploads.py``), the SSE fan-out
(``sse.py``), consumer lag for ``/v1/stats`` (``lag.py``), shared clients
(``state.py``) and the dashboard's static files (``static/``).
May import: ``streams`` (settings, the producer side ``streams.ingest``, kafka_io,
broker quirks), ``adapters``, ``schemas``, ``topics``.  Never ``cli``, ``devstack``,
``drills`` or ``agents``; nothing in the pipeline imports ``api``.
"""
from __future__ import annotations

from api.app import create_app

__all__ = ["create_app"]
