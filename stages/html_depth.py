"""Flatten HTML nested deeper than lxml keeps, so no text is lost to depth.

libxml2's HTML parser stops building the tree at depth 256 (2048 with
``XML_PARSE_HUGE``) and drops what lies below without an error: a paragraph inside
300 nested ``<div>``s came out as "HTML has no text content".  :func:`flatten` runs
one linear pass with the standard library's ``html.parser`` (no depth limit),
re-emitting the source unchanged except that, below :data:`MAX_DEPTH` kept open
elements, wrapper tags (``<div>``, ``<span>``, ``<section>``...) are dropped while
content tags (headings, paragraphs, list items, table cells: :data:`CONTENT`) are
kept for :data:`CONTENT_SLACK` more levels; their text and void elements (``<br>``,
``<img>``...) stay where they were.  So a heading and a paragraph under 300 ``<div>``s
come out as a Title and a NarrativeText.  Only content nested deeper still (1,000
nested ``<blockquote>``s) loses its tags; a dropped block-level tag leaves a
newline, so its text never runs into its neighbour's ("Quarterly ReportDEEPMARKER"
was one unsearchable word before).

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
#: further levels kept for :data:`CONTENT` tags only (MAX_DEPTH + this < 256)
CONTENT_SLACK = 40

#: tags that carry text structure unstructured maps to elements (kept past MAX_DEPTH)
CONTENT = frozenset({"h1", "h2", "h3", "h4", "h5", "h6", "p", "li", "ul", "ol", "dl", "dt", "dd",
                     "table", "thead", "tbody", "tfoot", "tr", "td", "th", "caption", "pre",
                     "blockquote", "title", "a", "b", "strong", "i", "em", "code"})

#: tags whose boundary separates words: dropping one leaves a newline in its place
BLOCK = frozenset({"address", "article", "aside", "blockquote", "body", "caption", "center", "dd",
                   "details", "dialog", "dir", "div", "dl", "dt", "fieldset", "figcaption", "figure",
                   "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hgroup", "li",
                   "main", "menu", "nav", "ol", "p", "pre", "section", "summary", "table", "tbody",
                   "td", "tfoot", "th", "thead", "tr", "ul"})

VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta",
                  "param", "source", "track", "wbr", "keygen", "command", "basefont", "frame",
                  "isindex", "nextid", "bgsound"})


class _Flattener(HTMLParser):
    def __init__(self, max_depth: int) -> None:
        super().__init__(convert_charrefs=False)
        self.max_depth = max_depth
        self.out: list[str] = []
        self.stack: list[tuple[str, bool]] = []  # (tag, kept)
        self.kept_depth = 0  # kept open elements: what libxml2 will nest
        self.dropped = 0
        self.deepest = 0

    def handle_starttag(self, tag, attrs):
        raw = self.get_starttag_text() or f"<{tag}>"
        if tag in VOID:
            self.out.append(raw)
            return
        kept = self.kept_depth < self.max_depth or (
            tag in CONTENT and self.kept_depth < self.max_depth + CONTENT_SLACK)
        self.stack.append((tag, kept))
        self.deepest = max(self.deepest, len(self.stack))
        if kept:
            self.kept_depth += 1
            self.out.append(raw)
        else:
            self.dropped += 1
            if tag in BLOCK:
                self.out.append("\n")

    def handle_startendtag(self, tag, attrs):
        self.out.append(self.get_starttag_text() or f"<{tag}/>")

    def handle_endtag(self, tag):
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag:
                kept = self.stack[i][1]
                self.kept_depth -= sum(1 for _, k in self.stack[i:] if k)
                del self.stack[i:]
                if kept:
                    self.out.append(f"</{tag}>")
                elif tag in BLOCK:
                    self.out.append("\n")
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
    """Return ``(html', deepest)``: ``html`` with wrapper tags nested deeper than
    ``max_depth`` kept open elements, and content tags deeper than ``max_depth +
    CONTENT_SLACK``, removed (text kept, a newline for each dropped block tag), and
    the deepest nesting seen.

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
