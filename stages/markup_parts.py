"""Units of HTML, plain-text and Markdown documents for ``stages.document_parts``:
an HTML spine's child elements, a text's paragraphs (never split inside a Markdown
fenced code block); their weights (characters) and a file holding a range of them.

``html_weights`` / ``text_weights_of(filetype)`` return one int per unit, in reading
order, and raise ValueError for an empty HTML document (OSError when unreadable);
``cut_html`` / ``cut_text_of(filetype)`` write units ``first..last`` (1-based,
inclusive; the caller checks the range) to ``out`` and return ``(0, None)``: these
types have no pages of their own.
"""
from __future__ import annotations

import re
from pathlib import Path

# ------------------------------------------------------------------ HTML
_XML_DECLARATION = re.compile(r"^\ufeff?\s*<\?xml[^>]*>")


def _html_tree(path: Path):
    import lxml.html
    from lxml import etree

    from stages.charsets import decode_html

    text = _XML_DECLARATION.sub("", decode_html(path.read_bytes()), count=1)  # lxml refuses one in a str
    root = lxml.html.document_fromstring(text) if text.strip() else None
    if root is None:
        raise ValueError("empty HTML")
    # comments and processing instructions go, their tail text kept in place: a
    # comment's tail between two units would otherwise belong to no unit (and stay
    # in every part)
    etree.strip_tags(root, etree.Comment, etree.ProcessingInstruction)
    return root


def _html_spine(root):
    """``(spine, its element children: the units, the wrappers)``: the spine is body,
    or the first descendant with more than one element child (a page wrapped in one
    or more single divs); the wrappers are the elements from body down to the spine's
    parent."""
    node = root.find("body")
    if node is None:
        node = root
    wrappers = []
    while True:
        children = [c for c in node if isinstance(c.tag, str)]
        if len(children) != 1:
            return node, children, wrappers
        wrappers.append(node)
        node = children[0]


def html_weights(path: Path) -> list[int]:
    _, children, _ = _html_spine(_html_tree(path))
    return [len(c.text_content()) + len(c.tail or "") for c in children]


def cut_html(path: Path, first: int, last: int, out: Path) -> tuple[int, None]:
    import lxml.html

    root = _html_tree(path)
    spine, children, wrappers = _html_spine(root)
    if first > 1:  # text before the first unit (in the wrappers and the spine) is the first part's
        for node in wrappers + [spine]:
            node.text = None
    if last < len(children):  # text after the spine and after each wrapper is the last part's
        for node in wrappers[1:] + [spine]:
            node.tail = None
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
    return 0, None


# ------------------------------------------------------------------ TXT / MD
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")


def _next_fence(fence: tuple[str, int] | None, line: str) -> tuple[str, int] | None:
    """The open code fence after ``line`` (CommonMark): a run of 3+ backticks or
    tildes opens one (a backtick fence's info string has no backtick); only a run of
    the same character, at least as long, with nothing after it, closes it."""
    match = _FENCE.match(line.rstrip("\r\n"))
    if match is None:
        return fence
    run, rest = match.group(1), match.group(2)
    if fence is None:
        if run[0] == "`" and "`" in rest:
            return None  # inline code, not a fence
        return run[0], len(run)
    if run[0] == fence[0] and len(run) >= fence[1] and not rest.strip():
        return None
    return fence


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
    fence = None  # the open fence's (character, length), CommonMark: closed by the same
    for line in text.splitlines(keepends=True):
        blank = not line.strip()
        if not blank and current and not current[-1].strip() and fence is None:
            paragraphs.append("".join(current))  # decided before this line: a closing
            current = []                          # fence stays with its block
        current.append(line)
        if filetype == "md":
            fence = _next_fence(fence, line)
    if current:
        paragraphs.append("".join(current))
    return paragraphs


def text_weights_of(filetype: str):
    return lambda path: [len(p) for p in _paragraphs(path, filetype)]


def cut_text_of(filetype: str):
    def cut(path: Path, first: int, last: int, out: Path) -> tuple[int, None]:
        paragraphs = _paragraphs(path, filetype)
        out.write_text("".join(paragraphs[first - 1:last]), encoding="utf-8")
        return 0, None
    return cut

