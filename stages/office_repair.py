"""Office (OOXML) packages whose relationships point at parts that are not there.

python-docx and python-pptx load every internal relationship target when they open
a package; one relationship to a missing part (an image lost by the program that
wrote the file) raised ``KeyError: "There is no item named 'word/media/missing.png'
in the archive"`` and the whole document FAILED as "truncated or corrupt".

:func:`without_dangling_relationships` finds such relationships and, when there are
any, writes a copy of the package without them; the text is then read as usual and
the missing parts are noted (logged, and listed by the caller in the elements'
metadata as ``skipped_parts``).
"""
from __future__ import annotations

import logging
import posixpath
import zipfile
from pathlib import Path

log = logging.getLogger(__name__)
_RELS_NS = "http://schemas.openxmlformats.org/package/2006/relationships"


def _source_dir(rels_name: str) -> str:
    """``word/_rels/document.xml.rels`` → ``word``; ``_rels/.rels`` → ``""``."""
    folder = posixpath.dirname(posixpath.dirname(rels_name))
    return folder


def dangling(zf: zipfile.ZipFile) -> dict[str, list[str]]:
    """``{rels part name: [missing target part names]}`` for internal relationships of
    ``zf`` whose target part is absent."""
    from lxml import etree

    names = set(zf.namelist())
    out: dict[str, list[str]] = {}
    for rels in (n for n in names if n.endswith(".rels")):
        try:
            root = etree.fromstring(zf.read(rels), etree.XMLParser(resolve_entities=False))
        except etree.XMLSyntaxError:
            continue
        for rel in root:
            if rel.get("TargetMode") == "External" or not rel.get("Target"):
                continue
            target = rel.get("Target")
            part = (target.lstrip("/") if target.startswith("/")
                    else posixpath.normpath(posixpath.join(_source_dir(rels), target)))
            if part not in names:
                out.setdefault(rels, []).append(part)
    return out


def without_dangling_relationships(path: Path, out_dir: Path) -> tuple[Path, list[str]]:
    """Return ``(package, missing)``: ``path`` itself and ``[]`` when every internal
    relationship target exists (or ``path`` is not a zip); otherwise a repaired copy in
    ``out_dir`` (same suffix) without those relationships, and the missing part names."""
    from lxml import etree

    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError):
        return path, []
    with zf:
        broken = dangling(zf)
        if not broken:
            return path, []
        repaired = Path(out_dir) / f"repaired{Path(path).suffix or '.zip'}"
        with zipfile.ZipFile(repaired, "w", zipfile.ZIP_DEFLATED) as out:
            for info in zf.infolist():
                data = zf.read(info)
                if info.filename in broken:
                    root = etree.fromstring(data, etree.XMLParser(resolve_entities=False))
                    missing = set(broken[info.filename])
                    for rel in list(root):
                        target = rel.get("Target") or ""
                        part = (target.lstrip("/") if target.startswith("/") else posixpath.normpath(
                            posixpath.join(_source_dir(info.filename), target)))
                        if rel.get("TargetMode") != "External" and part in missing:
                            root.remove(rel)
                    data = etree.tostring(root, xml_declaration=True, encoding="UTF-8", standalone=True)
                out.writestr(info, data)
    missing_parts = sorted({p for parts in broken.values() for p in parts})
    log.warning("%s: skipped %d missing part(s) its relationships point at: %s",
                Path(path).name, len(missing_parts), ", ".join(missing_parts))
    return repaired, missing_parts

