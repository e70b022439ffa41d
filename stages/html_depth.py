"""Flatten HTML nested deeper than lxml keeps, so no text is lost to depth.

libxml2's HTML parser stops building the tree at depth 256 (2048 with
``XML_PARSE_HUGE``) and drops what lies below without an error: a paragraph inside
300 nested ``<div>``s came out as "HTML has no text content".  :func:`flatten` runs
one linear pass with the standard library's ``html.parser`` (no depth limit),
re-emitting the source unchanged except that start and end tags below
:data:`MAX_DEPTH` open elements are dropped; their text and their void elements
(``<br>``, ``<img>``...) stay where they were.  The paragraphs, tables and lists that
hold the deep text keep their own tags only while they are above the cut, so deep
text is extracted, possibly merged into one element with its deep neighbours.

:func:`install` applies it (and :func:`stages.charsets.decode_html` to HTML read from
a file) where unstructured loads every HTML it partitions
(``HtmlPartitionerOptions.html_text``): HTML files, e-mail HTML bodies and Markdown
(rendered to HTML first), so no path reaches lxml unflattened.
"""
from __future__ import annotations

from html.parser import HTMLParser

#: open elements kept; well under libxml2's 256 and Python's recursion limit
#: (unstructured walks the tree recursively)
MAX_DEPTH = 200

VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta",
                  "param", "source", "track", "wbr", "keygen", "command", "basefont", "frame",
                  "isindex", "nextid", "bgsound"})


class _Flattener(HTMLParser):
    def __init__(self, max_depth: int) -> None:
        super().__init__(convert_charrefs=False)
        self.max_depth = max_depth
        self.out: list[str] = []
        self.stack: list[tuple[str, bool]] = []  # (tag, kept)
        self.dropped = 0
        self.deepest = 0

    def handle_starttag(self, tag, attrs):
        raw = self.get_starttag_text() or f"<{tag}>"
        if tag in VOID:
            self.out.append(raw)
            return
        kept = len(self.stack) < self.max_depth
        self.stack.append((tag, kept))
        self.deepest = max(self.deepest, len(self.stack))
        if kept:
            self.out.append(raw)
        else:
            self.dropped += 1

    def handle_startendtag(self, tag, attrs):
        self.out.append(self.get_starttag_text() or f"<{tag}/>")

    def handle_endtag(self, tag):
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag:
                kept = self.stack[i][1]
                del self.stack[i:]
                if kept:
                    self.out.append(f"</{tag}>")
                return
        self.out.append(f"</{tag}>")  # stray end tag: left for lxml to ignore

    def handle_data(self, data):
        self.out.append(data)

    def handle_entityref(self, name):
        self.out.append(f"&{name};")

    def handle_charref(self, name):
        self.out.append(f"&#{name};")

    def handle_comment(self, data):
        self.out.append(f"<!--{data}-->")

    def handle_decl(self, decl):
        self.out.append(f"<!{decl}>")

    def handle_pi(self, data):
        self.out.append(f"<?{data}>")

    def unknown_decl(self, data):
        self.out.append(f"<![{data}]>")


def flatten(html: str, max_depth: int = MAX_DEPTH) -> tuple[str, int]:
    """Return ``(html', deepest)``: ``html`` with tags nested deeper than ``max_depth``
    open elements removed (text kept), and the deepest nesting seen.

    When nothing is that deep, ``html`` itself is returned unchanged.
    """
    parser = _Flattener(max_depth)
    parser.feed(html)
    parser.close()
    if not parser.dropped:
        return html, parser.deepest
    return "".join(parser.out), parser.deepest


_installed = False


def install() -> None:
    """Flatten every HTML unstructured partitions, and decode HTML files by their
    declared charset (idempotent; call in the parse process before partitioning)."""
    global _installed
    if _installed:
        return
    from unstructured.partition.html.partition import HtmlPartitionerOptions
    from unstructured.utils import lazyproperty

    from stages.charsets import decode_html

    original = HtmlPartitionerOptions.__dict__["html_text"]

    def html_text(self) -> str:
        if self._file_path and not self._encoding:
            with open(self._file_path, "rb") as fh:
                text = decode_html(fh.read())
        else:
            text = original.__get__(self, type(self))
        return flatten(text)[0] if text else text

    HtmlPartitionerOptions.html_text = lazyproperty(html_text)
    _installed = True
