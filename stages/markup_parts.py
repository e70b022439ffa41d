"""Units of HTML, plain-text and Markdown documents for ``stages.document_parts``:
an HTML spine's child elements, a text's paragraphs (never split inside a Markdown
fenced code block); their weights (characters) and a file holding a range of them.

``html_weights`` / ``text_weights_of(filetype)`` return one int per unit, in reading
order, and raise ValueError for an empty HTML document (OSError when unreadable);
``cut_html`` / ``cut_text_of(filetype)`` write units ``first..last`` (1-based,
inclusive; the caller checks the range) to ``out`` and return 0: these types have
no pages of their own.
"""
from __future__ import annotations

import re
from pathlib import Path

# ------------------------------------------------------------------ HTML
_XML_DECLARATION = re.compile(r"^\ufeff?\s*<\?xml[^>]*>")


def _html_tree(path: Path):
    import lxml.html

    from stages.charsets import decode_html

    text = _XML_DECLARATION.sub("", decode_html(path.read_bytes()), count=1)  # lxml refuses one in a str
    root = lxml.html.document_fromstring(text) if text.strip() else None
    if root is None:
        raise ValueError("empty HTML")
    return root


def _html_spine(root):
    """The element whose children are the units: body, or the first descendant with
    more than one element child (a page wrapped in one or more single divs)."""
    node = root.find("body")
    if node is None:
        node = root
    while True:
        children = [c for c in node if isinstance(c.tag, str)]
        if len(children) != 1:
            return node, children
        node = children[0]


def html_weights(path: Path) -> list[int]:
    _, children = _html_spine(_html_tree(path))
    return [len(c.text_content()) + len(c.tail or "") for c in children]


def cut_html(path: Path, first: int, last: int, out: Path) -> int:
    import lxml.html

    root = _html_tree(path)
    spine, children = _html_spine(root)
    if first > 1:
        spine.text = None  # text before the first unit belongs to the first part
    for c in children[:first - 1] + children[last:]:
        spine.remove(c)  # with its tail text (lxml keeps a tail on its element)
    head = root.find("head")
    if head is None:
        head = lxml.html.Element("head")
        root.insert(0, head)
    for meta in [m for m in head.iter("meta") if m.get("charset") is not None
                 or (m.get("http-equiv") or "").lower() == "content-type"]:
        meta.getparent().remove(meta)
    charset = lxml.html.Element("meta")
    charset.set("charset", "utf-8")
    head.insert(0, charset)
    out.write_bytes(lxml.html.tostring(root, encoding="utf-8", doctype="<!DOCTYPE html>"))
    return 0


# ------------------------------------------------------------------ TXT / MD
_FENCE = re.compile(r"^\s{0,3}(```|~~~)")


def _paragraphs(path: Path, filetype: str) -> list[str]:
    """Runs of lines, each ending with the blank lines after it; a blank line inside
    a Markdown fenced code block does not end one.  Joined, they give the text."""
    from stages.charsets import SNIFF_BYTES, decode_fallback, sniff_unicode

    data = path.read_bytes()
    unicode = sniff_unicode(data[:SNIFF_BYTES])
    if unicode:
        text = data.decode(unicode, errors="replace").lstrip("\ufeff")
    else:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = decode_fallback(data)
    paragraphs: list[str] = []
    current: list[str] = []
    fenced = False
    for line in text.splitlines(keepends=True):
        if filetype == "md" and _FENCE.match(line):
            fenced = not fenced
        blank = not line.strip()
        if not blank and current and not current[-1].strip() and not fenced:
            paragraphs.append("".join(current))
            current = []
        current.append(line)
    if current:
        paragraphs.append("".join(current))
    return paragraphs


def text_weights_of(filetype: str):
    return lambda path: [len(p) for p in _paragraphs(path, filetype)]


def cut_text_of(filetype: str):
    def cut(path: Path, first: int, last: int, out: Path) -> int:
        paragraphs = _paragraphs(path, filetype)
        out.write_text("".join(paragraphs[first - 1:last]), encoding="utf-8")
        return 0
    return cut

