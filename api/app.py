"""The FastAPI app factory and the operational routes (health, readiness, metrics,
stats, status stream, dashboard)."""
from __future__ import annotations

import asyncio
import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Optional

from fastapi import Depends, FastAPI, HTTPException, Query, Request, Response
from fastapi.responses import FileResponse, JSONResponse, RedirectResponse, StreamingResponse
from prometheus_client import CONTENT_TYPE_LATEST, Gauge, Histogram, generate_latest

from adapters.document_keys import DocumentKeys
from api.auth import get_state, require_project
from api.document_metadata import router as document_metadata_router
from api.documents import router as documents_router
from api.errors import install_error_handlers
from api.lag import stage_lag
from api.readiness import ReadinessCache, readiness  # noqa: F401 (readiness: re-exported)
from api.projects import router as projects_router
from api.reprocess import router as reprocess_router
from api.search import router as search_router
from api.sse import event_stream
from api.state import ApiState
from streams.document_ids import InvalidDocumentId, scoped_id
from streams.settings import Settings, get_settings

STATIC = Path(__file__).parent / "static"

REQUEST_SECONDS = Histogram("ragstream_api_request_seconds", "HTTP request latency (s) by route",
                            ["method", "route", "code"])
SSE_CLIENTS = Gauge("ragstream_api_sse_clients", "Open server-sent-event streams")
DOCUMENTS = Gauge("ragstream_documents", "Documents by status (PostgreSQL projection)", ["status"])
CALLBACKS = Gauge("ragstream_callbacks_by_state", "Completion callbacks by state (outbox)", ["state"])
STAGE_LAG = Gauge("ragstream_stage_lag_messages", "Consumer lag of each stage's input topic", ["stage"])


