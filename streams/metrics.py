"""Prometheus metrics of the pipeline stages (one registry per process).

Workers serve them on ``RAGSTREAM_METRICS_HOST``:``RAGSTREAM_METRICS_PORT`` (127.0.0.1
by default; port 0 = off); the Triton client's own metrics (``ragstream_triton_*``)
are in the same registry.
"""
from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram, start_http_server

STAGE_EVENTS = Counter("ragstream_stage_events_total",
                       "Events (or batches) handled per stage, by outcome (ok / failed / retried)",
                       ["stage", "outcome"])
STAGE_SECONDS = Histogram("ragstream_stage_seconds", "Wall time of one stage call, in seconds",
                          ["stage"], buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300))

# refreshed by each stage worker's lag task (streams/lag.py install_lag_gauges)
CONSUMER_LAG = Gauge("ragstream_consumer_lag",
                     "Messages on the stage's input topic partition not yet committed by its group",
                     ["stage", "partition"])
CONSUMER_LAG_AGE = Gauge("ragstream_consumer_lag_oldest_age_seconds",
                         "Age in seconds of the oldest record the stage's group has not processed "
                         "(0 when the lag is 0)", ["stage", "partition"])

# the embed stage's embedding cache (adapters/embedding_cache.py): per chunk, "miss" when
# its text was embedded, "hit" when its vector came from the cache (or a repeat in the batch)
EMBED_CACHE = Counter("ragstream_embed_cache", "Chunks of the embed stage by embedding-cache result "
                      "(hit: vector reused, not embedded / miss: text embedded)", ["result"])

# the enhance stage's vision-language model calls (adapters/vlm.py): one per attempt
VLM_CALLS = Counter("ragstream_vlm_calls_total",
                    "Chat-completion calls to the vision-language model, by outcome "
                    "(ok / error / retried) and chunk kind (table / image)", ["outcome", "kind"])
VLM_SECONDS = Histogram("ragstream_vlm_call_seconds",
                        "Latency of one vision-language model call (an attempt), in seconds",
                        ["kind"], buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120))
VLM_TOKENS = Counter("ragstream_vlm_tokens_total",
                     "Tokens the vision-language model reported in ``usage``, by direction "
                     "(prompt / completion)", ["direction"])

def serve_metrics(port: int, host: str = "127.0.0.1") -> None:
    """Serve /metrics on ``host``:``port`` from a background thread (port 0: do nothing).
    Raises OSError when the address is taken."""
    if port:
        start_http_server(port, addr=host)
