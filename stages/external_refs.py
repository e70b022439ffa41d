"""Strip what a document links to outside itself, before LibreOffice converts it.

A document can *link* rather than embed: an ODT ``draw:image`` whose ``xlink:href``
is ``file:///etc/...`` or ``http://...``, an OOXML relationship with
``TargetMode="External"`` (linked pictures, OLE links, attached templates,
sub-documents, external workbooks), Word fields ``INCLUDETEXT``/``INCLUDEPICTURE``/
``LINK``/``DDE``, the same fields in RTF, ODF DDE connections and linked sections.
LibreOffice resolves such links while it loads the file, so a conversion could read
the worker's files into the index or make requests from the worker's network
(shared/cases R11).  This is the first of three layers (README, "The converter reads
nothing outside the document"): the others are the profile that blocks untrusted
links (:mod:`stages.office_profile`) and the sandbox (:mod:`stages.sandbox`).

:func:`strip_external_references` writes a copy without those references and names
what it removed; hyperlinks (``text:a``, relationships of type ``hyperlink``) are
kept, since they are text a reader clicks, not content the converter loads.  The
binary formats (DOC, XLS, PPT) are not rewritten: the other two layers hold for them.
"""
from __future__ import annotations

import re
import zipfile
from pathlib import Path

ODF_TYPES = frozenset({"odt", "ods", "odp"})
OOXML_TYPES = frozenset({"docx", "pptx", "xlsx"})
XLINK_HREF = "{http://www.w3.org/1999/xlink}href"
_ODF_TEXT = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
_ODF_DRAW = "urn:oasis:names:tc:opendocument:xmlns:drawing:1.0"
_ODF_TABLE = "urn:oasis:names:tc:opendocument:xmlns:table:1.0"
#: ODF elements whose xlink:href is a link a reader follows, never loaded on open
_ODF_HYPERLINKS = frozenset({f"{{{_ODF_TEXT}}}a", f"{{{_ODF_DRAW}}}a",
                             f"{{{_ODF_TEXT}}}bookmark-ref"})
_XFORMS = "http://www.w3.org/2002/xforms"
#: ODF elements that are nothing but a live link to another program or file: removed.
#: An XForms model loads its instance from ``src`` (a fresh helper's attack made
#: LibreOffice fetch http:// and file:// instances into a form field of the PDF)
_ODF_LINK_ELEMENTS = frozenset({f"{{{_ODF_TEXT}}}dde-connection-decls", f"{{{_ODF_TABLE}}}dde-links",
                                f"{{{_ODF_TEXT}}}dde-connection", f"{{{_ODF_DRAW}}}applet",
                                f"{{{_ODF_DRAW}}}plugin", f"{{{_XFORMS}}}model"})
#: attribute local names that hold a location a loader may follow, in any namespace
_LOCATION_ATTRIBUTES = frozenset({"href", "src", "action", "source", "url", "location", "codebase"})
_W_NS = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
_RELS_NS = "http://schemas.openxmlformats.org/package/2006/relationships"
#: Word/RTF field codes that load another file or program's data when fields update
_LOADING_FIELDS = re.compile(r"\b(INCLUDETEXT|INCLUDEPICTURE|INCLUDE|LINK|DDEAUTO|DDE|IMPORT)\b",
                             re.IGNORECASE)
_RTF_LOADING_FIELDS = re.compile(rb"\b(INCLUDETEXT|INCLUDEPICTURE|INCLUDE|LINK|DDEAUTO|DDE|IMPORT)\b",
                                 re.IGNORECASE)
_RTF_LINK_CONTROLS = re.compile(rb"\\(objautlink|objlink|linkself)\b")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:")


