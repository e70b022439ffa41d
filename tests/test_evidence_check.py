"""search/evidence_check.py without a stack: a question's evidence against chunk texts
(the CLI against a real project: tests/test_eval_retrieval.py)."""
from __future__ import annotations

from search.evaluation import Question
from search.evidence_check import longest_prefix_in, verdict

Q = Question("What does the table say for 2009?", "pdf/census.pdf",
             "Murder and nonnegligent manslaughter . . . 10.0", "table")


def test_longest_prefix():
    assert longest_prefix_in("abcdef", "xxabcdzz") == 4
    assert longest_prefix_in("abc", "zzz") == 0
    assert longest_prefix_in("abc", "abc") == 3
    assert longest_prefix_in("", "abc") == 0


def test_found_counts_every_chunk_holding_the_evidence_after_normalising():
    chunks = ["MURDER and nonnegligent\nmanslaughter . . .   10.0 0.9", "other",
              "murder and nonnegligent manslaughter . . . 10.0"]
    v = verdict(Q, chunks)
    assert (v.status, v.chunks, v.nearest) == ("found", 2, None)


def test_evidence_split_across_chunks_is_missing_and_names_the_nearest_chunk():
    # a table split into row pieces: the label in one chunk, the value in the next
    chunks = ["Offense charged Total . . . Murder and nonnegligent manslaughter . . . Forcible rape",
              "Total Male Female manslaughter . . . 10.0 0.9 9.1", "unrelated text"]
    v = verdict(Q, chunks)
    assert v.status == "missing" and v.chunks == 3
    assert v.nearest == chunks[0]  # holds the longest prefix of the evidence


def test_a_file_without_chunks_is_no_document():
    assert verdict(Q, []).status == "no-document"
