"""Every frame of an image is OCR'd as its own page, upright (R4 of ../shared/cases: a
two-page fax TIFF gave page 1 only).  Frames come one at a time from
``stages.image_frames.upright_frames``, each checked against the pixel limit, their
number against ``RAGSTREAM_MAX_IMAGE_FRAMES``; EXIF orientation is honoured."""
from __future__ import annotations

from pathlib import Path

import pytest

from stages.errors import LimitExceeded
from stages.partition import partition_file, tesseract_available
from stages.profiles import Profile

DATA = Path(__file__).parent / "data" / "hostile"
PROFILE = Profile(name="default")
FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
WORDS = ["Kestrel harbour", "Heron meadow", "Osprey lantern"]
NEEDS_OCR = pytest.mark.skipif(not tesseract_available() or not Path(FONT).exists(),
                               reason="tesseract or the DejaVu font is missing")


def page(words: str, size: tuple[int, int] = (1200, 500)):
    """A white page with ``words`` in 64-pixel black type (tesseract reads it at once)."""
    from PIL import Image, ImageDraw, ImageFont

    img = Image.new("L", size, 255)
    ImageDraw.Draw(img).text((60, 60), words, fill=0, font=ImageFont.truetype(FONT, 64))
    return img


def frames_tiff(path: Path, pages: list) -> Path:
    pages[0].save(path, format="TIFF", save_all=True, append_images=pages[1:], dpi=(200, 200))
    return path


def sideways_jpeg(path: Path, words: str) -> Path:
    """``words`` stored rotated a quarter turn, with EXIF Orientation 6 ("turn 90° clockwise
    to show"), as a phone camera writes a portrait photo."""
    from PIL import Image

    stored = page(words).convert("RGB").transpose(Image.Transpose.ROTATE_90)
    exif = Image.Exif()
    exif[0x0112] = 6
    stored.save(path, format="JPEG", quality=95, exif=exif.tobytes())
    return path


def _pages(elements: list[dict]) -> dict[int, str]:
    out: dict[int, str] = {}
    for e in elements:
        out[e["metadata"]["page_number"]] = out.get(e["metadata"]["page_number"], "") + " " + e["text"]
    return out


@NEEDS_OCR
def test_handed_two_page_fax_tiff():
    pages = _pages(partition_file(DATA / "R4-tiff-two-pages.tif", "tiff", PROFILE))
    assert "TIFFPAGETWOMARKER" in pages[2] and "TIFFPAGETWOMARKER" not in pages.get(1, "")
    assert "Fax cover sheet" in pages[1]


@NEEDS_OCR
def test_every_frame_of_a_tiff_is_its_page(tmp_path):
    src = frames_tiff(tmp_path / "three.tif", [page(w) for w in WORDS])
    elements = partition_file(src, "tiff", PROFILE)
    pages = _pages(elements)
    assert sorted(pages) == [1, 2, 3]
    for number, words in enumerate(WORDS, start=1):
        assert words.split()[0] in pages[number], pages
    assert {e["metadata"]["filetype"] for e in elements} == {"TIFF"}  # not the PNG of a frame


@NEEDS_OCR
def test_exif_orientation_is_honoured(tmp_path):
    src = sideways_jpeg(tmp_path / "portrait.jpg", "Kestrel harbour")
    assert "Kestrel" in " ".join(e["text"] for e in partition_file(src, "jpeg", PROFILE))


@NEEDS_OCR
def test_frames_and_orientation_of_pictures_in_office_files(tmp_path):
    """The OCR fallback of picture-only DOCX/PPTX reads every frame, upright."""
    import docx
    from pptx import Presentation
    from pptx.util import Inches

    tiff = frames_tiff(tmp_path / "two.tif", [page(w) for w in WORDS[:2]])
    document = docx.Document()
    document.add_picture(str(tiff), width=docx.shared.Inches(5))
    document.save(tmp_path / "pic.docx")
    text = " ".join(e["text"] for e in partition_file(tmp_path / "pic.docx", "docx", PROFILE))
    assert "Kestrel" in text and "Heron" in text

    deck = Presentation()
    deck.slides.add_slide(deck.slide_layouts[6])
    slide = deck.slides.add_slide(deck.slide_layouts[6])
    slide.shapes.add_picture(str(sideways_jpeg(tmp_path / "side.jpg", "Osprey lantern")), 0, 0, width=Inches(4))
    deck.save(tmp_path / "pic.pptx")
    elements = partition_file(tmp_path / "pic.pptx", "pptx", PROFILE)
    assert "Osprey" in _pages(elements)[2]


def test_frame_count_limit_names_itself(tmp_path, monkeypatch):
    src = frames_tiff(tmp_path / "three.tif", [page(w, (200, 100)) for w in WORDS])
    monkeypatch.setenv("RAGSTREAM_MAX_IMAGE_FRAMES", "2")
    with pytest.raises(LimitExceeded, match=r"TIFF image has more than 2 frames, limit 2 "
                                            r"\(RAGSTREAM_MAX_IMAGE_FRAMES\)"):
        partition_file(src, "tiff", PROFILE)


def test_pixel_limit_applies_to_every_frame(tmp_path, monkeypatch):
    src = frames_tiff(tmp_path / "growing.tif", [page("a", (100, 100)), page("b", (400, 300))])
    monkeypatch.setenv("RAGSTREAM_MAX_IMAGE_PIXELS", "50000")
    with pytest.raises(LimitExceeded, match=r"TIFF image frame 2 is 400×300 = 120,000 pixels, limit 50,000"):
        partition_file(src, "tiff", PROFILE)


def test_upright_frames_one_at_a_time(tmp_path):
    """A plain single-frame file is passed as it is; frame files are removed as the
    caller moves on."""
    from stages.image_frames import upright_frames

    single = tmp_path / "one.png"
    page("x", (100, 80)).save(single)
    assert list(upright_frames(single, "PNG", tmp_path)) == [(1, single)]
    src = frames_tiff(tmp_path / "three.tif", [page(w, (120, 60)) for w in WORDS])
    seen = []
    for number, frame in upright_frames(src, "TIFF", tmp_path):
        seen.append(number)
        assert frame.exists() and frame.suffix == ".png"
        assert sorted(p.name for p in tmp_path.glob("frame-*")) == [frame.name]
    assert seen == [1, 2, 3] and not list(tmp_path.glob("frame-*"))
