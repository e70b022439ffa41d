"""A slide's speaker notes are text of the deck, marked as notes, with the slide's
number, after the slide's own elements (R5 of ../shared/cases: the prose lived in the
notes and only the title came out)."""
from __future__ import annotations

from pathlib import Path

import pytest

from stages.partition import partition_file, tesseract_available
from stages.profiles import Profile

DATA = Path(__file__).parent / "data" / "hostile"
PROFILE = Profile(name="default")


def _notes(elements: list[dict]) -> list[tuple[int, str]]:
    return [(e["metadata"]["page_number"], e["text"]) for e in elements if e["metadata"].get("speaker_notes")]


def deck(path: Path, slides: list[tuple[str | None, list[str]]]) -> Path:
    """A PPTX with one slide per ``(title or None for a blank slide, notes paragraphs)``."""
    from pptx import Presentation

    prs = Presentation()
    for title, notes in slides:
        slide = prs.slides.add_slide(prs.slide_layouts[5 if title else 6])
        if title:
            slide.shapes.title.text = title
        if notes:
            frame = slide.notes_slide.notes_text_frame
            frame.text = notes[0]
            for extra in notes[1:]:
                frame.add_paragraph().text = extra
    prs.save(path)
    return path


def test_handed_deck_with_notes():
    elements = partition_file(DATA / "R5-pptx-speaker-notes.pptx", "pptx", PROFILE)
    notes = _notes(elements)
    assert [page for page, _ in notes] == [1, 2]
    assert notes[0][1].startswith("NOTESMARKER") and notes[1][1].startswith("NOTESTWOMARKER")
    assert [e["type"] for e in elements][:2] == ["Title", "NarrativeText"]  # the slide, then its notes
    assert not elements[0]["metadata"].get("speaker_notes")


def test_notes_follow_their_slide_with_stable_ids(tmp_path):
    src = deck(tmp_path / "talk.pptx", [
        ("Opening", ["FIRSTNOTEMARKER welcome everyone.", "SECONDPARAMARKER then the agenda."]),
        ("Numbers", []),
        (None, ["ONLYNOTESMARKER the closing script."]),
    ])
    elements = partition_file(src, "pptx", PROFILE)
    assert _notes(elements) == [(1, "FIRSTNOTEMARKER welcome everyone."),
                                (1, "SECONDPARAMARKER then the agenda."),
                                (3, "ONLYNOTESMARKER the closing script.")]
    order = [e["text"] for e in elements if e["text"]]
    assert order.index("Opening") < order.index("FIRSTNOTEMARKER welcome everyone.") < order.index("Numbers")
    again = partition_file(src, "pptx", PROFILE)
    assert [e["element_id"] for e in again] == [e["element_id"] for e in elements]
    assert len({e["element_id"] for e in elements}) == len(elements)


def test_deck_of_nothing_but_notes(tmp_path):
    src = deck(tmp_path / "script.pptx", [(None, ["SCRIPTMARKER read this aloud."]), (None, [])])
    assert _notes(partition_file(src, "pptx", PROFILE)) == [(1, "SCRIPTMARKER read this aloud.")]


@pytest.mark.skipif(not tesseract_available(), reason="tesseract not installed")
def test_picture_slides_are_still_ocrd_when_they_have_notes(tmp_path):
    """Notes do not stand in for the OCR of a deck of pictures: both come out."""
    from pptx import Presentation
    from pptx.util import Inches

    from tests.test_image_frames import page

    picture = tmp_path / "slide.png"
    page("Kestrel harbour").save(picture)
    prs = Presentation()
    slide = prs.slides.add_slide(prs.slide_layouts[6])
    slide.shapes.add_picture(str(picture), 0, 0, width=Inches(6))
    slide.notes_slide.notes_text_frame.text = "PICTURENOTEMARKER explain the photo."
    prs.save(tmp_path / "pictures.pptx")
    elements = partition_file(tmp_path / "pictures.pptx", "pptx", PROFILE)
    assert "Kestrel" in " ".join(e["text"] for e in elements)
    assert _notes(elements) == [(1, "PICTURENOTEMARKER explain the photo.")]


def test_cli_line_says_notes():
    from cli.partition import _line

    line = _line({"type": "NarrativeText", "element_id": "x", "text": "t",
                  "metadata": {"page_number": 2, "speaker_notes": True}}, full=False)
    assert '"speaker_notes": true' in line and '"page_number": 2' in line
