"""Search's late-interaction second stage (search/late_interaction.py) with the real
all-MiniLM-L6-v2 export: the graph's token output, MaxSim, the reorder, and what
happens with a model exported before that output existed."""
from __future__ import annotations

import asyncio

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from adapters.embedder import DEFAULT_ONNX_PATH, export_onnx, load_tokenizer
from devstack.triton import has_token_output
from adapters.vector_store import EMBED_TEXT, TEXT_MAX, storable_rows
from search.late_interaction import (TOKEN_OUTPUT, EmbedderCannotRead, NoEmbedText, TokenEncoder,
                                     TokenOutputMissing, maxsim,
                                     reorder)
from streams.settings import Settings

QUERY = "What is the boiling point of ethanol?"

def hit(chunk_id: str, text: str) -> dict:
    """A search hit as a collection with ``embed_text`` returns it (header + text)."""
    return {"chunk_id": chunk_id, "text": text, "embed_text": f"chemistry notes (PDF document)\n\n{text}"}


#: fused first: on the topic, without the answer
NEAR = hit("near", "Ethanol is a widely used solvent in laboratories and in industry. "
           "It is produced by the fermentation of sugars by yeasts and is found in beverages.")
#: fused second: the answer is one sentence among unrelated ones (mean pooling dilutes it)
ANSWER = hit("answer", "Sodium chloride dissolves readily in water. Copper conducts "
             "electricity well and is used in wiring. The boiling point of ethanol is 78.37 degrees "
             "Celsius. Iron rusts when exposed to moisture and oxygen over time. Helium is lighter than air.")


@pytest.fixture(scope="module")
def model_path():
    if not DEFAULT_ONNX_PATH.is_file() or not has_token_output(DEFAULT_ONNX_PATH):
        export_onnx(DEFAULT_ONNX_PATH)
    return DEFAULT_ONNX_PATH


@pytest.fixture(scope="module")
def old_model(tmp_path_factory):
    """A graph with the embedder's inputs and only an ``embedding`` output, as exports
    before the token output were (a mean over a constant, enough to load)."""
    ids = helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"])
    mask = helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"])
    out = helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["batch", 384])
    node = helper.make_node("Cast", ["attention_mask"], ["embedding"], to=TensorProto.FLOAT)
    graph = helper.make_graph([node], "old", [ids, mask], [out])
    path = tmp_path_factory.mktemp("old") / "model.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_maxsim_is_the_mean_of_each_query_rows_best_match():
    q = np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32)
    c = np.array([[1.0, 0.0], [0.6, 0.8]], dtype=np.float32)
    assert maxsim(q, c) == pytest.approx((1.0 + 0.8) / 2)
    assert maxsim(q, np.zeros((0, 2), np.float32)) == 0.0


def test_token_output_is_the_state_the_embedding_pools(model_path):
    import onnxruntime as ort

    assert has_token_output(model_path)
    enc = load_tokenizer(256).encode_batch(["Kafka topics absorb backpressure.",
                                            "Milvus keeps one collection per project behind an alias."])
    ids = np.array([e.ids for e in enc], dtype=np.int64)
    mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
    session = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    emb, states = session.run(["embedding", TOKEN_OUTPUT], {"input_ids": ids, "attention_mask": mask})
    assert states.shape == (2, ids.shape[1], 384)
    pooled = (states * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
    pooled /= np.linalg.norm(pooled, axis=1, keepdims=True)
    assert (pooled * emb).sum(1).min() > 0.99999


def test_encoder_drops_cls_and_sep_and_normalises_rows(model_path):
    vectors = TokenEncoder(model_path).encode([QUERY, ""])
    pieces = load_tokenizer(256, pad=False).encode(QUERY).ids
    assert vectors[0].shape == (len(pieces) - 2, 384)
    assert np.allclose(np.linalg.norm(vectors[0], axis=1), 1.0, atol=1e-5)
    assert vectors[1].shape == (0, 384)


def test_reorder_lifts_the_chunk_whose_one_sentence_answers(model_path):
    tail = hit("tail", "Unrelated text beyond the depth.")
    out = reorder(QUERY, [NEAR, ANSWER, tail], TokenEncoder(model_path), depth=2)
    assert [h["chunk_id"] for h in out] == ["answer", "near", "tail"]
    assert out[0]["late_score"] > out[1]["late_score"] and "late_score" not in out[2]


def test_an_old_export_is_named_and_search_keeps_the_fused_order(old_model):
    from search.query import _late_interaction

    assert not has_token_output(old_model)
    with pytest.raises(TokenOutputMissing, match="export_embedder.py"):
        TokenEncoder(old_model).encode([QUERY])
    settings = Settings(embedder_onnx_path=str(old_model), second_stage="late-interaction")
    hits, reason = asyncio.run(_late_interaction(QUERY, [NEAR, ANSWER], settings))
    assert [h["chunk_id"] for h in hits] == ["near", "answer"]
    assert "has no 'token_embeddings' output" in reason


def test_a_collection_without_embed_text_gets_no_second_stage(model_path):
    from search.query import _late_interaction

    bare = [{k: v for k, v in h.items() if k != "embed_text"} for h in (NEAR, ANSWER)]
    with pytest.raises(NoEmbedText):
        reorder(QUERY, bare, TokenEncoder(model_path))
    settings = Settings(embedder_onnx_path=str(model_path), second_stage="late-interaction")
    hits, reason = asyncio.run(_late_interaction(QUERY, bare, settings))
    assert hits == bare and "no embed_text field" in reason


def test_rows_carry_the_embed_text_where_the_collection_has_the_field():
    row = {"chunk_id": "c", "text": "t" * 10, EMBED_TEXT: "header\n\n" + "t" * 10, "metadata": None}
    (new,) = storable_rows([row], {"chunk_id", "text", EMBED_TEXT, "metadata"})
    assert new[EMBED_TEXT] == row[EMBED_TEXT]
    (old,) = storable_rows([row], {"chunk_id", "text"})
    assert EMBED_TEXT not in old
    (plain,) = storable_rows([{"chunk_id": "c", "text": "é" * TEXT_MAX}], {"chunk_id", "text", EMBED_TEXT})
    assert len(plain[EMBED_TEXT].encode()) <= TEXT_MAX


def test_a_cjk_query_keeps_the_order_bm25_leads(model_path):
    with pytest.raises(EmbedderCannotRead):
        reorder("东阳市歌山镇农贸市场的招标编号是多少？", [NEAR, ANSWER], TokenEncoder(model_path))
