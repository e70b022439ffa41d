"""``bench retrieval``'s argument parsing and medians (the ingest rounds need the
stack and a corpus: they are a benchmark, run by hand)."""
import pytest

from bench.retrieval_sets import QuestionSet, last_line, median_figures, parse_set
from search.evaluation import Figures, Outcome, Question, figures


def test_a_set_is_name_folder_and_question_file(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "q.jsonl").write_text("{}\n")
    assert parse_set(f"dev={tmp_path}/docs:{tmp_path}/q.jsonl") == QuestionSet(
        "dev", tmp_path / "docs", tmp_path / "q.jsonl")
    for bad, why in ((f"{tmp_path}/docs:{tmp_path}/q.jsonl", "NAME=DOCS"),
                     (f"Dev={tmp_path}/docs:{tmp_path}/q.jsonl", "lower-case"),
                     (f"dev={tmp_path}/nope:{tmp_path}/q.jsonl", "not a folder"),
                     (f"dev={tmp_path}/docs:{tmp_path}/none.jsonl", "not a file"),
                     ("dev=", "NAME=DOCS")):
        with pytest.raises(ValueError, match=why):
            parse_set(bad)


def test_medians_are_per_figure_and_per_kind():
    text, table = Question("a", "a.txt", "x", "text"), Question("b", "b.csv", "y", "table")
    rounds = [figures([Outcome(text, r1, 1.0), Outcome(table, r2, 1.0)])
              for r1, r2 in ((1, None), (3, 1), (None, 2))]
    med = median_figures(rounds)
    assert med.recall[1] == 0.5 and med.recall[5] == 0.5 and med.n == 2
    assert med.by_kind["text"].recall[5] == 1.0 and med.by_kind["table"].recall[1] == 0.0
    assert med.by_kind["table"].mrr == 0.5
    line = last_line({"dev": med, "test": Figures({1: 1.0, 5: 1.0, 10: 1.0}, 1.0, 1.0, 3)})
    assert line.split()[0] == "dev_recall@1=0.5000" and line.split()[-1] == "test_ndcg@10=1.0000"
