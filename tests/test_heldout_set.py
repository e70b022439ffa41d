"""The held-out retrieval set (bench/heldout/) is consistent: the manifest pins every
document, the split is by document and covers every kind in both halves, and each
question set asks only about its own half's documents (so tuning on ``dev`` never
reads a ``test`` document).  The documents themselves are fetched from PyPI by
bench/heldout/fetch.py, outside the tests."""
import json
import re
from collections import Counter

from search.evaluation import load_questions
from tests.conftest import ROOT

HELDOUT = ROOT / "bench" / "heldout"
KINDS = {"prose", "table", "sheet", "slide", "heading", "email", "scan", "cjk", "form", "list", "code"}


def _manifest() -> list[dict]:
    return json.loads((HELDOUT / "manifest.json").read_text())


def test_the_manifest_pins_every_document_and_splits_by_document():
    docs = _manifest()
    assert len(docs) >= 40
    assert len({d["file"] for d in docs}) == len(docs) == len({d["id"] for d in docs})
    for d in docs:
        assert re.fullmatch(r"[0-9a-f]{64}", d["sha256"]) and re.fullmatch(r"[0-9a-f]{64}", d["sdist_sha256"])
        assert d["split"] in ("dev", "test") and d["version"] and d["member"]
        assert "/" not in d["file"] and not d["file"].startswith(".")
    kinds = Counter((d["kind"], d["split"]) for d in docs)
    assert all(kinds[(k, "dev")] and kinds[(k, "test")] for k, _ in kinds), kinds


def test_each_question_set_asks_about_its_own_half_only():
    by_split: dict[str, set[str]] = {}
    for d in _manifest():
        by_split.setdefault(d["split"], set()).add(d["file"])
    total = 0
    for split, files in by_split.items():
        questions = load_questions(HELDOUT / f"{split}.jsonl")
        total += len(questions)
        assert {q.file for q in questions} <= files, split
        assert {q.kind for q in questions} <= KINDS, split
        assert all(10 <= len(q.evidence) <= 80 for q in questions), split
        assert len({q.question for q in questions}) == len(questions), f"{split}: repeated question"
    assert total >= 250
