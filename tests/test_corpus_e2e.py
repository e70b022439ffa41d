"""Every file of ../shared/corpus through the whole pipeline (skipped without it).

Each file must end COMPLETED (with > 0 chunks) or FAILED with a specific reason;
none may stay in a non-terminal state.  The table of outcomes is written to
test-output/corpus-e2e.txt.
"""
from __future__ import annotations

import pytest

from tests.conftest import CORPUS, ingest

pytestmark = [pytest.mark.integration, pytest.mark.slow,
              pytest.mark.skipif(not CORPUS.is_dir(), reason="../shared/corpus not present")]


def test_every_corpus_file_reaches_a_terminal_state(stack, worker, project, output_dir):
    files = sorted(p for p in CORPUS.rglob("*") if p.is_file() and p.suffix != ".csv")
    outcome = ingest(files, project, timeout_s=840)  # under the 900 s test timeout (pytest-timeout thread method ends the whole session)
    assert not outcome.timed_out
    lines = []
    for r in outcome.results:
        ev = outcome.last.get(r.document_id)
        assert ev is not None, f"{r.path.name}: no terminal state"
        lines.append(f"{r.path.relative_to(CORPUS)}\t{ev.status}\t{ev.chunks_total}\t{ev.error or ''}")
        assert ev.status in ("COMPLETED", "FAILED"), (r.path.name, ev.status)
        if ev.status == "COMPLETED":
            assert ev.chunks_total > 0 and ev.chunks_done == ev.chunks_total, r.path.name
        else:
            assert ev.error and len(ev.error) > 10 and ev.error.lower() != "failed", (r.path.name, ev.error)
    (output_dir / "corpus-e2e.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
