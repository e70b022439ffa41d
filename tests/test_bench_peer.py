"""``ragstream bench peer`` / the per-stage profile: the parsing and arithmetic parts,
without the network, the peer's venv or a stack (bench/peer.py, bench/profile.py)."""
from __future__ import annotations

import pytest

from bench.e2e import Run
from bench.peer import comparison_lines, parse_peer_output, print_report, stage_corpus
from bench.profile import DocTimeline, busy_delta, print_profile, stage_intervals, strategy_label, summarize

# the tail of a real run of ../shared/peers/unstructured_ingest.sh (2 cores, np 2), trimmed
RECORDED = """\
[peer] venv /tmp/peer-ui/venv already provisioned (3f0c2a9e1b7d4c55)
  pdf/fake-memo.pdf.json                                  chunks=  1 pages=[1]
  fake-text.txt.json                                      chunks=  0 pages=[]
peer_exit_code=0
peer_num_processes=2
peer_files=25
peer_files_empty=5
peer_failed_documents=0
peer_embedded_chunks=51
peer_step_init_s=6.5
peer_step_index_s=0.31
peer_step_partition_s=8.1
peer_step_chunk_s=0.42
peer_step_embed_s=2.9
peer_peak_rss_mb=None
peer_wall_s=19.20
peer_pages=34
peer_chunks=51
peer_pages_per_s=1.771
peer_chunks_per_s=2.656
"""


def test_parse_peer_output_reads_figures_and_steps():
    figs = parse_peer_output(RECORDED)
    assert figs.wall_s == pytest.approx(19.2)
    assert figs.startup_s == pytest.approx(6.5)
    assert figs.steps == {"init": 6.5, "index": 0.31, "partition": 8.1, "chunk": 0.42, "embed": 2.9}
    assert figs.number("peak_rss_mb", -1.0) == -1.0  # "None" is not a number
    cold, warm = figs.side(exclude_startup=False), figs.side(exclude_startup=True)
    assert (cold.documents, cold.pages, cold.chunks, cold.empty, cold.failed) == (25, 34, 51, 5, 0)
    assert cold.seconds == pytest.approx(19.2) and warm.seconds == pytest.approx(12.7)
    assert cold.pages_per_s == pytest.approx(34 / 19.2)


def test_parse_peer_output_without_figures_is_an_error():
    with pytest.raises(ValueError, match="peer_wall_s"):
        parse_peer_output("[peer] unstructured-ingest exited 124 (124 = timeout)\npeer_pages=3\n")


def test_comparison_last_line_is_ours_over_peer_without_startup(capsys):
    from rich.console import Console

    ours = Run("ragstream", documents=24, pages=33, chunks=76, seconds=10.0)
    figs = parse_peer_output(RECORDED)
    lines = comparison_lines(ours, figs)
    assert lines[-1] == f"vs_unstructured_ingest={3.3 / (34 / 12.7):.3f}"
    assert f"vs_unstructured_ingest_incl_startup={3.3 / (34 / 19.2):.3f}" in lines
    print_report(ours, figs, Console(width=160))
    out = capsys.readouterr().out.strip().splitlines()
    assert out[-1] == lines[-1]
    assert any("start-up excluded" in line for line in out)


def test_stage_corpus_copies_relative_paths(tmp_path):
    src = tmp_path / "src"
    (src / "pdf").mkdir(parents=True)
    (src / "a.txt").write_text("a")
    (src / "pdf" / "b.pdf").write_bytes(b"%PDF")
    dest = stage_corpus([src / "a.txt", src / "pdf" / "b.pdf"], src, tmp_path / "dest")
    assert sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file()) == ["a.txt", "pdf/b.pdf"]


def _doc(filename: str, filetype: str, strategy: str, t0: float = 1000.0) -> DocTimeline:
    """A document whose every hand-over happened at t0 + a known offset (seconds)."""
    d = DocTimeline("d-" + filename, filename=filename, filetype=filetype, strategy=strategy)
    d.see("uploads", t0)
    d.status_at.update({"NORMALIZING": t0 + 0.5, "PARTITIONING": t0 + 2.25, "CHUNKING": t0 + 6.0,
                        "ENHANCING": t0 + 6.75, "EMBEDDING": t0 + 7.5, "INDEXING": t0 + 9.0,
                        "COMPLETED": t0 + 9.5})
    d.see("partition-tasks", t0 + 2.0)
    d.see("elements", t0 + 5.0)
    for t in (6.5, 6.625):
        d.see("chunks", t0 + t)
    d.see("enhanced-chunks", t0 + 7.0)
    d.see("embeddings", t0 + 8.0)
    d.see("embeddings", t0 + 8.5)
    return d


def test_stage_intervals_split_work_and_waits():
    work, wait = stage_intervals(_doc("memo.pdf", "pdf", "fast"))
    assert work == {"normalize": 1.5, "partition[fast]": 2.75, "chunk": 0.625, "enhance": 0.25,
                    "embed": 1.0, "index": 0.5}
    assert wait == {"uploads": 0.5, "partition-tasks": 0.25, "elements": 1.0, "chunks": 0.25,
                    "enhanced-chunks": 0.5, "embeddings": 1.0}


