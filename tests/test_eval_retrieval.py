"""``ragstream eval retrieval``: recall@k and MRR of search over a question set.

The integration test ingests three tiny generated text documents (a handful of
chunks in all, so every chunk of the project is among the top 10 and recall@10 is
known exactly) into the test stack and runs the real CLI as a subprocess.  The
question set holds one question that cannot be found (its evidence is from another
file), one whose evidence is written in decomposed Unicode (NFD) and another with
different case and line breaks, so matching must normalise.
"""
from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

from tests.conftest import ingest

ROOT = Path(__file__).resolve().parents[1]

DOCS = {
    "glacier-notes.txt": (
        "Field notes from the Breidamerkur outlet. The glacier terminus retreats about "
        "42 metres every year, and the proglacial lagoon has doubled in area since 1998. "
        "Survey team: Helga Arnadottir and Tom Reyes."),
    "bakery-recipes.txt": (
        "Brioche Nord recipe card. Our morning loaves use stone-ground spelt flour from the "
        "Vallee mill, proofed for nine hours at 6 degrees before baking at 230 C."),
    "subway-ko.txt": (
        "서울 지하철 2호선은 시청역에서 출발하는 순환선이며 하루 평균 이용객은 약 이백만 명이다. "
        "열차는 출퇴근 시간에 2분 간격으로 운행한다."),
}
QUESTIONS = [
    {"question": "How many metres per year does the Breidamerkur glacier retreat?",
     "file": "docs/glacier-notes.txt", "evidence": "RETREATS about\n42   metres", "kind": "text"},
    {"question": "Which flour goes into the Brioche Nord morning loaves?",
     "file": "bakery-recipes.txt", "evidence": "stone-ground spelt flour", "kind": "text"},
    {"question": "서울 지하철 2호선 하루 이용객은 몇 명인가요?",
     "file": "subway-ko.txt", "evidence": unicodedata.normalize("NFD", "하루 평균 이용객은 약 이백만 명"),
     "kind": "korean"},
    # evidence from the glacier notes, attributed to the bakery card: never found
    {"question": "Who was on the glacier survey team?",
     "file": "bakery-recipes.txt", "evidence": "Helga Arnadottir", "kind": "text"},
]


