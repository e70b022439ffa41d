"""Long documents of every format split into parts (stages/document_parts.py, issue 24
kind 6): the parts, partitioned one by one and joined in order, give the elements of
the whole document -- same texts, same order, same page numbers -- and normalize
sends one task per part."""
from __future__ import annotations

import re
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from stages import document_parts
from stages.errors import EmptyDocument
from stages.normalize import normalize_file
from stages.partition import partition_file
from stages.profiles import get_profile
from bench import long_documents as build

PROFILE = get_profile("default")

CASES = {
    # name: (builder, filetype, budget in characters)
    "docx": (lambda p: build.long_docx(p / "long.docx", 24, sections_every=7), "docx", 4000),
    "pptx": (lambda p: build.long_pptx(p / "long.pptx", 12), "pptx", 1500),
    "xlsx": (lambda p: build.long_xlsx(p / "long.xlsx", 6), "xlsx", 3000),
    "html": (lambda p: build.long_html(p / "long.html", 20), "html", 5000),
    "md": (lambda p: build.long_markdown(p / "long.md", 20), "md", 5000),
    "txt": (lambda p: build.long_text(p / "long.txt", 20), "txt", 5000),
}


def _texts(elements: list[dict]) -> list[tuple[str, object]]:
    return [(e["text"], e["metadata"].get("page_number")) for e in elements if e["text"].strip()]


def _joined(path: Path, filetype: str, ranges) -> list[dict]:
    out: list[dict] = []
    for r in ranges:
        try:
            out += partition_file(path, filetype, PROFILE, pages=r, filename=path.name)
        except EmptyDocument:
            pass  # a part of only blank units: the join decides (agents/partition.py)
    return out


@pytest.mark.parametrize("case", sorted(CASES))
def test_parts_joined_give_the_whole_document(case, tmp_path):
    builder, filetype, budget = CASES[case]
    path = builder(tmp_path)
    ranges = document_parts.part_ranges(path, filetype, budget)
    assert len(ranges) >= 3, ranges
    weights = document_parts.unit_weights(path, filetype)
    assert ranges[0][0] == 1 and ranges[-1][1] == len(weights)
    assert all(b[0] == a[1] + 1 for a, b in zip(ranges, ranges[1:]))  # no gap, no overlap
    assert all(sum(weights[s - 1:e]) <= budget or s == e for s, e in ranges)
    whole = partition_file(path, filetype, PROFILE, filename=path.name)
    parts = _joined(path, filetype, ranges)
    assert _texts(parts) == _texts(whole)
    ids = [e["element_id"] for e in parts]
    assert len(set(ids)) == len(ids)
    text = "\n".join(e["text"] for e in parts)
    found = re.findall(r"mark-\d+-\d+", text)
    assert found == sorted(set(found), key=found.index) and len(found) == len(set(found))


def test_docx_headers_once_and_true_page_numbers(tmp_path):
    path = build.long_docx(tmp_path / "sections.docx", 30, sections_every=7)
    ranges = document_parts.part_ranges(path, "docx", 2500)
    parts = _joined(path, "docx", ranges)
    headers = [e["text"] for e in parts if e["type"] == "Header"]
    assert sorted(headers) == sorted(["HEADER-0", "HEADER-7", "HEADER-14", "HEADER-21", "HEADER-28"]), headers
    pages = {m: e["metadata"]["page_number"] for e in parts for m in re.findall(r"mark-\d+-0", e["text"])}
    # one rendered page break per chapter and one per section: never decreasing, and
    # the same numbers as the whole document
    whole = {m: e["metadata"]["page_number"] for e in partition_file(path, "docx", PROFILE)
             for m in re.findall(r"mark-\d+-0", e["text"])}
    assert pages == whole and pages["mark-30-0"] > pages["mark-1-0"]


