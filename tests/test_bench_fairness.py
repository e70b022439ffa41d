"""bench/fairness.py's figures (the run itself needs a stack: ``ragstream bench fairness``)."""
from bench.fairness import FairnessRun, SmallDoc, dense_pdf, small_docs


def test_p95_is_the_nearest_rank_and_a_missing_time_counts_as_the_timeout():
    run = FairnessRun("lanes on")
    assert run.p95([float(i) for i in range(1, 21)], 300) == 19.0  # ceil(0.95 * 20) = 19th
    assert run.p95([2.0] * 9 + [None], 300) == 300  # one of ten never completed
    assert run.p95([], 300) == 0.0


def test_embed_wait_needs_both_statuses():
    assert SmallDoc("a", enhancing_s=1.5, embedding_s=4.0).embed_wait_s == 2.5
    assert SmallDoc("a", enhancing_s=1.5).embed_wait_s is None


def test_documents_are_salted(tmp_path):
    """A second run's text differs, so none of its vectors comes from the embedding cache."""
    a, b = small_docs(tmp_path / "a", 2, "salt1"), small_docs(tmp_path / "b", 2, "salt2")
    assert a[0].read_text() != b[0].read_text() and a[0].read_text() != a[1].read_text()
    assert dense_pdf(tmp_path / "x.pdf", 2, "s1").read_bytes() != dense_pdf(tmp_path / "y.pdf", 2, "s2").read_bytes()


def test_the_scan_has_the_pages_asked_for_and_no_text_layer(tmp_path):
    import pypdf

    from bench.fairness import scanned_pdf

    scan = scanned_pdf(dense_pdf(tmp_path / "src.pdf", 2, "s"), tmp_path / "scan.pdf", 3)
    reader = pypdf.PdfReader(scan)
    assert len(reader.pages) == 3
    assert not "".join(p.extract_text() or "" for p in reader.pages).strip()