def eval_cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """``python -m cli.main eval retrieval ...`` in the repository root."""
    return subprocess.run([sys.executable, "-m", "cli.main", "eval", "retrieval", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


def write_jsonl(path: Path, rows: list) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def test_matching_normalises_and_needs_the_file():
    from search.evaluation import Question, figures, first_file_rank, normalize_text, rank_of, Outcome

    assert normalize_text("  A\u00a0 B\n\tC ") == "a b c"
    assert normalize_text(unicodedata.normalize("NFD", "이용객")) == "이용객"
    q = Question("q", "sub/a.txt", "Hello  World", "text")
    hits = [{"filename": "b.txt", "text": "hello world"}, {"filename": "a.txt", "text": "x"},
            {"filename": "a.txt", "text": "say HELLO\nworld!"}]
    assert rank_of(q, hits) == 3
    assert rank_of(q, hits[:2]) is None
    assert first_file_rank(q, hits) == 2 and first_file_rank(q, hits[:1]) is None
    table = Question("q2", "t.csv", "x", "table")
    f = figures([Outcome(q, 1, 1.0), Outcome(q, 3, 1.0), Outcome(q, 7, 1.0), Outcome(q, None, 1.0),
                 Outcome(table, 2, 1.0)])
    # ndcg@10: (1 + 1/log2(4) + 1/log2(8) + 0 + 1/log2(3)) / 5
    assert f.last_line() == "recall@1=0.2000 recall@5=0.6000 recall@10=0.8000 mrr=0.3952 ndcg@10=0.4929"
    assert list(f.by_kind) == ["table", "text"] and f.by_kind["table"].ndcg10 == 1 / math.log2(3)
    assert f.by_kind["text"].last_line() == (
        "recall@1=0.2500 recall@5=0.5000 recall@10=0.7500 mrr=0.3690 ndcg@10=0.4583")


def test_bad_jsonl_line_is_named(tmp_path):
    good = json.dumps(QUESTIONS[0])
    bad = write_jsonl(tmp_path / "q.jsonl", [])
    bad.write_text(f"{good}\n\n{{\"question\": \"no file\"\n{good}\n")
    r = eval_cli(str(bad), "-p", "whatever")
    assert r.returncode == 2, r
    assert "q.jsonl:3:" in r.stderr and "not JSON" in r.stderr, r.stderr
    missing = write_jsonl(tmp_path / "m.jsonl", [QUESTIONS[0], {"question": "x", "file": "a.txt", "kind": "t"}])
    r = eval_cli(str(missing), "-p", "whatever")
    assert r.returncode == 2 and "m.jsonl:2:" in r.stderr and "'evidence'" in r.stderr, r.stderr


@pytest.mark.integration
def test_eval_retrieval_figures(stack, worker, project, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text + "\n", encoding="utf-8")
    outcome = ingest(sorted(docs.iterdir()), project)
    assert {e.status for e in outcome.last.values()} == {"COMPLETED"}, outcome.last
    assert sum(e.chunks_total for e in outcome.last.values()) <= 10  # all chunks fit in the top 10
    questions = write_jsonl(tmp_path / "q.jsonl", QUESTIONS)

    r = eval_cli(str(questions), "-p", project, "-k", "10")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    last = dict(part.split("=") for part in lines[-1].split())
    assert list(last) == ["recall@1", "recall@5", "recall@10", "mrr", "ndcg@10"], lines[-1]
    assert all(len(v.split(".")[1]) == 4 for v in last.values()), lines[-1]
    assert last["recall@10"] == "0.7500" and last["recall@5"] == "0.7500", r.stdout
    assert float(last["recall@1"]) <= 0.75 and 0.25 <= float(last["mrr"]) <= 0.75
    # its evidence is not in its file: no rank even 100 deep; the file itself may rank
    assert any(re.fullmatch(r"miss: Who was on the glacier survey team\? \| file=bakery-recipes.txt \| "
                            r"best rank=- \| document rank=(\d+|-) \| evidence rank in top 100=-", line)
               for line in lines), lines
    kinds = {line.split(":")[0]: dict(p.split("=") for p in line.split(": ", 1)[1].split())
             for line in lines if line.startswith("kind ")}
    assert kinds["kind korean"]["n"] == "1" and kinds["kind korean"]["recall@5"] == "1.0000"
    assert kinds["kind text"]["n"] == "3" and kinds["kind text"]["recall@5"] == "0.6667"

    r = eval_cli(str(questions), "-p", project, "--json")
    assert r.returncode == 0, r.stderr
    records = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    ranks = [rec["rank"] for rec in records]
    assert [rec["question"] for rec in records] == [q["question"] for q in QUESTIONS]
    assert ranks[3] is None and all(isinstance(x, int) and 1 <= x <= 10 for x in ranks[:3]), ranks
    mrr = sum(1 / x for x in ranks if x) / len(ranks)
    recall1 = sum(x == 1 for x in ranks) / len(ranks)
    ndcg = sum(1 / math.log2(1 + x) for x in ranks if x) / len(ranks)
    assert r.stdout.strip().splitlines()[-1] == (
        f"recall@1={recall1:.4f} recall@5=0.7500 recall@10=0.7500 mrr={mrr:.4f} ndcg@10={ndcg:.4f}")
    assert records[3]["deep_rank"] is None
    assert all(rec["deep_rank"] is None for rec in records[:3])  # found: no deep search

    r = eval_cli(str(questions), "-p", "nosuchproject" + project)
    assert r.returncode == 2 and "unknown project" in r.stderr, r

    # the same set checked for answerability (no search): the misattributed evidence is in
    # no chunk of its file; a file never ingested has no chunks at all
    unknown = {"question": "Where is the ferry timetable?", "file": "ferry.txt", "evidence": "pier 4",
               "kind": "text"}
    checked = write_jsonl(tmp_path / "check.jsonl", QUESTIONS + [unknown])
    r = evidence_cli(str(checked), "-p", project)
    assert r.returncode == 1, r
    lines = r.stdout.strip().splitlines()
    assert lines[-1] == "found=3 missing=1 no_document=1 of 5", r.stdout
    assert any(line.startswith(f"missing: bakery-recipes.txt:4 | Helga Arnadottir | nearest chunk: Brioche Nord")
               for line in lines), lines
    assert any(line.startswith("no document: ferry.txt:5") for line in lines), lines
    r = evidence_cli(str(questions), "-p", project, "--json")
    assert r.returncode == 1 and [json.loads(x)["line"] for x in r.stdout.splitlines()[:-1]] == [4], r.stdout
    r = evidence_cli(str(write_jsonl(tmp_path / "ok.jsonl", QUESTIONS[:3])), "-p", project)
    assert r.returncode == 0 and r.stdout.strip().splitlines()[-1] == "found=3 missing=0 no_document=0 of 3", r


def evidence_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """``python -m cli.main eval evidence ...`` in the repository root."""
    return subprocess.run([sys.executable, "-m", "cli.main", "eval", "evidence", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)
