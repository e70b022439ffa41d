"""Search over a project's indexed chunks: :func:`search.query.search` (dense
retrieval from Milvus restricted to each document's current version, a lexical
ranking, then the cross-encoder reranker on Triton or reciprocal rank fusion).

Owns: query-time retrieval and ranking.  Used by ``ragstream search``, the demo and
tests.  May import: ``adapters`` (vector store, embedder, reranker, ledger) and
``streams.settings``; never ``cli``, ``api``, ``devstack`` or ``agents``.
"""
