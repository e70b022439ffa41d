"""Runtime settings for every ragstream process (pydantic-settings).

Every value can be set from the environment with the ``RAGSTREAM_`` prefix, e.g.
``RAGSTREAM_KAFKA_BOOTSTRAP=broker:9092``.  Defaults point at the embedded stack
that ``ragstream dev up`` starts on loopback, with all data under ``data_dir``.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """All ragstream settings.  Ports are the embedded stack's defaults."""

    model_config = SettingsConfigDict(env_prefix="RAGSTREAM_", env_file=None, extra="ignore")

    # where the embedded stack keeps its data, pids and logs
    data_dir: Path = Path(".ragstream")

    # Kafka protocol broker (Tansu in the embedded stack)
    kafka_bootstrap: str = "127.0.0.1:19092"
    # Tansu storage engine for the embedded broker: "s3://BUCKET/" (durable: every
    # record survives a broker restart; the bucket lives in the embedded SeaweedFS,
    # which then starts first) or "memory://tansu/" (lost on restart)
    broker_storage: str = "s3://ragstream-broker/"
    topic_partitions: int = 4
    # replicas of every topic ragstream and Faust create: 1 for one broker (the
    # embedded stack); 3 on a production cluster.  ``topic_min_insync_replicas``
    # (0: the broker's default) is set on each topic; producers send acks=all, so it
    # must not exceed the replication factor (checked at start)
    topic_replication_factor: int = Field(1, ge=1)
    topic_min_insync_replicas: int = Field(0, ge=0)
    # how clients authenticate to Kafka (streams/kafka_auth.py): PLAINTEXT on the
    # embedded stack; SSL, SASL_PLAINTEXT or SASL_SSL for a secured cluster, with a
    # PLAIN or SCRAM user, an optional private CA bundle and client certificate (PEM)
    kafka_security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    kafka_sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] = "SCRAM-SHA-512"
    kafka_sasl_username: str = ""
    kafka_sasl_password: SecretStr = SecretStr("")
    kafka_ssl_cafile: str = ""
    kafka_ssl_certfile: str = ""
    kafka_ssl_keyfile: str = ""
    # every process waits this long (seconds) for the broker and the catalogue's
    # topics at start (topics/admin.ensure_topics), with backoff, then fails clearly
    broker_wait_s: float = 60.0
    # after SIGTERM/SIGINT a worker or API process that has not finished shutting
    # down within this many seconds is hard-exited (streams/shutdown.py)
    shutdown_grace_s: float = 30.0

    # S3 API (SeaweedFS in the embedded stack)
    s3_endpoint: str = "http://127.0.0.1:18333"
    s3_access_key: str = "ragstream"
    s3_secret_key: str = "ragstream-secret"
    s3_region: str = "us-east-1"
    bucket: str = "ragstream"
    # ``ragstream sync s3://bucket/prefix`` (adapters/source_listing.py): the
    # source's S3 endpoint and credentials; empty: the object store's s3_* above
    sync_s3_endpoint: str = ""
    sync_s3_access_key: str = ""
    sync_s3_secret_key: str = ""
    sync_s3_region: str = ""

    # PostgreSQL (metadata, status projection)
    pg_port: int = 15432
    pg_dsn: str = "postgresql://ragstream@127.0.0.1:15432/ragstream"

    # Milvus (Milvus Lite server in the embedded stack); how long a lost connection
    # is retried, reconnecting with backoff, before a call fails (seconds)
    milvus_uri: str = "http://127.0.0.1:19530"
    milvus_reconnect_s: float = 60.0
    # a secured Milvus (adapters/vector_store.py): a token ("user:password" or an
    # API key) and, for an https:// URI signed by a private CA, that CA's PEM file
    milvus_token: SecretStr = SecretStr("")
    milvus_ca_pem: str = ""
    # the dense vector index of collections made from now on (adapters/vector_store.py):
    # FLAT (exact; the embedded Milvus Lite, where every search is brute force anyway)
    # or HNSW (M 16, efConstruction 200; search ef = max(milvus_hnsw_ef, k)) for a
    # Milvus standalone or cluster (compose, Kubernetes).  Existing collections keep
    # theirs until `ragstream reindex` builds new ones.
    milvus_index_type: Literal["FLAT", "HNSW"] = "FLAT"
    milvus_hnsw_ef: int = Field(default=128, ge=1, le=32768)
    # the consistency level of searches: Strong (default) sees every row written
    # before the search, so a document is searchable once its COMPLETED status (and
    # callback) is out; Bounded (Milvus' own default) is cheaper on a remote Milvus
    # but may miss rows written in its staleness window (README, "Milvus at scale")
    milvus_search_consistency: Literal["Strong", "Bounded", "Session", "Eventually"] = "Strong"
    # a project's collection that this process (the API, an index worker) loaded and has
    # not used for this many seconds is released (its segments leave query-node
    # memory); the next search or write loads it again (adapters/idle_collections.py).
    # 0 = never release
    milvus_release_idle_s: float = Field(default=3600.0, ge=0)

    # Triton inference server (the embedded stack serves it on 127.0.0.1)
    triton_host: str = "127.0.0.1"
    triton_http_port: int = 18000
    triton_grpc_port: int = 18001
    triton_metrics_port: int = 18002
    # warm Office->PDF converter (unoserver, devstack/converter.py): XML-RPC
    # port; LibreOffice's own UNO socket listens on converter_port + 1
    converter_port: int = 12003
    # "triton" (gRPC to tritonserver) or "onnx" (in-process ONNX Runtime fallback)
    embedder: str = "triton"
    # in-process ONNX embedder: model file (None = triton/embedder/1/model.onnx,
    # exported on first use), ONNX Runtime intra-op threads (0 = one per core),
    # truncation in word pieces (all-MiniLM-L6-v2 max_seq_length = 256)
    embedder_onnx_path: Path | None = None
    embedder_threads: int = 0
    embedder_max_tokens: int = 256
    # in-process embedder's weights: the float export or its int8 dynamic quantization
    # (adapters/int8_model.py; its own embedding-cache key; `ragstream bench int8`)
    embedder_precision: Literal["fp32", "int8"] = "fp32"
    # Triton server (devstack/triton.py): its venv (None = .venv-triton), model
    # repository (None = triton/), models to load, ONNX Runtime threads per model
    # instance (0 = one per core)
    triton_venv: Path | None = None
    triton_model_repository: Path | None = None
    triton_models: str = "embedder,embedder_online,reranker"
    triton_threads: int = 0
    # Triton clients (adapters/triton_embedder.py, adapters/reranker.py): model names,
    # per-request deadline, and how long UNAVAILABLE is retried with backoff
    triton_embed_model: str = "embedder"
    triton_timeout_s: float = 120.0
    triton_retry_s: float = 60.0
    # reranker: directory with model.onnx + tokenizer.json (None = triton/reranker/1,
    # built by triton/export_reranker.py), model name, deadline for one rerank call
    reranker_dir: Path | None = None
    reranker_model: str = "reranker"
    reranker_timeout_s: float = 2.0
    # second stage of search (search/late_interaction.py): "late-interaction" reorders the
    # first late_interaction_depth fused candidates by MaxSim over the embedder's token
    # vectors, computed from their text at query time (in process: slow on a CPU)
    second_stage: Literal["none", "late-interaction"] = "none"
    late_interaction_depth: int = Field(20, ge=2, le=200)

    # workers serve Prometheus /metrics on metrics_host:metrics_port (0 = off); a
    # container sets metrics_host 0.0.0.0 so Prometheus and kubelet probes reach it
    metrics_port: int = 0
    metrics_host: str = "127.0.0.1"

    # log lines: text, or one JSON object per line with the record's document id,
    # version, stage, project and trace id (streams/log_format.py)
    log_format: Literal["text", "json"] = "text"
    # OpenTelemetry traces of document versions (streams/tracing.py): off, otlp (the
    # endpoint from OTEL_EXPORTER_OTLP_ENDPOINT) or file (JSON spans appended to
    # trace_file)
    tracing: Literal["off", "otlp", "file"] = "off"
    trace_file: str = ""
    # each stage worker refreshes its consumer-lag gauges (streams/lag.py) this often
    # (seconds; 0 = off)
    lag_refresh_s: float = 5.0
    # ... but while the stage is idle (its last refresh saw no lag and it has handled
    # no event since) only this often (seconds; 0 = every lag_refresh_s): each refresh
    # is a Fetch round the embedded broker answers by listing partitions' objects
    lag_refresh_idle_s: float = 60.0
    # every stage consumer's Fetch wait on the embedded broker (ms, broker quirk 13;
    # applied while RAGSTREAM_BROKER_QUIRKS is on;
    # Faust's own is 1,500): each wait is rounds of reads of every assigned partition;
    # under 250 ms Tansu 0.6.0 reads without pause (measured at 150: the idle stack
    # took 1.9 cores), so 250 is the floor
    consumer_fetch_wait_ms: int = Field(1500, ge=250, le=10_000)
    # every stage producer waits this long (ms) for more records before it sends a
    # batch: a stage's records for one document (a document's chunks) then travel in
    # one produce request, one storage object, one Fetch for the next stage
    producer_linger_ms: int = Field(10, ge=0, le=1000)

    # ``ragstream worker --autoscale`` (streams/autoscale.py): consumers per stage
    # within "stage=min:max,..." (stages not named: autoscale_min..autoscale_max),
    # never above the topic's partition count; the backlog a stage should clear in
    # autoscale_target_s seconds at its measured rate; lag read every
    # autoscale_interval_s; no further change within autoscale_up_cooldown_s of a
    # change; a stage scales down once it wanted fewer for autoscale_cooldown_s
    autoscale_limits: str = "partition=1:4,embed=1:4"
    autoscale_min: int = 1
    autoscale_max: int = 1
    autoscale_target_s: float = 30.0
    autoscale_interval_s: float = 5.0
    autoscale_up_cooldown_s: float = 20.0
    autoscale_cooldown_s: float = 60.0
    # after a change, a stage that has committed nothing yet is joining, not stuck:
    # no "one more consumer" for this long (streams/autoscale.StageScaler)
    autoscale_join_grace_s: float = 20.0

    # pipeline
    enhance_max_batch: int = 64
    enhance_batch_within_s: float = 0.2
    embed_max_batch: int = 64
    embed_batch_within_s: float = 0.2
    # size lanes (topics/lanes.py): a document of at most this many chunks sends them
    # to the small half of the chunk topics' partitions; 0 turns lanes off
    fair_small_document_chunks: int = 64
    # the embed app fetches at most this many bytes per partition per request and
    # buffers at most this many events (Faust's defaults: 1 MiB and 4096), so a small
    # document's chunks are not queued behind thousands of a big one's (issue 26)
    embed_fetch_max_bytes: int = 128 * 1024
    embed_stream_buffer: int = 128
    # records per poll of the embed app; partitions take turns poll by poll
    # (streams/fair_fetch.py: the embedded broker ignores the byte limit, quirk 12)
    embed_poll_records: int = 64
    # project lanes (topics/lanes.py burst_lane): a project with more than
    # fair_project_burst versions in flight (registered in the last
    # fair_project_window_s seconds, not finished) sends its next uploads to the bulk
    # lane, so another project's single file never waits behind its backlog; 0: off
    fair_project_burst: int = 8
    fair_project_window_s: float = 600.0
    # consumers poll a laned topic's first half before its bulk half, but every
    # fair_bulk_turn-th poll, the bulk lane's least share (streams/fair_fetch.py)
    fair_bulk_turn: int = 4
    # the document-level stages (normalize, partition, chunk: up to seconds per event)
    # poll and buffer this few events, so an event on a lane's partition is at most
    # these few behind another lane's (Faust's defaults: every fetched record, 4096)
    task_poll_records: int = 1
    task_stream_buffer: int = 2
    index_max_batch: int = 256
    index_batch_within_s: float = 0.5
    # seconds between Milvus flushes of a project's new rows (agents/index.py
    # TrailingFlush; unsealed rows make hybrid search ~25x slower on Milvus Lite); -1 = never
    index_flush_interval_s: float = 5.0
    # processes in the blocking-work pool (stages/pool.py) of one worker, shared by
    # its normalize, partition and chunk agents.  1 by default: a parse process
    # holds a parser's models (hundreds of MB) and uses a core; scale out with more
    # worker processes (Procfile), or raise this on a large machine where one
    # worker runs several stages.  Each task's deadline counts from its start, and
    # a timeout or crash fails that task only, so a larger pool only adds throughput.
    stage_workers: int = 1
    # partition tasks one partition worker parses at once, each in its own pool
    # process (agents/partition.py): 2 uses both cores of the 2-core machines this was
    # measured on, and lets a small document pass a long OCR parse.  Each parse
    # process can peak at 3.4 GiB (OCR, measured), so size it to memory too.
    partition_concurrency: int = 2
    # page ranges of split documents at once per partition worker, an agent and pool
    # slots of their own beside the partition_concurrency whole documents (issue 26)
    partition_range_concurrency: int = 2
    # niceness (0-19) of the partition worker's range-slot parse processes, which parse
    # bulk-lane tasks (page ranges of split documents, a project's burst): while they
    # keep the cores busy the kernel gives interactive work (other documents' stages,
    # Triton, the broker) the CPU first (issue 26, bench fairness).  0: one pool, the
    # worker's own priority.  Lowering priority needs no privilege (raising it would)
    bulk_parse_nice: int = Field(default=10, ge=0, le=19)
    # false: normalize queues page ranges on partition-tasks with the whole documents,
    # as before the lane (the partition stage reads both topics either way)
    page_range_lane: bool = True
    # true: the partition stage's parse processes fork from a server that loaded the
    # parsers and models once, when the worker started (stages/preload_parsers.py,
    # about 3.6 s of one core), so no document pays for them and a replacement
    # process starts warm at once (bench peer: 4.5 core-s less per corpus run).
    # false: each parse process is spawned cold and loads a parser on its first
    # document of that kind.  The server's pages are shared by its forks; bench/scale.py
    # counts them once (PSS)
    warm_parsers: bool = True
    convert_timeout_s: float = 120.0
    # per-document limits (stages/limits.py reads the same RAGSTREAM_* variables; a
    # document over one FAILS with a reason naming it): pixels of one image or
    # rendered page, checked before decoding; cells a spreadsheet sheet spans;
    # elements and chunks per document; element texts split into pieces of this many
    # characters; uncompressed MiB of one Office part; address-space cap (MiB) of each
    # parse process (RLIMIT_AS, 0 = none; measured peaks: hi_res PDF 2.4 GiB, OCR 3.4 GiB);
    # characters of one CSV/TSV field; frames (pages) of one image file, each OCR'd;
    # levels of attachments opened inside an e-mail (deeper ones are skipped, named)
    max_image_pixels: int = 89_478_485
    max_sheet_cells: int = 5_000_000
    max_elements: int = 200_000
    max_chunks: int = 20_000
    max_element_chars: int = 20_000
    max_part_mb: int = 512
    parse_memory_mb: int = 6144
    max_field_chars: int = 10_485_760
    max_image_frames: int = 1_000
    max_email_depth: int = 3
    # a TXT file over this many bytes is partitioned by linear-time paragraph rules
    # (stages/plain_text.py) instead of unstructured's per-paragraph NLP
    plain_text_fast_bytes: int = 1_000_000
    partition_timeout_s: float = 3600.0
    # how long a stage keeps retrying one event through transient outages (broker,
    # S3, PostgreSQL, Milvus, Triton) before its document FAILS "timeout after N s"
    document_deadline_s: float = 3600.0
    # the normalize worker re-sends versions whose upload events were never sent
    # (uploader crashed or lost the broker half-way) once they are this old
    upload_sweep_after_s: float = 120.0
    upload_sweep_interval_s: float = 30.0

    # vision-language model for the enhance stage (adapters/vlm.py): an OpenAI-compatible
    # chat-completions server at vlm_base_url (POST {base}/v1/chat/completions; empty =
    # off: tables and images keep the deterministic rendering), the model name, a
    # bearer key (empty = none), the deadline of one call (seconds), calls in flight
    # per worker process, and retries of a failed call (after them the chunk goes on
    # with the deterministic rendering and a note; the document never fails over it)
    vlm_base_url: str = ""
    vlm_model: str = "vlm"
    vlm_api_key: str = ""
    vlm_timeout_s: float = 60.0
    vlm_max_concurrency: int = 4
    vlm_max_retries: int = 3

    # HTTP API (api): listen address, the largest upload accepted (bytes;
    # larger → 413, nothing stored), buckets that uploads may reference besides
    # ``incoming/{project}/`` in our own bucket (comma-separated)
    api_host: str = "127.0.0.1"
    api_port: int = 8080
    api_max_upload_bytes: int = 512 * 1024 * 1024
    api_reference_buckets: str = ""

    # MCP server (``ragstream mcp``, mcp_server/): the ragstream HTTP API it is a client
    # of, the one project API key it calls it with (from the environment only,
    # RAGSTREAM_MCP_API_KEY: a command-line argument would show in ``ps``), and the
    # deadline of one API call (seconds; an upload of the largest file must fit in it)
    mcp_api_url: str = "http://127.0.0.1:8080"
    mcp_api_key: SecretStr = SecretStr("")
    mcp_timeout_s: float = 300.0

    # completion callbacks (agents/notify.py): hosts (names, IPs or CIDRs,
    # comma-separated) that may resolve to private/loopback/link-local addresses;
    # each attempt's total deadline (connect, send, answer), attempts, exponential
    # backoff base and cap (seconds)
    callback_allow_hosts: str = ""
    callback_timeout_s: float = 10.0
    # 20 attempts with the 300 s cap: a receiver may be away for about an hour
    callback_max_attempts: int = 20
    callback_backoff_s: float = 1.0
    callback_backoff_max_s: float = 300.0
    # after ``ragstream apikey secret --rotate``, callbacks carry a second ``v1=``
    # signature with the previous secret for this long (s), so receivers can switch
    callback_secret_overlap_s: float = 24 * 3600.0

    @model_validator(mode="after")
    def _consistent(self) -> "Settings":
        """Refuse, at start, combinations that would fail on first use: SASL without
        a user, a client key without its certificate, more in-sync replicas than
        replicas (every acks=all send would be refused)."""
        if self.kafka_security_protocol.startswith("SASL") and not (
                self.kafka_sasl_username and self.kafka_sasl_password.get_secret_value()):
            raise ValueError(f"RAGSTREAM_KAFKA_SECURITY_PROTOCOL={self.kafka_security_protocol} "
                             "needs RAGSTREAM_KAFKA_SASL_USERNAME and RAGSTREAM_KAFKA_SASL_PASSWORD")
        if self.kafka_ssl_keyfile and not self.kafka_ssl_certfile:
            raise ValueError("RAGSTREAM_KAFKA_SSL_KEYFILE needs RAGSTREAM_KAFKA_SSL_CERTFILE")
        if self.topic_min_insync_replicas > self.topic_replication_factor:
            raise ValueError(f"RAGSTREAM_TOPIC_MIN_INSYNC_REPLICAS={self.topic_min_insync_replicas} "
                             f"exceeds RAGSTREAM_TOPIC_REPLICATION_FACTOR={self.topic_replication_factor}: "
                             "the broker would refuse every acks=all send")
        return self

    @property
    def project_lanes(self) -> bool:
        """Project lanes on (``fair_project_burst`` > 0): uploads in a project's burst,
        and their partition tasks, elements and chunks, travel in the bulk lane."""
        return self.fair_project_burst > 0


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """Process-wide settings, read once from the environment."""
    return Settings()
