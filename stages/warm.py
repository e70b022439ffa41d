"""Warm-up of a parse process: load what the first document of each kind would load.

A fresh pool process pays for its parsers on first use: the first plain-text or PDF
document imports unstructured's partitioners, spaCy and torch (its sentence
classifier) and pdfminer — 3.4 s for a 169-byte TXT file, 5.5 s for a one-page PDF
(measured 2026-12-02 on the 2-core dev machine, ``stages.partition.partition_file`` in
a new process; warm, the same calls took 0.01 s and 0.03 s).  In a pipeline run
those seconds land on documents: the shared corpus's TXT file spent 10.0 s in
partition (``ragstream bench peer``, per-stage profile).

:func:`warm_parsers` partitions four tiny documents (TXT, PDF with a table and an
image, HTML, DOCX; made here, nothing read from disk) and imports the sheet and slide
partitioners: about 5.7 s of one core in a spawned process, 3.6 s in the fork server
of the partition pool, which runs it once (stages/preload_parsers.py) so that every
parse process forked from it starts warm.
"""
from __future__ import annotations

import importlib
import tempfile
import time
from pathlib import Path

#: imported, not run: their first documents are cheap once these are loaded
EXTRA_MODULES = ("unstructured.partition.xlsx", "unstructured.partition.pptx",
                 "unstructured.partition.md", "unstructured.partition.image")


def warm_parsers() -> float:
    """Partition one tiny TXT, PDF, HTML and DOCX document with the default profile and
    import :data:`EXTRA_MODULES`; returns the seconds it took.

    Raises whatever a parser raises (the pool logs it and carries on).
    """
    from stages.partition import partition_file
    from stages.profiles import get_profile
    from stages.samples import write_docx, write_html, write_pdf

    start = time.perf_counter()
    profile = get_profile("default")
    with tempfile.TemporaryDirectory(prefix="ragstream-warm-") as tmp:
        folder = Path(tmp)
        text = folder / "warm.txt"
        text.write_text("Warm-up\n\nA short paragraph of plain text, so the sentence model loads.\n")
        for path, filetype in ((text, "txt"), (write_pdf(folder / "warm.pdf"), "pdf"),
                               (write_html(folder / "warm.html"), "html"),
                               (write_docx(folder / "warm.docx"), "docx")):
            partition_file(path, filetype, profile, None, path.name)
    for name in EXTRA_MODULES:
        importlib.import_module(name)
    return time.perf_counter() - start
