"""PDF decoder bombs (issue 24 kind 5; shared/cases R10): every stream a page reaches
is measured with bounded decoders before a parser sees it; a page over
``max_stream_decoded_mb`` is emptied and named, the other pages are read."""
from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pikepdf
import pytest

from tests.pdf_pages import text_page

from stages.errors import LimitExceeded
from stages.pdf_bombs import decoded_size, defuse

DATA = Path(__file__).parent / "data" / "hostile"


def _bomb_stream(pdf: pikepdf.Pdf, decoded_mb: int, layers: int = 2) -> pikepdf.Stream:
    data = b" " * (decoded_mb << 20)
    for _ in range(layers):
        data = zlib.compress(data, 9)
    stream = pdf.make_stream(b"")
    stream.write(data, filter=[pikepdf.Name.FlateDecode] * layers)
    return stream


def _run_length_bomb(raw_runs: int) -> bytes:
    return bytes([129, 0x20]) * raw_runs + bytes([128])  # each run: 128 spaces from 2 bytes


def test_decoded_size_is_bounded_for_every_filter():
    pdf = pikepdf.new()
    assert decoded_size(_bomb_stream(pdf, 3), 1 << 20) is None
    assert decoded_size(_bomb_stream(pdf, 3), 8 << 20) == 3 << 20
    rl = pdf.make_stream(b"")
    rl.write(_run_length_bomb(20_000), filter=pikepdf.Name.RunLengthDecode)
    assert decoded_size(rl, 1 << 20) is None and decoded_size(rl, 4 << 20) == 20_000 * 128
    hexed = pdf.make_stream(b"")
    hexed.write(b"48656c6c6f>", filter=pikepdf.Name.ASCIIHexDecode)
    assert decoded_size(hexed, 100) == 5
    plain = pdf.make_stream(b"x" * 10)
    assert decoded_size(plain, 100) == 10


def test_bombed_page_is_emptied_and_named_the_others_are_read(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGSTREAM_MAX_STREAM_DECODED_MB", "1")
    pdf = pikepdf.new()
    pdf.pages.append(text_page(pdf, "FIRSTPAGEMARKER kept"))
    bombed = text_page(pdf, "never read")
    bombed.obj["/Contents"] = _bomb_stream(pdf, 4)
    pdf.pages.append(bombed)
    form_page = text_page(pdf, "FORMPAGE")  # a bomb one level down: a form XObject
    form = _bomb_stream(pdf, 4)
    form.Type, form.Subtype, form.BBox = pikepdf.Name.XObject, pikepdf.Name.Form, [0, 0, 10, 10]
    form_page.obj.Resources["/XObject"] = pikepdf.Dictionary(X1=form)
    pdf.pages.append(form_page)
    pdf.pages.append(text_page(pdf, "LASTPAGEMARKER kept"))
    src = tmp_path / "bombs.pdf"
    pdf.save(src)

    out, reasons, pages = defuse(src, 1, 4, tmp_path / "out")
    assert pages == [2, 3] and out != src
    assert reasons[0] == "page 2: a stream decodes past 1 MiB (RAGSTREAM_MAX_STREAM_DECODED_MB)"
    assert out.stat().st_size < 10_000  # the bombs are not in the copy

    from stages.partition import partition_file
    from stages.profiles import Profile

    elements = partition_file(src, "pdf", Profile(name="default"))
    text = "\n".join(e["text"] for e in elements)
    assert "FIRSTPAGEMARKER" in text and "LASTPAGEMARKER" in text
    assert elements[0]["metadata"]["skipped_parts"] == reasons
    assert {e["metadata"]["page_number"] for e in elements} == {1, 4}  # page numbers kept

    with pytest.raises(LimitExceeded, match=r"page 2: a stream decodes past 1 MiB"):
        partition_file(src, "pdf", Profile(name="default"), pages=(2, 3))
    assert defuse(src, 1, 1, tmp_path / "o2") == (src, [], [])  # page 1 alone: untouched


def test_r10_under_an_8_gb_address_space_cap():
    """The handed 2 KB file that inflates to 64 GiB: page 1's text, page 2 named, in
    seconds, under the cap that aborted the parse at ~7 GB before."""
    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (8 << 30, 8 << 30))

    t0 = time.monotonic()
    proc = subprocess.run([str(Path(sys.executable).with_name("ragstream")), "partition",
                           str(DATA / "R10-pdf-nested-flate-bomb-64GiB.pdf")],
                          capture_output=True, text=True, timeout=120, preexec_fn=cap, env=os.environ)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "BOMBPAGEMARKER" in proc.stdout
    assert "page 2: a stream decodes past 512 MiB (RAGSTREAM_MAX_STREAM_DECODED_MB)" in proc.stderr
    assert time.monotonic() - t0 < 60
