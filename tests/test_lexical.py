"""search/lexical.py and the rows Milvus is given (adapters.vector_store.storable_rows)."""
from __future__ import annotations

import re

from adapters.vector_store import LEXICAL, METADATA, SPARSE, TEXT_MAX, rrf_fuse, storable_rows
from search.lexical import cjk_share, dense_weight, fit_bytes, lexical_form


def tokens(text: str) -> list[str]:
    """What Milvus Lite's "standard" analyzer makes of a text (\\w+, lowercased)."""
    return re.findall(r"\w+", text.lower())


def test_cjk_runs_become_characters_and_bigrams():
    toks = tokens(lexical_form("市场内各类摊位52个"))
    assert "摊位" in toks and "摊" in toks and "52" in toks and "个" in toks
    assert "市场内各类摊位" not in toks  # the run itself is not a token any more
    assert set(tokens(lexical_form("摊位"))) <= set(toks)  # a sub-word query matches
    assert tokens(lexical_form("有効期は60日")) == ["有", "効", "期", "は", "有効", "効期", "期は", "60", "日"]


def test_other_text_is_unchanged_but_nfkc():
    text = "We have 36 full-time employees; SW1A 2AA; 318,285 shares."
    assert lexical_form(text) == text
    assert lexical_form("ＡＢＣ１２３") == "ABC123"


def test_dense_weight_follows_the_query_script():
    assert cjk_share("") == 0.0 and cjk_share("42") == 0.0
    assert dense_weight("联合国M49标准中中国的国家代码是多少？") == 0.0
    assert dense_weight("What does 摊位 mean in the tender?") == 1.0
    assert dense_weight("How many stalls?") == 1.0


def test_fit_bytes_cuts_on_a_character_boundary():
    assert fit_bytes("摊位", 5) == "摊"  # 3 bytes each
    assert fit_bytes("abc", 10) == "abc"


def test_storable_rows_follow_the_collection_fields():
    row = {"chunk_id": "d:1:0", "text": "摊位" + "x" * TEXT_MAX, METADATA: {"a": 1}, SPARSE: {1: 0.5}}
    (new,) = storable_rows([row], {"chunk_id", "text", LEXICAL, METADATA, SPARSE})
    assert SPARSE not in new and new[METADATA] == {"a": 1}
    assert len(new["text"]) == TEXT_MAX // 4 and len(new[LEXICAL].encode()) <= TEXT_MAX
    assert new[LEXICAL].startswith(" 摊 位 摊位 ")
    (old,) = storable_rows([row], {"chunk_id", "text", SPARSE})
    assert LEXICAL not in old and METADATA not in old
    assert SPARSE in row and len(row["text"]) > TEXT_MAX  # the caller's rows are untouched


def test_dense_weight_zero_puts_bm25_order_first():
    dense = [{"chunk_id": "a", "dense_score": 0.9}, {"chunk_id": "b", "dense_score": 0.8}]
    bm25 = [{"chunk_id": "c", "dense_score": 0.1, "bm25_score": 3.0},
            {"chunk_id": "b", "dense_score": 0.8, "bm25_score": 1.0}]
    assert [h["chunk_id"] for h in rrf_fuse(dense, bm25)] == ["b", "c", "a"]
    assert [h["chunk_id"] for h in rrf_fuse(dense, bm25, dense_weight=0.0)] == ["c", "b", "a"]