def is_external(href: str) -> bool:
    """True when ``href`` points outside the package: any URI scheme (``file:``,
    ``http:``, ``smb:``, ``vnd.sun.star...``), an absolute or UNC path, or a path
    climbing out with ``..``.  Package-internal references (``Pictures/a.png``,
    ``./Object 1``, ``#bookmark``) are not."""
    from urllib.parse import unquote

    href = unquote(href.strip())
    if not href or href.startswith("#"):
        return False
    if _SCHEME.match(href) or href.startswith(("/", "\\")):
        return True
    return ".." in re.split(r"[\\/]", href)


def strip_external_references(src: Path, filetype: str, out_dir: Path) -> tuple[Path, list[str]]:
    """``(file to convert, removed)``: ``src`` itself and ``[]`` when it links to
    nothing outside itself (or its format is not rewritten here), else a copy in
    ``out_dir`` (same suffix) without those links, and one line per removed link
    (``"content.xml: draw:image file:///tmp/x.svg"``, target cut to 120 chars).

    Raises nothing of its own: a package that cannot be read is left to the
    converter, whose error names it."""
    try:
        if filetype in ODF_TYPES:
            return _rewrite_zip(src, out_dir, _strip_odf_part)
        if filetype in OOXML_TYPES:
            return _rewrite_zip(src, out_dir, _strip_ooxml_part)
        if filetype == "rtf":
            return _strip_rtf(src, out_dir)
    except (zipfile.BadZipFile, OSError, ValueError):
        return src, []
    return src, []


def _rewrite_zip(src: Path, out_dir: Path, strip_part, depth: int = 0) -> tuple[Path, list[str]]:
    removed: list[str] = []
    parts: list[tuple[zipfile.ZipInfo, bytes]] = []
    with zipfile.ZipFile(src) as zf:
        for info in zf.infolist():
            data = zf.read(info)
            if info.filename.lower().endswith(".svg"):
                new, gone = _strip_odf_part(info.filename, data)  # <image xlink:href="file:...">
            elif info.filename.endswith((".xml", ".rels")):
                new, gone = strip_part(info.filename, data)
            else:
                new, gone = _strip_nested(info.filename, data, out_dir, depth)
            if gone:
                removed.extend(f"{info.filename}: {g}" for g in gone)
                data = new
            parts.append((info, data))
    if not removed:
        return src, []
    out_dir.mkdir(parents=True, exist_ok=True)
    dst = out_dir / f"without-links-{depth}{src.suffix or '.bin'}"
    with zipfile.ZipFile(dst, "w") as out:
        for info, data in parts:  # keeps order and each part's compression (ODF: mimetype first, stored)
            out.writestr(info, data)
    return dst, removed


#: packages nested inside a package (a DOCX ``altChunk``, an embedded workbook) are
#: stripped too, down to this many levels; deeper ones are removed whole
MAX_NESTING = 3
_NESTED = {".docx": "docx", ".docm": "docx", ".dotx": "docx", ".xlsx": "xlsx", ".xlsm": "xlsx",
           ".pptx": "pptx", ".odt": "odt", ".ods": "ods", ".odp": "odp", ".rtf": "rtf"}


def _strip_nested(name: str, data: bytes, out_dir: Path, depth: int) -> tuple[bytes, list[str]]:
    """A package or RTF file stored as a part (``word/afchunk.docx``): stripped like
    the outer file (``depth`` levels in), its part replaced by the result."""
    filetype = _NESTED.get(Path(name).suffix.lower())
    if filetype is None:
        return data, []
    if depth >= MAX_NESTING:
        return b"", [f"nested part deeper than {MAX_NESTING} levels removed"]
    work = out_dir / f"nested-{depth}"
    work.mkdir(parents=True, exist_ok=True)
    inner = work / f"part{Path(name).suffix.lower()}"
    inner.write_bytes(data)
    try:
        if filetype == "rtf":
            stripped, gone = _strip_rtf(inner, work)
        else:
            strip_part = _strip_odf_part if filetype in ODF_TYPES else _strip_ooxml_part
            stripped, gone = _rewrite_zip(inner, work, strip_part, depth + 1)
    except (zipfile.BadZipFile, OSError, ValueError):
        return data, []
    return stripped.read_bytes(), gone


