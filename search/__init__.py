"""Search over a project's indexed chunks: :func:`search.query.search` (hybrid
retrieval in Milvus — dense vectors and BM25 over the chunk text, fused by reciprocal
rank fusion — restricted to each document's current version, then the cross-encoder
reranker on Triton when configured); :mod:`search.evaluation` (``ragstream eval
retrieval``: recall@1/5/10 and MRR over a question set).

Owns: query-time retrieval and ranking.  Used by ``ragstream search``, the demo and
tests.  May import: ``adapters`` (vector store, embedder, reranker, ledger) and
``streams.settings``; never ``cli``, ``api``, ``devstack`` or ``agents``.
"""