def create_app(settings: Optional[Settings] = None) -> FastAPI:
    """Build the API for ``settings`` (default: the environment's).  Clients to the
    broker, PostgreSQL and S3 open at startup; startup fails when one is down."""
    settings = settings or get_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        from adapters.idle_collections import release_idle_forever
        from streams.shutdown import install_shutdown_watchdog
        from topics.admin import ensure_topics

        install_shutdown_watchdog(settings.shutdown_grace_s)
        # in any start order: wait for the broker, create the topics if no worker has
        await ensure_topics(settings.kafka_bootstrap, settings.topic_partitions,
                            timeout_s=settings.broker_wait_s)
        state = ApiState(settings)
        app.state.api = state
        releaser = None
        try:
            await state.open()
            # searches load a project's collection; unused for a while, it is released
            releaser = asyncio.create_task(release_idle_forever(state.vectors, settings.milvus_release_idle_s))
            yield
        finally:
            if releaser is not None:
                releaser.cancel()
            await state.close()

    ready_cache = ReadinessCache()  # also app.state.readiness (tests read its rounds)
    app = FastAPI(title="ragstream", version="0.1.0", lifespan=lifespan,
                  description="Upload documents, follow their processing, get called back, search.")
    app.state.readiness = ready_cache
    install_error_handlers(app)  # no 500 from encoding a hostile input back (api/errors.py)
    app.include_router(documents_router)
    app.include_router(document_metadata_router)
    app.include_router(reprocess_router)
    app.include_router(search_router)
    app.include_router(projects_router)

    @app.middleware("http")
    async def timing(request: Request, call_next):
        start = time.perf_counter()
        response = await call_next(request)
        route = getattr(request.scope.get("route"), "path", "unmatched")
        REQUEST_SECONDS.labels(request.method, route, str(response.status_code)).observe(
            time.perf_counter() - start)
        return response

    @app.get("/healthz", tags=["ops"])
    async def healthz() -> dict[str, str]:
        """The process is alive (no dependency is checked)."""
        return {"status": "ok"}

    @app.get("/readyz", tags=["ops"], responses={503: {"description": "a dependency is down"}})
    async def readyz(state: ApiState = Depends(get_state)) -> JSONResponse:
        """Broker, database, object store, Milvus (and Triton when it is the embedder)
        each answered within 5 s: 200, else 503 with the failing checks.  Checked over
        the app's own clients, at most once per 2 s (api/readiness.py)."""
        checks = await ready_cache.get(state)
        ok = all(c["ok"] for c in checks.values())
        return JSONResponse({"ready": ok, "checks": checks}, status_code=200 if ok else 503)

    @app.get("/metrics", tags=["ops"], response_class=Response)
    async def metrics(state: ApiState = Depends(get_state)) -> Response:
        """Prometheus text format: request latency, uploads, SSE clients, documents by
        status, callbacks by state, stage lag."""
        await refresh_gauges(state)
        return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)

    @app.get("/v1/stats", tags=["status"])
    async def stats(project: str = Depends(require_project),
                    state: ApiState = Depends(get_state)) -> dict[str, Any]:
        """Documents per status in the key's project, per-stage consumer lag (messages,
        all projects), and the project's callbacks per state."""
        rows = await state.metadata.pool.fetch(
            "SELECT status, count(*) AS n FROM documents WHERE project = $1 GROUP BY status", project)
        cb = await state.metadata.pool.fetch(
            "SELECT state, count(*) AS n FROM callbacks WHERE project = $1 GROUP BY state", project)
        try:
            lag: Any = await stage_lag(state.settings.kafka_bootstrap)
        except Exception as exc:  # noqa: BLE001 — stats still answer without lag
            lag = {"error": f"{type(exc).__name__}: {exc}"}
        return {"project": project, "counts": {r["status"]: r["n"] for r in rows},
                "callbacks": {r["state"]: r["n"] for r in cb}, "lag": lag}

    @app.get("/v1/status/stream", tags=["status"], response_class=StreamingResponse,
             responses={200: {"content": {"text/event-stream": {}},
                              "description": "server-sent events, one per status transition"}})
    async def status_stream(
            document_id: Optional[str] = Query(None, description="only this document"),
            project: Optional[str] = Query(None, description="defaults to the key's project"),
            replay: bool = Query(False, description="start from the beginning of the changelog"),
            key_project: str = Depends(require_project),
            state: ApiState = Depends(get_state)) -> StreamingResponse:
        """Status transitions of the key's project as server-sent events (``event:
        status``, ``id:`` = sequence, JSON data), live from the status topic."""
        if project is not None and project != key_project:
            raise HTTPException(404, "project not found")
        if document_id is not None:
            try:
                document_id = scoped_id(key_project, document_id)
            except InvalidDocumentId as exc:
                raise HTTPException(422, str(exc)) from exc

        async def body():
            SSE_CLIENTS.inc()
            try:
                async for chunk in event_stream(state.hub, project=key_project, document_id=document_id,
                                                replay=replay, bootstrap=state.settings.kafka_bootstrap,
                                                keys=DocumentKeys(state.metadata.pool)):
                    yield chunk
            finally:
                SSE_CLIENTS.dec()

        return StreamingResponse(body(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    @app.get("/", include_in_schema=False)
    async def root() -> RedirectResponse:
        """Redirect to the dashboard."""
        return RedirectResponse("/dashboard")

    @app.get("/dashboard", include_in_schema=False)
    async def dashboard() -> FileResponse:
        """The live dashboard page (the API key goes in the URL fragment ``#key=`` or
        the page's form; it never reaches the server in a URL)."""
        return FileResponse(STATIC / "dashboard.html", media_type="text/html")

    @app.get("/dashboard/{name}", include_in_schema=False)
    async def dashboard_asset(name: str) -> FileResponse:
        """The dashboard's script and stylesheet (nothing else is served)."""
        if name not in ("dashboard.js", "dashboard.css"):
            raise HTTPException(404, "not found")
        media = "text/javascript" if name.endswith(".js") else "text/css"
        return FileResponse(STATIC / name, media_type=media)

    return app


async def refresh_gauges(state: ApiState) -> None:
    """Update the database- and broker-derived gauges before a scrape."""
    try:
        rows = await state.metadata.pool.fetch("SELECT status, count(*) AS n FROM documents GROUP BY status")
        for r in rows:
            DOCUMENTS.labels(r["status"]).set(r["n"])
        for st, n in (await state.callbacks.counts()).items():
            CALLBACKS.labels(st).set(n)
    except Exception:  # noqa: BLE001 — a scrape never fails on a database blip
        pass
    try:
        for stage, entry in (await stage_lag(state.settings.kafka_bootstrap)).items():
            if entry.get("lag") is not None:
                STAGE_LAG.labels(stage).set(entry["lag"])
    except Exception:  # noqa: BLE001
        pass
