"""Vectors in Milvus (pymilvus): one collection per project behind an alias.

The alias ``chunks_{project}`` points at the physical collection
``chunks_{project}_v{n}`` so a reindex can build ``v{n+1}`` and swap the alias.
Primary key: the chunk id ``{document_id}:{version}:{index}`` — upserts are
idempotent.  Index (``milvus_index_type``): FLAT with inner product by default
(vectors are L2-normalised, so IP is cosine); FLAT keeps full top-k under selective
filters (../shared/DESIGN.md), and Milvus Lite searches by brute force whatever it is
told.  HNSW (:data:`HNSW_BUILD`, search ``ef`` = max(``milvus_hnsw_ef``, k)) for a
Milvus standalone or cluster, set so in compose and Kubernetes.  Searches run at
``milvus_search_consistency`` (Strong by default: a COMPLETED document is searchable).

Full-text search: ``lexical`` (``search.lexical.lexical_form`` of ``text``, written
by :func:`storable_rows`; collections made before it analyze ``text`` itself) is
analyzed (``ANALYZER``: the "standard" tokenizer + lowercase) and a BM25 Function
fills the sparse field ``SPARSE`` from it (index
SPARSE_INVERTED_INDEX, metric BM25), so :meth:`VectorStore.hybrid_search_sync`
runs dense ANN and BM25 with the same filter and fuses them with RRF (k = 60,
:func:`rrf_fuse`: ties broken by the two scores).

Size: ~770 lines — one client class whose every call shares the reconnect wrapper
(``_call``) and the lazily created, race-safe collection (``_ensure``); splitting
reads from writes would export those private helpers across modules.

Measured on Milvus Lite 3.2 (pymilvus 3.0.2): its analyzers are only "standard"
(the regex ``\\w+`` lowercased) and "jieba" (needs the jieba package; Chinese
words, Hangul split into single characters); "icu" and the other Milvus
tokenizers are refused.  With "standard", "318,285" is the tokens 318 and 285,
"SW1A" one token, a space-separated Korean word (eojeol, particles attached) one
token, and an unspaced run of CJK ideographs one token (so a sub-word of it does
not match).  Collections made before the sparse field existed still answer:
hybrid search falls back to dense only and says why.

The synchronous MilvusClient is used (AsyncMilvusClient's create_collection with
index params raises UNIMPLEMENTED on Milvus Lite, ../shared/DESIGN.md); every call runs in a
thread so it never blocks the event loop.

Surviving Milvus restarts and dropped connections:

- Each VectorStore owns a *dedicated* pymilvus connection (``dedicated=True``), not
  one from pymilvus's process-wide shared registry (keyed by address), so closing
  it really closes its gRPC channel and a broken channel is never handed back to
  another client on the same URI.
- gRPC keepalive is set to what Milvus Lite's server (a plain ``grpc.server`` with
  default options) accepts: no pings without calls in flight (the server allows
  those only every 2 h) and at most one ping per 5 min during calls
  (``grpc.http2.min_ping_interval_without_data_ms`` default); pymilvus's own
  default, a ping every 10 s even when idle, makes the server answer GOAWAY
  ``too_many_pings`` after its 2 ping strikes.
- Every public method runs through :meth:`VectorStore._call`: on a
  connection-class error (:func:`is_connection_error`: gRPC UNAVAILABLE, pymilvus
  "Fail connecting …", a closed channel) the client is closed and dropped, the
  loaded-collection cache is cleared (a restarted Milvus has nothing loaded), and
  the call is retried with exponential backoff (tenacity) for up to
  ``reconnect_s`` seconds before the last error is raised.

Milvus Lite quirk (measured 2026-12-03, Milvus Lite 3.2, pymilvus 3.0.2): while a
``flush`` of a collection runs, other calls on it miss rows that were just written.
A Strong-consistency ``count(*)`` right after an upsert answered 0 in 6 of 300 tries
with another connection flushing in a loop, 0 of 300 without; a ``delete`` by filter
left 9 rows behind in 300 documents.  In the index stage that left a document at
INDEXING for good (its completion count came up short after its last batch, a
newcomer's corpus ingest) and could keep an older version's chunks searchable.
Workaround: a flush never overlaps an upsert, delete, count or id query, in this
process (``_flush_gate``) or in any other process on the machine: for a loopback
Milvus (the embedded Milvus Lite server) every gated call also holds a shared
``flock`` on a lock file named after the URI (:class:`CrossProcessGate`), and a
flush holds it exclusively.  Deletes from normalize and from the outcome claim,
and a second index process, are so serialised with the index stage's flushes
(issue 23, failure 8: before, only this process's own calls were).  Searches are not gated (another process's search during a
flush may briefly miss rows; nothing is lost).  A remote Milvus (deploy/) has no
such window and takes no file lock.
``tests/test_milvus_lite_flush.py`` shows the quirk and the workaround.
"""
from __future__ import annotations

import asyncio
import fcntl
import hashlib
import logging
import os
import re
import tempfile
import threading
import time
from contextlib import contextmanager
from urllib.parse import urlsplit
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Optional, Sequence, TypeVar

import grpc
from pymilvus import DataType, Function, FunctionType, MilvusClient, MilvusException
from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_exponential

from adapters.collection_names import InvalidProjectName  # noqa: F401  (re-exported for callers)
from adapters.collection_names import check_project, project_stem, with_suffix

log = logging.getLogger(__name__)
T = TypeVar("T")