def test_slides_and_sheets_keep_their_numbers(tmp_path):
    pptx = build.long_pptx(tmp_path / "deck.pptx", 9)
    parts = _joined(pptx, "pptx", document_parts.part_ranges(pptx, "pptx", 1000))
    notes = {e["text"]: e["metadata"]["page_number"] for e in parts if e["text"].startswith("notes-")}
    assert notes == {f"notes-{p}": p for p in range(1, 10)}
    xlsx = build.long_xlsx(tmp_path / "book.xlsx", 5)
    ranges = document_parts.part_ranges(xlsx, "xlsx", 1)
    assert ranges == [(s, s) for s in range(1, 6)]  # one sheet a part
    parts = _joined(xlsx, "xlsx", ranges)
    assert {e["metadata"]["page_name"]: e["metadata"]["page_number"] for e in parts} == \
        {f"Sheet{s}": s for s in range(1, 6)}


def test_normalize_sends_parts_only_for_long_documents(tmp_path):
    small = build.long_docx(tmp_path / "small.docx", 3)
    assert normalize_file(small, tmp_path / "w1", PROFILE).page_ranges == []
    long = build.long_docx(tmp_path / "long.docx", 60)
    profile = replace(PROFILE, max_pages_per_task=8)
    result = normalize_file(long, tmp_path / "w2", profile)
    assert len(result.page_ranges) >= 4 and result.path == long
    assert "split into" in result.reason and "8 pages" in result.reason
    budget = 8 * document_parts.CHARS_PER_PAGE
    weights = document_parts.unit_weights(long, "docx")
    assert all(sum(weights[s - 1:e]) <= budget for s, e in result.page_ranges)


def test_a_package_that_does_not_read_is_not_split(tmp_path):
    """A broken package gives no ranges (one task, the parser's own reason), never an
    exception in normalize."""
    bad = tmp_path / "bad.docx"
    with zipfile.ZipFile(bad, "w") as zf:
        zf.writestr("[Content_Types].xml", "<Types/>")
        zf.writestr("word/document.xml", "<w:document xmlns:w='x'><w:body><unclosed></w:document>")
    assert document_parts.part_ranges(bad, "docx", 10) == []
    assert document_parts.part_ranges(tmp_path / "missing.pptx", "pptx", 10) == []


def test_a_range_outside_the_document_is_refused(tmp_path):
    path = build.long_pptx(tmp_path / "deck.pptx", 3)
    with pytest.raises(ValueError, match="outside the document's 3 slides"):
        document_parts.cut_part(path, "pptx", 2, 4, tmp_path / "out")


def test_docx_part_without_page_breaks_keeps_the_page_it_is_on(tmp_path):
    """Word's rendered breaks stop at page 12 (a document saved before layout caught
    up): the parts after that have no break of their own, and unstructured numbers
    no page in such a file; their elements are on page 12, as in the whole file."""
    import docx

    path = build.long_docx(tmp_path / "late.docx", 24, table_every=0)
    d = docx.Document(path)
    for para in d.paragraphs:
        match = re.fullmatch(r"Chapter (\d+)", para.text)
        if match and int(match.group(1)) > 12:
            for br in para._p.xpath(".//w:lastRenderedPageBreak"):
                br.getparent().remove(br)
    d.save(path)
    ranges = document_parts.part_ranges(path, "docx", 3000)
    assert len(ranges) >= 4, ranges
    whole = partition_file(path, "docx", PROFILE, filename=path.name)
    parts = _joined(path, "docx", ranges)
    assert _texts(parts) == _texts(whole)
    assert [t for t in _texts(parts) if t[0].startswith("mark-24-")] == \
        [(t, 12) for t, _ in _texts(parts) if t.startswith("mark-24-")]


def test_html_text_outside_the_units_is_in_one_part(tmp_path):
    """Text around the wrapper divs and comments' tails between units: once, in
    the part where it stands (the first for text before the units, the last for text
    after them)."""
    import lxml.html

    page = ("<html><body>BEFORE-BODY<div>BEFORE-OUTER<div>BEFORE-SPINE"
            + "".join(f"<p>para-{i} {'words ' * 12}</p><!-- c -->TAIL-{i}" for i in range(12))
            + "</div>AFTER-SPINE</div>AFTER-OUTER</body></html>")
    path = tmp_path / "wrapped.html"
    path.write_text(page)
    ranges = document_parts.part_ranges(path, "html", 250)
    assert len(ranges) >= 3, ranges
    texts = [lxml.html.parse(str(document_parts.cut_part(path, "html", a, b, tmp_path / "o").path))
             .getroot().text_content() for a, b in ranges]
    joined = "".join(texts)
    words = ["BEFORE-BODY", "BEFORE-OUTER", "BEFORE-SPINE", "AFTER-SPINE", "AFTER-OUTER"]
    assert all(joined.count(w) == 1 for w in words), texts
    assert re.findall(r"TAIL-\d+", joined) == [f"TAIL-{i}" for i in range(12)], texts
    assert "BEFORE-SPINE" in texts[0] and "AFTER-OUTER" in texts[-1]