def test_office_conversion_counts_as_convert_and_failed_stages_are_left_out():
    d = _doc("deck.pptx", "pdf", "fast")
    del d.status_at["COMPLETED"]
    work, _ = stage_intervals(d)
    assert "convert" in work and "normalize" not in work and "index" not in work
    assert "normalize" in stage_intervals(_doc("notes.docx", "docx", "native:docx"))[0]


def test_strategy_label():
    els = [{"metadata": {"partition_strategy": "ocr_only"}}, {"metadata": {"partition_strategy": "fast"}},
           {"metadata": {}}, {"text": "x"}]
    assert strategy_label(els, "pdf") == "fast+ocr_only"
    assert strategy_label([{"metadata": {}}], "xlsx") == "native:xlsx"


def test_summarize_and_print(capsys):
    from rich.console import Console

    docs = [_doc("a.pdf", "pdf", "fast"), _doc("b.pdf", "pdf", "fast", 2000.0), _doc("c.docx", "pdf", "hi_res")]
    busy = busy_delta({"normalize": (1.0, 2.0), "partition": (0.0, 0.0)},
                      {"normalize": (5.5, 5.0), "partition": (9.0, 3.0)})
    assert busy == {"normalize": (4.5, 3), "partition": (9.0, 3)}
    prof = summarize(docs, busy, wall_s=12.0)
    assert prof.documents == 3
    assert prof.work["partition[fast]"] == pytest.approx(5.5) and prof.docs["partition[fast]"] == 2
    assert prof.work["convert"] == pytest.approx(1.5) and prof.work["normalize"] == pytest.approx(3.0)
    assert prof.wait["elements"] == pytest.approx(3.0)
    print_profile(prof, Console(width=160))
    out = capsys.readouterr().out
    assert "profile_partition_fast_s=5.50" in out and "profile_partition_hi_res_s=2.75" in out
    assert out.strip().splitlines()[-1] == f"profile_wait_s={3 * 3.5:.2f}"


@pytest.mark.integration
@pytest.mark.slow
def test_profile_of_a_real_run(worker, stack, project, tmp_path):
    """The profile read back from a real pipeline run (session stack and worker; no
    peer, no network): every document has work seconds in each stage and a
    partition strategy label, and the waits are measured on every stage topic."""
    import time

    from bench.profile import collect_profile
    from tests.conftest import ingest

    (tmp_path / "notes.txt").write_text("Pump energy use\n\n" + "The pump runs at night. " * 40)
    (tmp_path / "page.html").write_text("<html><body><h1>Valves</h1><p>" + "Open slowly. " * 30
                                        + "</p></body></html>")
    t0 = time.perf_counter()
    outcome = ingest([tmp_path / "notes.txt", tmp_path / "page.html"], project)
    assert outcome.count("COMPLETED") == 2
    prof = collect_profile(stack, project, time.perf_counter() - t0)
    assert prof.documents == 2
    assert {"normalize", "chunk", "enhance", "embed", "index"} <= set(prof.work)
    assert sorted(k for k in prof.work if k.startswith("partition[")) == \
        ["partition[native:html]", "partition[native:txt]"]
    assert all(prof.docs[k] == 2 for k in ("normalize", "chunk", "embed", "index"))
    assert set(prof.wait) == {"uploads", "partition-tasks", "elements", "chunks", "enhanced-chunks",
                              "embeddings"}
    assert all(v >= 0 for v in [*prof.work.values(), *prof.wait.values()])
    assert sum(prof.work.values()) <= 2 * prof.wall_s


def test_profile_table_shows_strategy_labels(capsys):
    """Labels like ``partition[fast]`` are not swallowed as rich markup."""
    from rich.console import Console

    print_profile(summarize([_doc("a.pdf", "pdf", "fast")], {}, wall_s=10.0), Console(width=160))
    assert "partition[fast]" in capsys.readouterr().out


def test_bench_peer_wants_at_least_one_run(tmp_path):
    from rich.console import Console

    from bench.peer import bench_peer

    with pytest.raises(ValueError, match="runs must be at least 1"):
        bench_peer(tmp_path, Console(quiet=True), runs=0)


def test_embedded_chars_count_up_to_the_word_piece_limit():
    """A text under the limit counts whole; a cut one up to the end of its last kept
    word piece: 256 pieces are [CLS] + 254 words + [SEP] here, one piece per word."""
    from bench.embedded_chars import embedded_chars

    long = "word " * 600
    c = embedded_chars(["short text", long, ""])
    assert (c.chunks, c.cut, c.total) == (3, 1, 10 + len(long))
    assert c.embedded == 10 + len("word " * 254) - 1
    assert c.per_s(2.0) == c.embedded / 2 and c.per_s(0.0) == 0.0
    assert embedded_chars([long], max_tokens=12).embedded == len("word " * 10) - 1