DIM = 384  # all-MiniLM-L6-v2
TEXT_MAX = 65535
SPARSE = "text_sparse"  # BM25 sparse vector, a Function output fed from ``lexical`` (older: ``text``)
#: the text BM25 reads: ``search.lexical.lexical_form`` of ``text``, written by
#: :func:`storable_rows`; collections made before it feed BM25 from ``text`` itself
LEXICAL = "lexical"
ANALYZER = {"tokenizer": "standard", "filter": ["lowercase"]}
#: HNSW build parameters (Milvus' documented ranges: M 2-2048, efConstruction 1-int max)
HNSW_BUILD = {"M": 16, "efConstruction": 200}
INDEX_TYPES = ("FLAT", "HNSW")
RRF_K = 60
OUTPUT_FIELDS = ["chunk_id", "document_id", "version", "chunk_index", "page_number",
                 "element_types", "filename", "project", "category", "text"]
#: the JSON field of user metadata (schemas/user_metadata.py); collections made before
#: it have none (Milvus Lite 3.2 cannot add a field: ``add_collection_field`` answers
#: UNIMPLEMENTED, measured 2026-12-05), so rows lose it there and a metadata filter is
#: refused until ``ragstream reindex`` builds a collection with it
METADATA = "metadata"
#: the text the embedder read (enhance's header + a table's ``column: value`` rendering;
#: the chunk text when enhance set none), for search's late-interaction second stage
#: (search/late_interaction.py); collections made before it have none (the stage then
#: does not run, and says so: MaxSim over the bare text ranked worse than no stage)
EMBED_TEXT = "embed_text"


class NoMetadataField(LookupError):
    """A metadata filter on a collection made before the ``metadata`` field existed."""


def chunk_row(chunk: Any, user_metadata: Optional[dict] = None) -> dict[str, Any]:
    """The Milvus row of an embedded chunk (``schemas.EmbeddedChunk``, opened) and its
    version's user metadata (None: the row's ``metadata`` is null); the index stage
    and a reindex's replay write the same rows."""
    return {"chunk_id": chunk.chunk_id, "vector": list(chunk.vector), "document_id": chunk.document_id,
            "version": chunk.version, "chunk_index": chunk.index, "page_number": chunk.page_number,
            "element_types": ",".join(chunk.element_types), "filename": chunk.filename,
            "project": chunk.project, "category": chunk.category, "text": chunk.text,
            EMBED_TEXT: chunk.embed_text or chunk.text, METADATA: user_metadata}


@dataclass
class HybridHits:
    """What :meth:`VectorStore.hybrid_search_sync` found: ``hits`` best first (the
    Milvus fields + ``score``: RRF score Σ 1/(60 + rank) when hybrid, else cosine;
    ``dense_score``: cosine of query and chunk); ``rankers``: ``["dense", "bm25",
    "rrf"]`` or ``["dense"]``; ``fallback_reason``: why it was dense only."""

    hits: list[dict[str, Any]]
    rankers: list[str]
    fallback_reason: Optional[str] = None


def rrf_fuse(dense: list[dict[str, Any]], bm25: list[dict[str, Any]],
             rrf_k: int = RRF_K, dense_weight: float = 1.0) -> list[dict[str, Any]]:
    """Reciprocal rank fusion of two rankings of chunk dicts (best first, each with
    ``chunk_id``; ``dense`` hits with ``dense_score``, the cosine; ``bm25`` hits with
    ``dense_score`` and ``bm25_score`` ≥ 0): score Σ 1/(``rrf_k`` + rank), rank
    1-based, as Milvus's RRFRanker, the dense term times ``dense_weight``
    (``search.lexical.dense_weight``: 0 for a CJK query, so BM25's order leads and
    chunks only the dense ranking found follow it).  Returns every chunk of either ranking once (the
    dict from ``dense`` when in both, plus ``bm25_score`` if BM25 found it), ``score``
    set to its fused score, best first.

    Ties are broken by ``dense_score`` + ``bm25_score`` / (the ranking's best
    ``bm25_score``): both in [0, 1] for the chunks that tie.  With two rankings, ties
    are common at the top — a chunk ranked (1, 2) and one ranked (2, 1), or the
    first of each ranking found by only one — and Milvus's own hybrid search orders
    them arbitrarily (it returns neither ranker's score).  Measured on the corpus
    question set: r@1 0.778 (Milvus RRF) → 0.810 with this tie-break, r@5 0.968 both.
    """
    fused: dict[str, dict[str, Any]] = {}
    for ranking, weight in ((dense, dense_weight), (bm25, 1.0)):
        for rank, hit in enumerate(ranking, 1):
            entry = fused.setdefault(hit["chunk_id"], {**hit, "score": 0.0})
            entry["score"] += weight / (rrf_k + rank)
            if "bm25_score" in hit:
                entry["bm25_score"] = hit["bm25_score"]
    best_bm25 = max((h["bm25_score"] for h in bm25), default=0.0) or 1.0

    def tie_break(hit: dict[str, Any]) -> float:
        return hit.get("dense_score", 0.0) + hit.get("bm25_score", 0.0) / best_bm25

    return sorted(fused.values(), key=lambda h: (-h["score"], -tie_break(h)))


def alias_name(project: str) -> str:
    """The project's prod alias, its collection stem ``chunks_{encoded project}``
    (adapters/collection_names.py: injective, no suffix of one project is another's
    name); projects are ``[A-Za-z0-9_-]{1,64}``, else InvalidProjectName."""
    return project_stem(project)


def project_term(project: str) -> str:
    """The Milvus expression ``project == "<project>"``: the second wall of tenant
    isolation, put in every search, count, query and delete this module and
    adapters/collection_aliases.py send (the first is the collection itself)."""
    return f"project == {quote_literal(check_project(project))}"