def _parse(data: bytes):
    from lxml import etree

    parser = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False)
    return etree.fromstring(data, parser)


def _serialise(root) -> bytes:
    from lxml import etree

    return etree.tostring(root, xml_declaration=True, encoding="UTF-8", standalone=True)


def _short(text: str) -> str:
    return text if len(text) <= 120 else text[:117] + "..."


def _strip_odf_part(name: str, data: bytes) -> tuple[bytes, list[str]]:
    from lxml import etree

    try:
        root = _parse(data)
    except etree.XMLSyntaxError:
        return data, []
    gone: list[str] = []
    for el in list(root.iter()):
        if not isinstance(el.tag, str):
            continue
        if el.tag in _ODF_LINK_ELEMENTS or (etree.QName(el).localname == "model"
                                            and "xforms" in (etree.QName(el).namespace or "").lower()):
            gone.append(etree.QName(el).localname)
            parent = el.getparent()
            if parent is not None:
                parent.remove(el)
            continue
        if el.tag in _ODF_HYPERLINKS:
            continue
        for attr, value in list(el.attrib.items()):
            if etree.QName(attr).localname in _LOCATION_ATTRIBUTES and is_external(value):
                gone.append(f"{etree.QName(el).localname} {_short(value)}")
                del el.attrib[attr]
    if root.getroottree().docinfo.internalDTD is not None:
        gone.append("DOCTYPE (attribute defaults) removed")
    return (_serialise(root) if gone else data), gone


def _strip_ooxml_part(name: str, data: bytes) -> tuple[bytes, list[str]]:
    from lxml import etree

    if name.endswith(".rels"):
        try:
            root = _parse(data)
        except etree.XMLSyntaxError:
            return data, []
        gone = []
        for rel in list(root):
            if rel.get("TargetMode") == "External" and not (rel.get("Type") or "").endswith("/hyperlink"):
                gone.append(f"{(rel.get('Type') or '').rsplit('/', 1)[-1]} {_short(rel.get('Target') or '')}")
                root.remove(rel)
        return (_serialise(root) if gone else data), gone
    if b"instr" not in data:  # no field code in this part
        return data, []
    try:
        root = _parse(data)
    except etree.XMLSyntaxError:
        return data, []
    gone = []
    for el in root.iter(f"{{{_W_NS}}}instrText"):
        if el.text and _LOADING_FIELDS.search(el.text):
            gone.append(f"field {_short(el.text.strip())}")
            el.text = " "
    attr = f"{{{_W_NS}}}instr"
    for el in root.iter(f"{{{_W_NS}}}fldSimple"):
        if _LOADING_FIELDS.search(el.get(attr) or ""):
            gone.append(f"field {_short(el.get(attr).strip())}")
            el.set(attr, " ")
    return (_serialise(root) if gone else data), gone


def _strip_rtf(src: Path, out_dir: Path) -> tuple[Path, list[str]]:
    """Neutralise loading field codes inside ``\\fldinst`` groups and the controls of
    linked objects; the fields' cached results (``\\fldrslt``) stay as text."""
    data = src.read_bytes()
    gone: list[str] = []

    def fldinst(match: re.Match) -> bytes:
        body = match.group(0)
        new, n = _RTF_LOADING_FIELDS.subn(b"PRIVATE", body)
        if n:
            gone.append(f"field {_short(body.decode('latin-1')[:120])}")
        return new

    new = re.sub(rb"\\fldinst[^{}]*(?:\{[^{}]*\}[^{}]*)*", fldinst, data)
    new, links = _RTF_LINK_CONTROLS.subn(b"objemb", new)
    if links:
        gone.append(f"{links} linked object control(s)")
    if not gone:
        return src, []
    out_dir.mkdir(parents=True, exist_ok=True)
    dst = out_dir / f"without-links{src.suffix or '.rtf'}"
    dst.write_bytes(new)
    return dst, gone