def test_peer_chars_read_only_the_peer_output_folder(tmp_path):
    """The peer's chunks come from ``np<N>/out`` (one JSON list per input file); its
    work folder's JSON and metrics.json are not chunks and are left out."""
    import json

    from bench.peer import peer_chars

    out = tmp_path / "np2" / "out"
    (out / "pdf").mkdir(parents=True)
    (out / "pdf" / "a.pdf.json").write_text(json.dumps([{"text": "alpha beta"}, {"text": "w " * 400}]))
    (out / "empty.txt.json").write_text("[]")
    (tmp_path / "np2" / "work").mkdir()
    (tmp_path / "np2" / "work" / "chunked.json").write_text(json.dumps([{"text": "not counted"}]))
    (tmp_path / "np2" / "metrics.json").write_text(json.dumps({"peak_tree_rss_mb": 1.0}))
    c = peer_chars(tmp_path)
    assert (c.chunks, c.cut, c.total) == (2, 1, 10 + 800)
    assert c.embedded == 10 + len("w " * 254) - 1
    assert peer_chars(tmp_path / "nothing-here") is None


def test_comparison_lines_carry_chars_embedded_for_both_sides():
    from bench.embedded_chars import EmbeddedChars

    ours = Run("ragstream", documents=24, pages=33, chunks=76, seconds=10.0)
    figs = parse_peer_output(RECORDED)
    figs.chars = EmbeddedChars(embedded=12700, total=50800, chunks=51, cut=40)
    lines = comparison_lines(ours, figs, EmbeddedChars(embedded=90000, total=90000, chunks=76))
    assert "ragstream_chars_embedded_per_s=9000" in lines
    assert "peer_chars_embedded_per_s_excl_startup=1000" in lines  # 12,700 over 12.7 s
    assert "ragstream_text_share_embedded=1.000" in lines and "peer_text_share_embedded=0.250" in lines
    assert lines[-1].startswith("vs_unstructured_ingest=")
    bare = comparison_lines(ours, parse_peer_output(RECORDED))
    assert "ragstream_chars_embedded_per_s=n/a" in bare and "peer_text_share_embedded=n/a" in bare


def test_same_work_counts_the_peers_empty_files_as_zero_pages(tmp_path):
    """The peer's per-file lines give (chunks, pages); a file it left empty counts no
    page for it.  ``same_work_ratio`` is over all files (ragstream's pages of every
    completed file), ``_common`` over the files both sides gave chunks for."""
    from bench.same_work import peer_per_file, same_work, same_work_lines

    stdout = ("  pdf/fake-memo.pdf.json                                  chunks=  2 pages=[1, 2]\n"
              "  img/scan page.jpg.json                                  chunks=  0 pages=[]\n"
              "  notes.txt.json                                          chunks=  1 pages=[]\n"
              "peer_wall_s=10.0\npeer_pages=4\n")
    files = peer_per_file(stdout)
    assert files == {"pdf/fake-memo.pdf": (2, 2), "img/scan page.jpg": (0, 0), "notes.txt": (1, 1)}
    assert parse_peer_output(stdout).per_file == files

    corpus = tmp_path / "corpus"
    ours = Run("basic", seconds=4.0, per_file={
        str(corpus / "pdf/fake-memo.pdf"): (3, 2), str(corpus / "img/scan page.jpg"): (1, 1),
        str(corpus / "notes.txt"): (1, 1), str(corpus / "broken.pdf"): (0, 0)})
    result = same_work(ours, corpus, files, peer_seconds=2.0)
    assert (result.ours_all, result.peer_all) == (4 / 4.0, 3 / 2.0)  # the scan: ours only
    assert (result.ours_common, result.peer_common, result.common_files) == (3 / 4.0, 3 / 2.0, 2)
    assert result.ratio_all == pytest.approx(1.0 / 1.5) and result.ratio_common == pytest.approx(0.75 / 1.5)
    assert same_work(ours, corpus, {}, 2.0) is None and same_work(ours, corpus, files, 0.0) is None
    assert same_work_lines(None) == ["same_work_pages_per_s=n/a", "same_work_ratio_common=n/a"]
    assert "same_work_ratio_common=0.500" in same_work_lines(result)


def test_last_line_adds_the_same_work_ratio_when_that_run_was_made():
    from bench.same_work import SameWork

    ours = Run("ragstream", documents=24, pages=33, chunks=76, seconds=10.0)
    figs = parse_peer_output(RECORDED)
    same = SameWork(ours_all=2.0, peer_all=2.5, ours_common=1.5, peer_common=2.0, common_files=19)
    last = comparison_lines(ours, figs, same=same, same_run=True)[-1]
    assert last == f"vs_unstructured_ingest={3.3 / (34 / 12.7):.3f} same_work_ratio=0.800"
    assert comparison_lines(ours, figs, same_run=True)[-1].endswith(" same_work_ratio=n/a")
    assert comparison_lines(ours, figs)[-1] == f"vs_unstructured_ingest={3.3 / (34 / 12.7):.3f}"