def scoped_filter(project: str, expr: str = "") -> str:
    """``project == "<project>"`` and, when given, ``(expr)``."""
    term = project_term(project)
    return f"{term} and ({expr})" if expr.strip() else term


ALIASES = ("prod", "test")


def alias_for(project: str, alias: str = "prod") -> str:
    """The project's ``prod`` alias (:func:`alias_name`, what ingestion writes) or its
    ``test`` alias ``chunks_{project}__test`` (made by ``ragstream reindex --alias test``
    and searched with ``--alias test``).  Raises ValueError for another alias kind."""
    if alias not in ALIASES:
        raise ValueError(f"alias must be one of {ALIASES}, not {alias!r}")
    return with_suffix(alias_name(project), "test") if alias == "test" else alias_name(project)


# gRPC channel options Milvus Lite's server accepts (see the module docstring)
GRPC_OPTIONS = {
    "grpc.keepalive_time_ms": 300_000,
    "grpc.keepalive_timeout_ms": 20_000,
    "grpc.keepalive_permit_without_calls": False,
    "grpc.http2.max_pings_without_data": 0,
}
_CONNECTION_MARKERS = ("fail connecting", "server unavailable", "unavailable", "connection refused",
                       "failed to connect", "socket closed", "too_many_pings", "closed channel",
                       "connection reset", "goaway")


def secured_options() -> dict[str, Any]:
    """MilvusClient keyword arguments for a secured Milvus, from the settings:
    ``token`` (RAGSTREAM_MILVUS_TOKEN, "user:password" or an API key) and, for an
    ``https://`` URI signed by a private CA, ``server_pem_path``
    (RAGSTREAM_MILVUS_CA_PEM; pymilvus then verifies the server against it).
    Empty on the embedded stack."""
    from streams.settings import get_settings

    settings = get_settings()
    options: dict[str, Any] = {}
    if settings.milvus_token.get_secret_value():
        options["token"] = settings.milvus_token.get_secret_value()
    if settings.milvus_ca_pem:
        options.update(secure=True, server_pem_path=settings.milvus_ca_pem)
    return options


def has_alias(client: MilvusClient, alias: str) -> bool:
    """True when Milvus alias ``alias`` exists (in the client's database); one
    ``list_aliases`` call."""
    return alias in set(client.list_aliases().get("aliases", []))


def is_connection_error(exc: BaseException) -> bool:
    """True for errors that mean "no usable connection to Milvus" (retry after
    reconnecting), False for everything else (bad request, missing collection, …).

    Connection-class: ``grpc.RpcError`` with status UNAVAILABLE; ``MilvusException``
    with pymilvus's CONNECT_FAILED code (2, "Fail connecting to server …"), a gRPC
    UNAVAILABLE code, or a message naming a transport failure; ``ValueError``
    "Cannot invoke RPC on closed channel!" (a channel closed under a running call).
    """
    if isinstance(exc, grpc.RpcError) and hasattr(exc, "code"):
        return exc.code() == grpc.StatusCode.UNAVAILABLE
    if isinstance(exc, MilvusException):
        if exc.code in (2, grpc.StatusCode.UNAVAILABLE):
            return True
        return any(m in str(exc.message).lower() for m in _CONNECTION_MARKERS)
    if isinstance(exc, ValueError):
        return "closed channel" in str(exc).lower()
    return False


def is_not_loaded(exc: BaseException) -> bool:
    """True for Milvus "collection not loaded" (code 101): after a restart (even one
    that pymilvus's own channel recovery hid from us) collections are released."""
    return isinstance(exc, MilvusException) and (
        exc.code == 101 or "call load()" in str(exc.message) or "not loaded" in str(exc.message).lower())


