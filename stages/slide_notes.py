"""Speaker notes of a PPTX, as elements marked as notes, each after its slide.

unstructured's ``partition_pptx`` leaves the notes out unless asked
(``include_slide_notes=True``, unstructured 0.21), and then gives each slide's notes
as one ``NarrativeText`` before the slide's shapes, indistinguishable from slide text.
A deck whose prose lives in its notes (a talk's script; a slide holding nothing but
notes) lost that prose.  :func:`with_speaker_notes` reads the notes with python-pptx
instead: one ``NarrativeText`` per non-empty paragraph of the notes page's text
(every text shape, groups included, but not the slide image, slide number, header,
footer or date placeholders), with ``page_number`` = the slide's number and
``metadata.speaker_notes`` = True, placed after that slide's own elements.  Element ids
are derived from the file name, slide, paragraph index and text, so they are the same
on every run.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

PPTX_MIME = "application/vnd.openxmlformats-officedocument.presentationml.presentation"


def slide_notes(path: Path) -> dict[int, list[str]]:
    """``{slide number from 1: [paragraph text, ...]}`` of the speaker notes of the PPTX
    at ``path``; slides without notes text are absent.  Line breaks inside a paragraph
    become ``\\n``.  Raises what python-pptx raises for an unreadable package."""
    from pptx import Presentation
    from pptx.enum.shapes import MSO_SHAPE_TYPE, PP_PLACEHOLDER

    skip = {PP_PLACEHOLDER.SLIDE_IMAGE, PP_PLACEHOLDER.SLIDE_NUMBER, PP_PLACEHOLDER.HEADER,
            PP_PLACEHOLDER.FOOTER, PP_PLACEHOLDER.DATE}
    notes: dict[int, list[str]] = {}
    for number, slide in enumerate(Presentation(str(path)).slides, start=1):
        if not slide.has_notes_slide:
            continue
        texts: list[str] = []
        stack = list(slide.notes_slide.shapes)
        while stack:
            shape = stack.pop(0)
            if shape.shape_type == MSO_SHAPE_TYPE.GROUP:
                stack[:0] = list(shape.shapes)
                continue
            if shape.is_placeholder and shape.placeholder_format.type in skip:
                continue
            if shape.has_text_frame:
                texts += [t for t in (p.text.replace("\v", "\n").strip()
                                      for p in shape.text_frame.paragraphs) if t]
        if texts:
            notes[number] = texts
    return notes


def with_speaker_notes(elements: list, path: Path, filename: str) -> list:
    """``elements`` (unstructured Elements of the PPTX at ``path``, in slide order) with
    the speaker notes of each slide inserted after that slide's elements: before the
    first element of a later slide or the page break that ends it; notes of slides past
    the last element at the end.  ``filename`` goes to ``metadata.filename``."""
    notes = slide_notes(path)
    if not notes:
        return elements
    out: list = []
    pending = sorted(notes)
    for el in elements:
        # slides closed by this element: those before its slide, and its own when it is
        # the page break unstructured puts after a slide (it carries that slide's number)
        closed = (el.metadata.page_number or 0) + (el.category == "PageBreak")
        while pending and pending[0] < closed:
            out += _notes_elements(pending.pop(0), notes, filename)
        out.append(el)
    for number in pending:
        out += _notes_elements(number, notes, filename)
    return out


def _notes_elements(number: int, notes: dict[int, list[str]], filename: str) -> list:
    from unstructured.documents.elements import ElementMetadata, NarrativeText

    out = []
    for index, text in enumerate(notes[number]):
        meta = ElementMetadata(filename=filename, filetype=PPTX_MIME, page_number=number)
        meta.speaker_notes = True
        digest = hashlib.sha256(f"{filename}\0notes\0{number}\0{index}\0{text}".encode()).hexdigest()[:32]
        out.append(NarrativeText(text=text, metadata=meta, element_id=digest))
    return out
