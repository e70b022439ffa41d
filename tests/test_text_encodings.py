"""Text in UTF-16 or UTF-32, with or without a byte-order mark, is text of its type
(R8 of ../shared/cases: a UTF-16LE TXT without a BOM failed as "unrecognised binary
content").  Detection reads the NUL pattern and a strict decode
(``stages.charsets.sniff_unicode``); partition hands each parser a UTF-8 copy."""
from __future__ import annotations

import array
import codecs
from pathlib import Path

import pytest

from stages.charsets import decode_html, sniff_unicode
from stages.detect import detect_type
from stages.normalize import normalize_file
from stages.partition import partition_file
from stages.profiles import Profile

DATA = Path(__file__).parent / "data" / "hostile"
PROFILE = Profile(name="default")
PROSE = ("ENCODINGMARKER The works council met on Monday.\n\n"
         "Second paragraph, with more words in it and a full stop.\n")
DOCS = {  # type -> (file content, name extension)
    "txt": PROSE,
    "md": "# ENCODINGMARKER heading\n\nSome *markdown* prose here.\n",
    "csv": "id,name,note\n1,ENCODINGMARKER,first\n2,other,second\n3,third,last\n",
    "html": '<html><head><meta charset="utf-16"></head><body><p>ENCODINGMARKER para</p></body></html>\n',
    "xml": '<?xml version="1.0" encoding="UTF-16"?>\n<root><item>ENCODINGMARKER xml</item></root>\n',
}
ENCODINGS = [("utf-16-be", b""), ("utf-16-le", b""), ("utf-32-le", b""), ("utf-32-be", b""),
             ("utf-32-le", codecs.BOM_UTF32_LE), ("utf-16-be", codecs.BOM_UTF16_BE)]


def _text(elements: list[dict]) -> str:
    return "\n".join(e["text"] for e in elements)


def test_handed_utf16le_without_bom(tmp_path):
    """R8: detected as text, normalized, partitioned: the marker comes out."""
    src = DATA / "R8-utf16le-no-bom.txt"
    assert detect_type(src).filetype == "txt"
    norm = normalize_file(src, tmp_path, PROFILE)
    assert "UTF16MARKER" in _text(partition_file(norm.path, norm.filetype, PROFILE))


@pytest.mark.parametrize("enc,bom", ENCODINGS, ids=lambda v: v if isinstance(v, str) else ("bom" if v else "no-bom"))
@pytest.mark.parametrize("ftype", sorted(DOCS))
def test_every_text_type_in_every_unicode_form(tmp_path, ftype, enc, bom):
    """Detected as its own type and partitioned with the marker, whatever the form."""
    src = tmp_path / f"doc.{ftype}"
    src.write_bytes(bom + DOCS[ftype].encode(enc))
    assert detect_type(src).filetype == ftype
    assert "ENCODINGMARKER" in _text(partition_file(src, ftype, PROFILE))


def test_utf16be_without_bom_named_nothing(tmp_path):
    """No extension to lean on: the content alone says text."""
    src = tmp_path / "upload"
    src.write_bytes(PROSE.encode("utf-16-be"))
    norm = normalize_file(src, tmp_path / "work", PROFILE)
    assert norm.filetype == "txt"
    assert "ENCODINGMARKER" in _text(partition_file(norm.path, "txt", PROFILE))


def test_sniff_names_the_form():
    cyrillic = "Привет, мир. Это проверка 123.\n" * 40
    assert sniff_unicode(cyrillic.encode("utf-16-le")) == "utf-16-le"
    assert sniff_unicode(cyrillic.encode("utf-16-be")) == "utf-16-be"
    assert sniff_unicode(cyrillic.encode("utf-32-be")) == "utf-32-be"
    assert sniff_unicode(codecs.BOM_UTF32_LE + b"a\0\0\0") == "utf-32"  # not UTF-16 + NUL
    assert sniff_unicode(codecs.BOM_UTF8 + b"x") == "utf-8-sig"
    cut = PROSE.encode("utf-16-le")[:-1]  # a unit cut by the sample's end
    assert sniff_unicode(cut) == "utf-16-le"


@pytest.mark.parametrize("data", [
    b"plain ASCII text, no NUL anywhere\n" * 20,
    "caf\u00e9 na\u00efve UTF-8\n".encode() * 20,
    array.array("H", range(200)).tobytes(),  # small 16-bit integers: controls once decoded
    array.array("I", range(2000)).tobytes(),
    bytes(range(256)) * 8,
    b"\0" * 4096,
    "中文文本没有零字节".encode("utf-16-le"),  # UTF-16 with no zero byte: not recognisable
], ids=["ascii", "utf8", "uint16", "uint32", "bytes", "zeros", "cjk-utf16"])
def test_sniff_leaves_other_bytes_alone(data):
    assert sniff_unicode(data) is None


def test_html_declaring_utf16_in_ascii_is_utf8():
    """A readable <meta charset="utf-16"> was ASCII-compatible: decoded as UTF-8."""
    page = '<html><head><meta charset="utf-16"></head><body>Gr\u00fc\u00dfe</body></html>'
    assert "Gr\u00fc\u00dfe" in decode_html(page.encode("utf-8"))
    assert "Gr\u00fc\u00dfe" in decode_html(page.encode("utf-16-le"))
