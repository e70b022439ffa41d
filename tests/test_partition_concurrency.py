"""A partition worker parses ``partition_concurrency`` (default 2) tasks at once: a
small document uploaded while a long OCR parse runs completes before that parse
ends, instead of waiting behind it (agents/partition.py, Faust agent concurrency)."""
from __future__ import annotations

import time

import pypdfium2
import pytest

from tests.conftest import ingest, run

pytestmark = pytest.mark.integration


def _scanned_pdf(source, out, copies: int = 3, dpi: int = 200):
    """An image-only PDF: every page of ``source`` rendered ``copies`` times."""
    doc = pypdfium2.PdfDocument(str(source))
    try:
        pages = [doc[i].render(scale=dpi / 72).to_pil().convert("RGB") for i in range(len(doc))]
    finally:
        doc.close()
    pages = pages * copies
    pages[0].save(out, format="PDF", save_all=True, append_images=pages[1:], resolution=dpi)
    return out


async def _events(bootstrap, document_id):
    from streams.kafka_io import status_history

    return [e for e in await status_history(bootstrap) if e.document_id == document_id]


def test_small_document_passes_a_long_ocr_parse(stack, worker, tmp_path, project):
    from stages.samples import generate_samples

    pdf = generate_samples(tmp_path / "samples")[0]
    scan = _scanned_pdf(pdf, tmp_path / "scan.pdf")
    scan_doc = ingest([scan], project, wait=False).results[0].document_id
    deadline = time.monotonic() + 300
    while "PARTITIONING" not in {e.status for e in run(_events(stack.kafka_bootstrap, scan_doc))}:
        assert time.monotonic() < deadline, "the scan never started partitioning"
        time.sleep(0.5)

    small = tmp_path / "note.txt"
    small.write_text("Valve maintenance note: replace the gasket on pump four. " * 5)
    outcome = ingest([small], project)
    small_doc = outcome.results[0].document_id
    assert outcome.last[small_doc].status == "COMPLETED"

    deadline = time.monotonic() + 600
    while True:
        scan_events = run(_events(stack.kafka_bootstrap, scan_doc))
        if {"COMPLETED", "FAILED"} & {e.status for e in scan_events}:
            break
        assert time.monotonic() < deadline, "the scan never finished"
        time.sleep(1)
    small_done = max(e.at for e in run(_events(stack.kafka_bootstrap, small_doc))
                     if e.status == "COMPLETED")
    scan_chunking = min(e.at for e in scan_events if e.status == "CHUNKING")
    print(f"small COMPLETED {scan_chunking - small_done:.1f} s before the scan left partition")
    assert small_done < scan_chunking, "the small document waited behind the OCR parse"
    assert "COMPLETED" in {e.status for e in scan_events}, [e.status for e in scan_events]