def quote_literal(value: str) -> str:
    """A string as a Milvus expression literal: double-quoted, ``\\`` and ``"`` escaped."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


_EXISTS_MARKERS = (
    "already exist",  # Milvus
    "File exists",  # Milvus Lite: a concurrent create of the same collection ([Errno 17])
)


def _unless_exists(create: Callable[[], Any]) -> None:
    """Run ``create()``; a MilvusException saying the thing already exists (another
    process made it first) is not an error.  Milvus Lite words a concurrent
    create of one collection as "[Errno 17] File exists" (its on-disk directory),
    shown by tests/test_search_hybrid.py::test_first_searches_of_a_new_project_race_safely."""
    try:
        create()
    except MilvusException as exc:
        if not any(marker in str(exc) for marker in _EXISTS_MARKERS):
            raise


def _chunk_index_params(client: MilvusClient, field: str, index_type: str = "FLAT"):
    index = client.prepare_index_params()
    if field == "vector":
        if index_type not in INDEX_TYPES:
            raise ValueError(f"Milvus index type {index_type!r}: one of {', '.join(INDEX_TYPES)}")
        index.add_index(field_name="vector", index_type=index_type, metric_type="IP",
                        params=dict(HNSW_BUILD) if index_type == "HNSW" else {})
    else:
        index.add_index(field_name=SPARSE, index_type="SPARSE_INVERTED_INDEX", metric_type="BM25")
    return index


def _await_collection(client: MilvusClient, name: str, timeout_s: float = 30.0) -> None:
    """Wait until collection ``name`` is visible.  Milvus Lite answers a concurrent
    create with "File exists" while the winner is still creating it, and for a
    moment after that the collection "does not exist" (seen under the race test).
    Raises TimeoutError after ``timeout_s`` seconds."""
    deadline = time.monotonic() + timeout_s
    while not client.has_collection(name):
        if time.monotonic() > deadline:
            raise TimeoutError(f"Milvus collection {name} did not appear within {timeout_s:.0f} s of its creation")
        time.sleep(0.05)


def create_chunk_collection(client: MilvusClient, name: str, with_metadata: bool = True,
                            index_type: str = "FLAT", with_lexical: bool = True,
                            with_embed_text: bool = True) -> None:
    """Create the physical collection ``name`` with the chunk schema (fields, BM25
    function), then its dense (``index_type``: FLAT or HNSW, metric IP) and sparse
    indexes; every step is idempotent and safe against another process doing the
    same at once (a collection that exists keeps its index).  ValueError for another
    ``index_type``.

    Each step runs separately (not ``create_collection(index_params=...)``): a
    creator that loses the race for the collection still makes sure the indexes
    exist before it names the collection in an alias, so nobody loads a
    collection without indexes ("no index on collection", seen under the race).
    ``with_metadata`` False makes the schema of collections made before the
    ``metadata`` field existed (tests of that upgrade path); ``with_lexical`` False,
    those made before the ``lexical`` field (BM25 then reads ``text``);
    ``with_embed_text`` False, those made before :data:`EMBED_TEXT`."""
    schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field("chunk_id", DataType.VARCHAR, is_primary=True, max_length=512)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=DIM)
    schema.add_field("document_id", DataType.VARCHAR, max_length=256)
    schema.add_field("version", DataType.INT64)
    schema.add_field("chunk_index", DataType.INT64)
    schema.add_field("page_number", DataType.INT64)
    schema.add_field("element_types", DataType.VARCHAR, max_length=1024)
    schema.add_field("filename", DataType.VARCHAR, max_length=1024)
    schema.add_field("project", DataType.VARCHAR, max_length=64)
    schema.add_field("category", DataType.VARCHAR, max_length=128)
    schema.add_field("text", DataType.VARCHAR, max_length=TEXT_MAX, enable_analyzer=True, analyzer_params=ANALYZER)
    if with_metadata:
        schema.add_field(METADATA, DataType.JSON, nullable=True)
    if with_lexical:
        schema.add_field(LEXICAL, DataType.VARCHAR, max_length=TEXT_MAX, enable_analyzer=True,
                         analyzer_params=ANALYZER)
    if with_embed_text:
        schema.add_field(EMBED_TEXT, DataType.VARCHAR, max_length=TEXT_MAX)
    schema.add_field(SPARSE, DataType.SPARSE_FLOAT_VECTOR)
    schema.add_function(Function(name="text_bm25", function_type=FunctionType.BM25,
                                 input_field_names=[LEXICAL if with_lexical else "text"],
                                 output_field_names=[SPARSE]))
    _unless_exists(lambda: client.create_collection(name, schema=schema))
    _await_collection(client, name)
    for field in ("vector", SPARSE):
        if not client.list_indexes(name, field_name=field):
            _unless_exists(lambda: client.create_index(name, _chunk_index_params(client, field, index_type)))


def storable_rows(rows: Sequence[dict[str, Any]], fields: Iterable[str]) -> list[dict[str, Any]]:
    """Chunk rows (:func:`chunk_row`'s keys) as a collection with ``fields`` takes them:
    ``text`` cut to the VARCHAR limit (bytes: at most 4 per character), the Function
    output ``SPARSE`` dropped, ``lexical`` (``search.lexical.lexical_form`` of the text,
    cut to :data:`TEXT_MAX` bytes) added when the collection has that field,
    ``embed_text`` (default: the text) cut to :data:`TEXT_MAX` bytes when it has that
    field and dropped when not, and ``metadata`` dropped when it has not.  New dicts;
    ``rows`` are not changed."""
    from search.lexical import fit_bytes, lexical_form

    fields = frozenset(fields)
    out = []
    for row in rows:
        row = {k: v for k, v in row.items()
               if k != SPARSE and (k not in (METADATA, EMBED_TEXT) or k in fields)}
        row["text"] = row["text"][: TEXT_MAX // 4]
        if EMBED_TEXT in fields:
            row[EMBED_TEXT] = fit_bytes(row.get(EMBED_TEXT) or row["text"], TEXT_MAX)
        if LEXICAL in fields:
            row[LEXICAL] = fit_bytes(lexical_form(row["text"]), TEXT_MAX)
        out.append(row)
    return out


def collection_fields(client: MilvusClient, name: str, timeout_s: Optional[float] = None) -> frozenset:
    """The field names of collection (or alias) ``name``."""
    described = client.describe_collection(name, timeout=timeout_s)
    return frozenset(f.get("name") for f in described.get("fields", []))


def dense_index_type(client: MilvusClient, collection: str) -> str:
    """The index type of physical collection ``collection``'s ``vector`` field; "FLAT"
    when it cannot be read (then searches pass no index parameter and Milvus uses its
    defaults).  Connection errors are raised (the caller's reconnect wrapper retries)."""
    try:
        (index_name,) = client.list_indexes(collection, field_name="vector")
        return str(client.describe_index(collection, index_name=index_name).get("index_type", "FLAT"))
    except ValueError:  # no index, or several
        return "FLAT"
    except MilvusException as exc:
        if is_connection_error(exc):
            raise
        log.warning("Milvus: cannot read the vector index of %s (%s): searching it as FLAT", collection, exc)
        return "FLAT"


def is_missing_collection(exc: BaseException) -> bool:
    """Whether a Milvus error says the collection (or the alias) does not exist: code
    100 (CollectionNotExists; Milvus Lite 3.2 answers a delete on a dropped alias with
    ``(code=100, message=collection 'chunks_P' does not exist)``, measured in
    tests/test_project_delete.py) or such a message."""
    if getattr(exc, "code", None) == 100:
        return True
    text = str(exc).lower()
    return "does not exist" in text or "collection not found" in text or "can't find collection" in text


class CrossProcessGate:
    """Flush versus other calls across the processes of one machine: a ``flock`` on
    ``{tmp}/ragstream-milvus-{sha1(uri)[:12]}.lock``, shared for writes, deletes and
    counts, exclusive for a flush (Milvus Lite quirk, module docstring).  Each hold
    opens the file anew, so threads of one process exclude each other as processes do.
    ``path`` None (a Milvus that is not on loopback): holding is a no-op."""

    def __init__(self, path: Optional[str]) -> None:
        self.path = path

    @classmethod
    def for_uri(cls, uri: str) -> "CrossProcessGate":
        """The gate of a Milvus URI: a lock file for 127.0.0.0/8, ``localhost``, ``::1``
        and local files (Milvus Lite's own ``.db`` paths); none for any other host."""
        host = urlsplit(uri).hostname if "://" in uri else "localhost"
        if host not in ("localhost", "::1") and not (host or "").startswith("127."):
            return cls(None)
        digest = hashlib.sha1(uri.encode()).hexdigest()[:12]
        return cls(os.path.join(tempfile.gettempdir(), f"ragstream-milvus-{digest}.lock"))

    @contextmanager
    def hold(self, exclusive: bool):
        """Hold the lock (blocking) for the ``with`` body."""
        if self.path is None:
            yield
            return
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            yield
        finally:
            os.close(fd)  # closing releases the lock


class VectorStore:
    """Milvus access for ragstream chunks.

    ``uri``: e.g. ``http://127.0.0.1:19530``.  ``timeout_s``: deadline of one
    Milvus call (pymilvus retries UNAVAILABLE inside it).  ``connect_timeout_s``:
    how long opening the connection may take.  ``reconnect_s``: how long a
    connection-class error is retried, reconnecting with backoff, before the
    error is raised (None: ``settings.milvus_reconnect_s``, default 60 s).
    Thread-safe: the async wrappers call it from worker threads.
    """

    def __init__(self, uri: str, timeout_s: float = 30.0, reconnect_s: Optional[float] = None,
                 connect_timeout_s: float = 5.0):
        from streams.settings import get_settings

        settings = get_settings()
        if reconnect_s is None:
            reconnect_s = settings.milvus_reconnect_s
        # the dense index of collections this store creates; searches' consistency
        self.index_type = settings.milvus_index_type
        self.hnsw_ef = settings.milvus_hnsw_ef
        self.search_consistency = settings.milvus_search_consistency
        self.uri = uri
        self.timeout_s = timeout_s
        self.reconnect_s = reconnect_s
        self.connect_timeout_s = connect_timeout_s
        self._client: Optional[MilvusClient] = None
        self._ready: set[str] = set()
        self._fields: dict[str, frozenset[str]] = {}  # alias → its collection's field names
        self._index_types: dict[str, str] = {}  # alias → its collection's dense index type
        self.last_used: dict[str, float] = {}  # alias → time.monotonic() of its last use here
        self._ensure_lock = threading.Lock()
        self._lock = threading.Lock()
        self._flush_gate = threading.Lock()  # flush vs. writes/counts: Milvus Lite quirk above
        self._cross_process = CrossProcessGate.for_uri(uri)
        self.reconnects = 0  # how many times a broken connection was dropped

    @property
    def client(self) -> MilvusClient:
        """The current connection, opened on first use (raises when Milvus is down)."""
        with self._lock:
            if self._client is None:
                self._client = MilvusClient(uri=self.uri, timeout=self.connect_timeout_s,
                                            dedicated=True, grpc_options=dict(GRPC_OPTIONS),
                                            **secured_options())
            return self._client

    def close(self) -> None:
        """Close the connection (the next call reconnects)."""
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()

    def _drop(self, client: Optional[MilvusClient]) -> None:
        """Close and forget ``client`` if it is still the current one; forget which
        collections are loaded (a restarted Milvus must load them again)."""
        with self._lock:
            if client is not None and client is self._client:
                self._client = None
                self.reconnects += 1
            else:
                client = None
            self._ready.clear()
            self._fields.clear()
        if client is not None:
            try:
                client.close()
            except Exception:  # noqa: BLE001 - a broken channel may fail to close
                log.debug("closing a broken Milvus client failed", exc_info=True)

    def _call(self, op: str, fn: Callable[[MilvusClient], T]) -> T:
        """Run ``fn(client)``, reconnecting and retrying on connection-class errors
        (exponential backoff 0.2 s … 5 s) for up to ``reconnect_s`` seconds; a
        "collection not loaded" error forgets the loaded set and retries (the next
        attempt loads it).  Other errors, and the last retried error once
        ``reconnect_s`` has passed, are raised."""
        used: list[Optional[MilvusClient]] = [None]

        def attempt() -> T:
            used[0] = None
            client = self.client
            used[0] = client
            return fn(client)

        def before_sleep(state) -> None:
            exc = state.outcome.exception()
            if not is_connection_error(exc):  # not loaded: Milvus restarted under us
                log.warning("Milvus %s at %s: %s; loading the collection again", op, self.uri, exc)
                with self._lock:
                    self._ready.clear()
                return
            log.warning("Milvus %s at %s: %s: %s; reconnecting (attempt %d)", op, self.uri,
                        type(exc).__name__, str(exc)[:200], state.attempt_number)
            self._drop(used[0])

        retrying = Retrying(stop=stop_after_delay(self.reconnect_s),
                            wait=wait_exponential(multiplier=0.2, max=5.0),
                            retry=retry_if_exception(lambda e: is_connection_error(e) or is_not_loaded(e)),
                            before_sleep=before_sleep, reraise=True)
        try:
            return retrying(attempt)
        except BaseException as exc:
            if is_connection_error(exc):
                self._drop(used[0])
            raise

    def _gated(self, op: str, fn: Callable[[MilvusClient], T]) -> T:
        """:meth:`_call` never overlapping a flush, of this store or of another process
        on a loopback Milvus (module docstring); a ``flush`` itself is exclusive."""
        with self._flush_gate, self._cross_process.hold(exclusive=op == "flush"):
            return self._call(op, fn)

    def run_gated(self, op: str, fn: Callable[[MilvusClient], T]) -> T:
        """:meth:`run_sync` never overlapping a flush (:meth:`_gated`): for writes and
        deletes made outside this class (adapters/collection_aliases.py)."""
        return self._gated(op, fn)

    def run_sync(self, op: str, fn: Callable[[MilvusClient], T]) -> T:
        """``fn(client)`` with this store's reconnects and retries (:meth:`_call`), for
        operations outside this class (adapters/collection_aliases.py)."""
        return self._call(op, fn)

    # -- collections ------------------------------------------------------------------
    def ensure_collection_sync(self, project: str) -> str:
        """Create ``chunks_{project}_v1`` and its alias when the alias is missing,
        load it; returns the alias.  Idempotent; reconnects like every method."""
        alias = alias_name(project)
        return self._call("ensure_collection", lambda client: self._ensure(client, alias))

    def _ensure(self, client: MilvusClient, alias: str, create: bool = True) -> str:
        """Create (once, when ``create``) and load the alias's collection.  Race-safe:
        threads of this process take turns; another process creating the same
        collection or alias first is fine (its "already exists" is ignored).  A
        missing alias with ``create`` False raises LookupError."""
        self.last_used[alias] = time.monotonic()
        if alias in self._ready:
            return alias
        with self._ensure_lock:
            return self._ensure_locked(client, alias, create)

    def _ensure_locked(self, client: MilvusClient, alias: str, create: bool) -> str:
        if alias in self._ready:
            return alias
        if not has_alias(client, alias) and not client.has_collection(alias):
            if not create:
                raise LookupError(f"Milvus alias {alias} does not exist (ragstream reindex --alias test makes it)")
            physical = with_suffix(alias, "v1")
            create_chunk_collection(client, physical, index_type=self.index_type)
            _unless_exists(lambda: client.create_alias(physical, alias))
        client.load_collection(alias, timeout=self.timeout_s)
        described = client.describe_collection(alias, timeout=self.timeout_s)
        self._fields[alias] = frozenset(f.get("name") for f in described.get("fields", []))
        self._index_types[alias] = dense_index_type(client, described.get("collection_name") or alias)
        self._ready.add(alias)
        return alias

    def loaded_here(self) -> dict[str, float]:
        """``{alias: time.monotonic() of its last use}`` for every alias this store has
        loaded and not released (adapters/idle_collections.py picks from it)."""
        with self._ensure_lock:
            return {a: self.last_used.get(a, 0.0) for a in self._ready}

    def release_sync(self, alias: str, unused_since: float) -> bool:
        """Release the collection behind ``alias`` (its segments leave query-node
        memory) unless this store used it after ``unused_since`` (time.monotonic());
        returns whether it was released.  The next call of this store on it loads it
        again (:meth:`_ensure`); another process still using it gets "collection not
        loaded", which :meth:`_call` answers by loading it again.  A collection gone
        meanwhile (dropped project) is forgotten."""
        with self._ensure_lock:  # not held across the call: _gated takes the flush gate first
            if alias not in self._ready or self.last_used.get(alias, 0.0) > unused_since:
                return False
            self._ready.discard(alias)

        def release(client: MilvusClient) -> None:
            try:
                client.release_collection(alias, timeout=self.timeout_s)
            except MilvusException as exc:
                if not is_missing_collection(exc):
                    raise

        self._gated("release", release)
        return True

    # -- writes -----------------------------------------------------------------------
    def upsert_sync(self, project: str, rows: Sequence[dict[str, Any]]) -> int:
        """Upsert chunk rows (keys: OUTPUT_FIELDS + ``vector``); returns the row count."""
        alias = alias_name(project)
        rows = list(rows)

        def upsert(c: MilvusClient, name: str) -> Any:
            return c.upsert(name, storable_rows(rows, self._fields.get(alias, ())), timeout=self.timeout_s)

        self._gated("upsert", lambda c: self._on(c, alias, lambda n: upsert(c, n)))
        return len(rows)

    def output_fields(self, alias: str) -> list[str]:
        """The fields a search returns from ``alias``'s collection (known once
        :meth:`_ensure` loaded it): :data:`OUTPUT_FIELDS`, plus ``metadata`` and
        ``embed_text`` when the collection has those fields."""
        have = self._fields.get(alias, ())
        return OUTPUT_FIELDS + [f for f in (METADATA, EMBED_TEXT) if f in have]

    def has_metadata_field_sync(self, project: str, alias: str = "prod") -> bool:
        """Whether the project's ``alias`` collection has the ``metadata`` field (one made
        before it has not: ``ragstream reindex`` makes a new one that has)."""
        name = alias_for(project, alias)
        return self._call("describe", lambda c: METADATA in self._fields.get(
            self._ensure(c, name, alias == "prod"), ()))

    def _on(self, client: MilvusClient, alias: str, fn: Callable[[str], T], create: bool = True) -> T:
        """``fn(name)`` on the alias's collection (:meth:`_ensure`).  A collection
        dropped since this store last looked (``project delete`` from another process,
        streams/project_erasure.py) answers code 100: it is forgotten, looked up (and,
        with ``create``, made) again and ``fn`` runs once more — before, the first
        document indexed into a re-created project failed."""
        try:
            return fn(self._ensure(client, alias, create))
        except MilvusException as exc:
            if not is_missing_collection(exc):
                raise
            self.forget_alias(alias)
            return fn(self._ensure(client, alias, create))

    def _delete_rows(self, alias: str, flt: str) -> None:
        """Delete the rows matching ``flt`` behind ``alias``; a missing collection (never
        made, or dropped with its project: streams/project_erasure.py) has nothing to
        delete and is not created for it."""
        def delete(client: MilvusClient) -> None:
            try:
                name = self._ensure(client, alias, create=False)
            except LookupError:
                return
            try:
                client.delete(name, filter=flt, timeout=self.timeout_s)
            except MilvusException as exc:
                if not is_missing_collection(exc):
                    raise
                self.forget_alias(alias)

        self._gated("delete", delete)

    def forget_alias(self, alias: str) -> None:
        """Drop what this store remembers of ``alias`` (loaded, its fields): after its
        collection was dropped, the next call looks again (and creates it if it writes)."""
        self._ready.discard(alias)
        self._fields.pop(alias, None)
        self._index_types.pop(alias, None)

    def forget(self, project: str) -> None:
        """:meth:`forget_alias` for the project's prod and test aliases."""
        for kind in ALIASES:
            self.forget_alias(alias_for(project, kind))

    def delete_versions_below_sync(self, project: str, document_id: str, version: int) -> None:
        """Delete a document's chunks of every version lower than ``version``."""
        alias = alias_name(project)
        flt = scoped_filter(project, f"document_id == {quote_literal(document_id)} and version < {int(version)}")
        self._delete_rows(alias, flt)

    def delete_version_sync(self, project: str, document_id: str, version: int) -> None:
        """Delete the chunks of one version of a document."""
        alias = alias_name(project)
        flt = scoped_filter(project, f"document_id == {quote_literal(document_id)} and version == {int(version)}")
        self._delete_rows(alias, flt)

    def delete_document_sync(self, project: str, document_id: str) -> None:
        """Delete every chunk of a document."""
        alias = alias_name(project)
        flt = scoped_filter(project, f"document_id == {quote_literal(document_id)}")
        self._delete_rows(alias, flt)

    # -- reads ------------------------------------------------------------------------
    def flush_sync(self, project: str) -> None:
        """Seal the collection's in-memory rows into segments.  Milvus Lite rebuilds
        the indexes of unsealed rows (its memtable, up to 128 MB) at every search;
        sealed segments keep theirs (bench/search.py measures both)."""
        alias = alias_name(project)
        self._gated("flush", lambda c: self._on(c, alias, lambda n: c.flush(n, timeout=self.timeout_s)))

    def count_sync(self, project: str, document_id: str, version: Optional[int] = None) -> int:
        """Number of chunks stored for a document (optionally one version)."""
        alias = alias_name(project)
        expr = f"document_id == {quote_literal(document_id)}"
        if version is not None:
            expr += f" and version == {int(version)}"
        flt = scoped_filter(project, expr)
        res = self._gated("count", lambda c: self._on(c, alias, lambda n: c.query(
            n, filter=flt, output_fields=["count(*)"], consistency_level="Strong", timeout=self.timeout_s)))
        return int(res[0]["count(*)"]) if res else 0

    def chunk_ids_sync(self, project: str, document_id: str) -> list[str]:
        """Every primary key stored for a document (for duplicate checks)."""
        alias = alias_name(project)
        flt = scoped_filter(project, f"document_id == {quote_literal(document_id)}")
        res = self._gated("query", lambda c: self._on(c, alias, lambda n: c.query(
            n, filter=flt, output_fields=["chunk_id"], limit=16384, timeout=self.timeout_s)))
        return [r["chunk_id"] for r in res]

    def chunk_texts_sync(self, project: str, filenames: Sequence[str]) -> list[dict[str, Any]]:
        """Every stored chunk of the documents named ``filenames`` in ``project`` (all
        versions; the caller keeps the current ones): rows with ``document_id``,
        ``version``, ``filename``, ``chunk_index``, ``text``, read with a query iterator
        (1,000 rows per page, no cap on a document's chunk count)."""
        alias = alias_name(project)
        names = ", ".join(quote_literal(n) for n in filenames)
        flt = scoped_filter(project, f"filename in [{names}]")
        fields = ["document_id", "version", "filename", "chunk_index", "text"]

        def read(c: MilvusClient, name: str) -> list[dict[str, Any]]:
            it = c.query_iterator(name, batch_size=1000, filter=flt, output_fields=fields,
                                  timeout=self.timeout_s)
            rows: list[dict[str, Any]] = []
            try:
                while page := it.next():
                    rows.extend({f: r[f] for f in fields} for r in page)
            finally:
                it.close()
            return rows

        return self._gated("query", lambda c: self._on(c, alias, lambda n: read(c, n), create=False))

    def dense_search_params(self, alias: str, k: int) -> dict[str, Any]:
        """Search parameters for the dense index of ``alias``'s collection (loaded):
        ``ef`` = max(``milvus_hnsw_ef``, ``k``) for HNSW (Milvus refuses ef < k), none
        for FLAT."""
        if self._index_types.get(alias) == "HNSW":
            return {"metric_type": "IP", "params": {"ef": max(self.hnsw_ef, int(k))}}
        return {}

    def search_sync(self, project: str, vector: Sequence[float], k: int = 5,
                    filter: str = "", alias: str = "prod") -> list[dict[str, Any]]:
        """Top-``k`` chunks by inner product (= cosine); each hit: fields + ``score``.
        ``alias``: "prod" or "test" (:func:`alias_for`; a missing test alias: LookupError)."""
        name = alias_for(project, alias)
        data = [list(vector)]
        flt = scoped_filter(project, filter)
        res = self._call("search", lambda c: self._on(c, name, lambda n: c.search(
            n, data=data, limit=k, filter=flt, output_fields=self.output_fields(name), anns_field="vector",
            search_params=self.dense_search_params(name, k), consistency_level=self.search_consistency,
            timeout=self.timeout_s), create=alias == "prod"))
        hits = []
        for hit in res[0] if res else []:
            entity = dict(hit.get("entity", {}))
            entity["score"] = float(hit.get("distance", 0.0))
            hits.append(entity)
        return hits

    def hybrid_search_sync(self, project: str, vector: Sequence[float], query: str, k: int = 5,
                           filter: str = "", alias: str = "prod") -> HybridHits:
        """Top-``k`` chunks by dense ANN (cosine) and BM25 over the chunk text's lexical
        form (``search.lexical``: CJK as characters + bigrams; the raw ``text`` in a
        collection made before the ``lexical`` field), each limited
        to ``k`` and narrowed by the same ``filter`` (two Milvus searches), fused by
        :func:`rrf_fuse` (RRF k = 60, ties broken by the scores).  Dense only
        (``fallback_reason`` says why) when the collection has no BM25 field (old
        schema) or ``query`` has no word token.  Every hit carries ``dense_score`` (the inner product of ``vector`` and the chunk's vector, the
        cosine), and ``bm25_score`` when BM25 found it.  ``alias``: as for
        :meth:`search_sync`."""
        from search.lexical import dense_weight, lexical_form

        name, create = alias_for(project, alias), alias == "prod"
        reason = None
        if not self._call("describe", lambda c: SPARSE in self._fields.get(self._ensure(c, name, create), ())):
            reason = f"collection {name} has no BM25 field (made before hybrid search): dense only"
        elif not re.search(r"\w", query):
            reason = "query has no word to match: dense only"
        if reason is not None:
            hits = self.search_sync(project, vector, k, filter, alias)
            for h in hits:
                h["dense_score"] = h["score"]
            return HybridHits(hits, ["dense"], reason)
        q = [float(x) for x in vector]
        with ThreadPoolExecutor(2) as pool:  # the two searches at once (the client is thread-safe)
            dense_f = pool.submit(self.search_sync, project, q, k, filter, alias)
            lexical = LEXICAL in self._fields.get(name, ())  # else BM25 reads the raw text
            bm25_f = pool.submit(self._call, "search", lambda c: self._on(c, name, lambda n: c.search(
                n, data=[lexical_form(query) if lexical else query], limit=k, filter=scoped_filter(project, filter),
                output_fields=self.output_fields(name) + ["vector"], anns_field=SPARSE,
                search_params={"metric_type": "BM25"}, consistency_level=self.search_consistency,
                timeout=self.timeout_s), create=create))
            dense_hits = [{**h, "dense_score": h["score"]} for h in dense_f.result()]
            bm25 = bm25_f.result()
        bm25_hits = []
        for hit in bm25[0] if bm25 else []:
            entity = dict(hit.get("entity", {}))
            vec = entity.pop("vector", None) or []
            entity["dense_score"] = float(sum(a * b for a, b in zip(q, vec)))
            entity["bm25_score"] = abs(float(hit.get("distance", 0.0)))
            bm25_hits.append(entity)
        return HybridHits(rrf_fuse(dense_hits, bm25_hits, dense_weight=dense_weight(query))[:k],
                          ["dense", "bm25", "rrf"])

    # -- async wrappers (run in a thread) -------------------------------------------------
    async def upsert(self, project: str, rows: Sequence[dict[str, Any]]) -> int:
        return await asyncio.to_thread(self.upsert_sync, project, rows)

    async def delete_versions_below(self, project: str, document_id: str, version: int) -> None:
        await asyncio.to_thread(self.delete_versions_below_sync, project, document_id, version)

    async def delete_version(self, project: str, document_id: str, version: int) -> None:
        await asyncio.to_thread(self.delete_version_sync, project, document_id, version)

    async def delete_document(self, project: str, document_id: str) -> None:
        await asyncio.to_thread(self.delete_document_sync, project, document_id)

    async def count(self, project: str, document_id: str, version: Optional[int] = None) -> int:
        return await asyncio.to_thread(self.count_sync, project, document_id, version)

    async def chunk_texts(self, project: str, filenames: Sequence[str]) -> list[dict[str, Any]]:
        return await asyncio.to_thread(self.chunk_texts_sync, project, filenames)

    async def has_metadata_field(self, project: str, alias: str = "prod") -> bool:
        return await asyncio.to_thread(self.has_metadata_field_sync, project, alias)

    async def search(self, project: str, vector: Sequence[float], k: int = 5,
                     filter: str = "", alias: str = "prod") -> list[dict[str, Any]]:
        return await asyncio.to_thread(self.search_sync, project, vector, k, filter, alias)

    async def hybrid_search(self, project: str, vector: Sequence[float], query: str, k: int = 5,
                            filter: str = "", alias: str = "prod") -> HybridHits:
        return await asyncio.to_thread(self.hybrid_search_sync, project, vector, query, k, filter, alias)
