"""The VLM client (adapters/vlm.py) and the enhance helpers, against the stand-in
OpenAI-compatible server of tests/vlm_server.py (no model weights can run here; the
server is the only mock).  No stack needed."""
from __future__ import annotations

import asyncio
import io
import time

import pytest

from tests.vlm_server import VlmServer, image_summary, table_summary

TABLE = ("<table><tr><th>Site</th><th>Flow</th></tr><tr><td>North Basin</td><td>120</td></tr>"
         "<tr><td>West Hollow</td><td>75</td></tr></table>")


def _png() -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (8, 8), (200, 10, 10)).save(buf, format="PNG")
    return buf.getvalue()


@pytest.fixture
def server():
    srv = VlmServer().start()
    yield srv
    srv.stop()


def _settings(url: str, **kw):
    from streams.settings import Settings

    return Settings(vlm_base_url=url, vlm_model="stand-in", **{
        "vlm_timeout_s": 5.0, "vlm_max_retries": 1, "vlm_max_concurrency": 4, **kw})


def _summarise(settings, *requests):
    from adapters.vlm import VlmClient

    async def go():
        client = VlmClient(settings)
        try:
            return await asyncio.gather(*(client.summarise(r) for r in requests),
                                        return_exceptions=True)
        finally:
            await client.aclose()
    return asyncio.run(go())


def _metric(name: str, **labels) -> float:
    from prometheus_client import REGISTRY

    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_table_and_image_requests_carry_html_and_base64(server):
    from adapters.vlm import VlmRequest

    png = _png()
    ok_before = _metric("ragstream_vlm_calls_total", outcome="ok", kind="table")
    prompt_before = _metric("ragstream_vlm_tokens_total", direction="prompt")
    table, image = _summarise(_settings(server.url),
                              VlmRequest("table", text="Site Flow", table_html=TABLE, where="a.pdf, page 2"),
                              VlmRequest("image", images=[(png, "image/png")], where="a.pdf, page 2"))
    assert table.text == table_summary(TABLE) and table.model == "stand-in"
    assert image.text == image_summary(png)
    by_kind = {("image" if r.images else "table"): r for r in server.requests}
    assert TABLE in by_kind["table"].texts[0]
    assert by_kind["image"].images == [png]  # sent as a data:image/png;base64 URL
    url = by_kind["image"].body["messages"][1]["content"][1]["image_url"]["url"]
    assert url.startswith("data:image/png;base64,")
    assert by_kind["table"].body["model"] == "stand-in"
    # metrics: one ok call per kind, tokens from usage
    assert _metric("ragstream_vlm_calls_total", outcome="ok", kind="table") == ok_before + 1
    assert _metric("ragstream_vlm_tokens_total", direction="prompt") == \
        prompt_before + table.prompt_tokens + image.prompt_tokens > prompt_before
    assert _metric("ragstream_vlm_call_seconds_count", kind="image") >= 1


def test_concurrency_limit_holds(server):
    from adapters.vlm import VlmRequest

    server.delay_s = 0.3
    started = time.monotonic()
    answers = _summarise(_settings(server.url, vlm_max_concurrency=2),
                         *[VlmRequest("table", table_html=TABLE) for _ in range(6)])
    assert all(not isinstance(a, BaseException) for a in answers), answers
    assert server.max_in_flight == 2
    assert time.monotonic() - started >= 0.9  # 6 calls, 2 at a time, 0.3 s each


def test_server_down_raises_vlm_unavailable_after_retries(server):
    from adapters.vlm import VlmRequest, VlmUnavailable

    url = server.url
    server.stop()
    errors_before = _metric("ragstream_vlm_calls_total", outcome="error", kind="table")
    (err,) = _summarise(_settings(url, vlm_max_retries=2), VlmRequest("table", table_html=TABLE))
    assert isinstance(err, VlmUnavailable) and err.attempts == 3
    assert "ConnectError" in err.reason
    assert _metric("ragstream_vlm_calls_total", outcome="error", kind="table") == errors_before + 1


def test_5xx_is_retried_and_4xx_is_not(server):
    from adapters.vlm import VlmRequest, VlmUnavailable

    server.fail_status = 503
    (err,) = _summarise(_settings(server.url, vlm_max_retries=1), VlmRequest("table", table_html=TABLE))
    assert isinstance(err, VlmUnavailable) and err.attempts == 2 and len(server.requests) == 2
    server.fail_status = 400
    (err,) = _summarise(_settings(server.url, vlm_max_retries=3), VlmRequest("table", table_html=TABLE))
    assert isinstance(err, VlmUnavailable) and err.attempts == 1 and len(server.requests) == 3
    assert err.reason.startswith("HTTP 400")


def test_summary_is_cut_to_the_embedder_limit():
    from stages.enhance import with_summary
    from stages.tokens import count_word_pieces

    summary = "A table of pump stations and their daily flows in megalitres. " * 3
    short = "Table. Columns: Site | Flow\nSite: North Basin; Flow: 120"
    assert with_summary(summary, short, 256, count_word_pieces) == " ".join(summary.split()) + "\n\n" + short
    long_body = "flow " * 240
    cut = with_summary(summary, long_body, 256, count_word_pieces)
    assert cut.endswith(long_body) and cut != long_body
    assert count_word_pieces(cut) <= 256
    assert with_summary(summary, "x " * 300, 256, count_word_pieces) == "x " * 300


def test_image_chunks_from_stored_images():
    from stages.image_chunks import image_chunks

    elements = [{"type": "NarrativeText", "text": "Hello", "metadata": {"page_number": 1}},
                {"type": "Image", "text": "", "metadata": {"page_number": 2, "image_key": "s3://b/k.png"}},
                {"type": "Image", "text": "", "metadata": {"page_number": 3}}]  # no stored crop
    assert image_chunks(elements) == [{"text": "Image on page 2", "page_number": 2,
                                       "element_types": ["Image"], "table_html": None,
                                       "image_keys": ["s3://b/k.png"]}]


def test_old_chunk_records_still_decode():
    import orjson

    from schemas import Chunk, decode_event

    old = {"chunk_id": "d:1:0", "document_id": "d", "version": 1, "index": 0, "total": 1,
           "project": "p", "category": "default", "filename": "f.pdf", "text": "t",
           "page_number": 1, "element_types": ["Table"], "table_html": TABLE, "embed_text": "t"}
    chunk = decode_event(Chunk, orjson.dumps(old))
    assert chunk.summary is None and chunk.image_keys == [] and chunk.enrichment is None
    new = chunk.derive(summary="s", image_keys=["s3://b/k"], enrichment={"vlm": "ok"})
    assert decode_event(Chunk, new.dumps()).enrichment == {"vlm": "ok"}
