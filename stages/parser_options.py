"""Third-party parser settings for large and deeply nested documents.

libxml2 (through lxml) refuses a text node over 10,000,000 bytes ("Resource limit
exceeded: Text node too long, try XML_PARSE_HUGE") and, without the same flag, any
nesting deeper than 256 — the HTML parser silently drops what lies below.
python-docx and python-pptx parse every part with a module-level ``XMLParser``
built without ``huge_tree``, so a valid DOCX with one 11-million-character run was
reported "truncated or corrupt".

:func:`install` (idempotent, per process) gives both libraries an equivalent parser
with ``huge_tree=True`` and the same element-class lookup.  Memory stays bounded by
the part-size limit checked before parsing (:func:`check_zip_parts`) and by the
parse process's address-space cap (``stages.pool``).  Nesting beyond what lxml's
HTML parser keeps is flattened beforehand by ``stages.html_depth``.
"""
from __future__ import annotations

import zipfile
from pathlib import Path

from stages.limits import limit
from stages.errors import LimitExceeded

_installed = False


def _huge(module, attr: str = "oxml_parser") -> None:
    from lxml import etree

    old = getattr(module, attr)
    new = etree.XMLParser(remove_blank_text=True, resolve_entities=False, huge_tree=True)
    new.set_element_class_lookup(module.element_class_lookup)
    setattr(module, attr, new)
    del old


def install() -> None:
    """Let python-docx and python-pptx parse huge text nodes (``huge_tree=True``)."""
    global _installed
    if _installed:
        return
    import docx.oxml.parser as docx_parser

    _huge(docx_parser)
    try:
        import pptx.oxml as pptx_oxml
    except ImportError:  # pragma: no cover - python-pptx is a dependency of unstructured[pptx]
        pptx_oxml = None
    if pptx_oxml is not None:
        _huge(pptx_oxml)
    _installed = True


def check_zip_parts(path: Path, label: str) -> None:
    """Raise LimitExceeded when one part of the Office (zip) file ``path`` would inflate past
    ``RAGSTREAM_MAX_PART_MB``; a file that is not a zip is left to the parser."""
    cap_mb = limit("max_part_mb")
    if not cap_mb:
        return
    try:
        with zipfile.ZipFile(path) as zf:
            infos = zf.infolist()
    except (zipfile.BadZipFile, OSError):
        return
    for info in infos:
        if info.file_size > cap_mb * 1024 * 1024:
            raise LimitExceeded(f"{label} part {info.filename} is {info.file_size / 2**20:,.0f} MiB "
                           f"uncompressed, limit {cap_mb:,} MiB (RAGSTREAM_MAX_PART_MB)")
