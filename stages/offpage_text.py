"""Text drawn outside the page is not on the page: drop it before unstructured reads
a pdfminer page layout.

A PDF page may draw more than it shows: a two-page spread exported as two pages
keeps the whole spread on each, shifted so that one half falls inside the page box
(the shared corpus's ``reliance.pdf``: on its page 2, 2,560 of 3,883 characters lie
outside the page; pdftotext and every viewer show only the rest).  pdfminer keeps
every character, so unstructured's ``fast`` path gave pages 2 and 3 each other's
text as well, usually inside a page-sized figure: duplicate chunks with the wrong
page number (found by a newcomer's search, 2026-12-03).

:func:`install` wraps unstructured's ``open_pdfminer_pages_generator`` where its PDF
partitioners call it (``unstructured.partition.pdf`` for ``fast``,
``...pdf_image.pdfminer_processing`` for ``hi_res``) so that each page layout loses
the characters whose centre lies outside the page's box (:func:`drop_offpage_chars`).
pdfplumber's table pass crops its page the same way (``stages.pdf_extras``).
"""
from __future__ import annotations

import functools
from typing import Any

_MODULES = ("unstructured.partition.pdf", "unstructured.partition.pdf_image.pdfminer_processing")
_NAME = "open_pdfminer_pages_generator"


def drop_offpage_chars(layout: Any) -> int:
    """Remove, in place, every ``LTChar`` under the pdfminer ``LTPage`` ``layout``
    whose centre lies outside ``layout.bbox`` (PDF points); returns how many went.
    Containers left without characters stay (their text is then blank, which
    unstructured skips)."""
    from pdfminer.layout import LTChar, LTContainer

    x0, y0, x1, y1 = layout.bbox

    def visible(obj) -> bool:
        if not isinstance(obj, LTChar):
            return True
        cx, cy = (obj.x0 + obj.x1) / 2, (obj.y0 + obj.y1) / 2
        return x0 <= cx <= x1 and y0 <= cy <= y1

    dropped = 0
    stack = [layout]
    while stack:
        container = stack.pop()
        kept = [o for o in container._objs if visible(o)]
        dropped += len(container._objs) - len(kept)
        container._objs = kept
        stack.extend(o for o in kept if isinstance(o, LTContainer))
    return dropped


def _visible_pages(generator):
    @functools.wraps(generator)
    def pages(*args, **kwargs):
        for page, layout in generator(*args, **kwargs):
            drop_offpage_chars(layout)
            yield page, layout

    pages.drops_offpage_text = True
    return pages


def install() -> None:
    """Wrap the page generator in unstructured's PDF modules (idempotent)."""
    import importlib

    for name in _MODULES:
        module = importlib.import_module(name)
        current = getattr(module, _NAME)
        if not getattr(current, "drops_offpage_text", False):
            setattr(module, _NAME, _visible_pages(current))