def test_markdown_parts_never_start_inside_a_code_fence(tmp_path):
    """A blank line before a closing fence, a ``~~~`` inside a backtick fence and a
    longer closing run (CommonMark): each fenced block stays one unit."""
    from stages.markup_parts import _paragraphs

    path = tmp_path / "fences.md"
    path.write_text("intro\n\n```\ncode a\n\n```\n\nafter\n\n```python\nx\n\n~~~\n\ny\n````\n\n"
                    "z\n\n~~~\nw\n\n```\n\n~~~~\n\nend\n")
    assert _paragraphs(path, "md") == [
        "intro\n\n", "```\ncode a\n\n```\n\n", "after\n\n", "```python\nx\n\n~~~\n\ny\n````\n\n",
        "z\n\n", "~~~\nw\n\n```\n\n~~~~\n\n", "end\n"]
    assert _paragraphs(path, "txt")[1] == "```\ncode a\n\n"  # plain text knows no fences


def test_pack():
    assert document_parts.pack([], 10) == []
    assert document_parts.pack([3, 3, 3, 3], 6) == [(1, 2), (3, 4)]
    assert document_parts.pack([20, 1, 1], 6) == [(1, 1), (2, 3)]  # a heavy unit alone
    assert document_parts.pack([0, 0, 7, 0], 6) == [(1, 2), (3, 4)]


async def _processed(settings, project, document_id) -> dict:
    import orjson

    from adapters.object_keys import processed_key
    from adapters.object_store import ObjectStore

    async with ObjectStore(settings) as store:
        return orjson.loads(await store.get_bytes(processed_key(project, document_id, 1)))


@pytest.mark.integration
@pytest.mark.slow
def test_long_docx_and_markdown_through_the_pipeline_in_parts(stack, worker, project, tmp_path):
    """A 40-page DOCX with tables and sections, and a long Markdown file, under a
    category whose profile allows 4 pages a task: normalize splits each into parts,
    the partition worker parses them, the chunk stage joins them, and every marker is
    in the indexed chunks once, in document order, with the DOCX tables' cells."""
    from adapters.profiles_store import ProfileStore
    from tests.conftest import run as run_async

    async def put_profile():
        from adapters.migrations import upgrade_head

        await upgrade_head(stack.pg_dsn)  # a fresh stack's first profile write
        async with ProfileStore(stack.pg_dsn) as store:
            await store.put(replace(PROFILE, name="parts-test", max_pages_per_task=4))

    run_async(put_profile())
    docx = build.long_docx(tmp_path / "long-report.docx", 40, sections_every=9)
    md = build.long_markdown(tmp_path / "long-notes.md", 30)
    from rich.console import Console

    from cli.progress import ingest_and_follow

    outcome = run_async(ingest_and_follow([docx, md], project=project, category="parts-test",
                                          console=Console(width=160), timeout_s=600))
    assert not outcome.timed_out
    for r in outcome.results:
        event = outcome.last[r.document_id]
        assert event.status == "COMPLETED", (r.path.name, event.error)
        body = run_async(_processed(stack, project, r.document_id))
        assert body["parts"] >= 3, (r.path.name, body["parts"])
        text = "\n".join(c["text"] for c in body["chunks"])
        found = re.findall(r"mark-\d+-\d+", text)
        pages, per_page = (40, 5) if r.path.suffix == ".docx" else (30, 4)
        assert found == build.markers(pages, per_page), r.path.name
        if r.path.suffix == ".docx":
            assert all(f"cell-{p}-2-2" in text for p in range(4, 41, 4))
            # every part's pages: the whole document's count, every chunk on a page
            assert body["pages"] == 40 and all(c["page_number"] >= 1 for c in body["chunks"])
    assert worker.poll() is None
