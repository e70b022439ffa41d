"""Bounded, linear-time use of spaCy by unstructured's element classification.

unstructured classifies every text element (narrative text, title...) with
``unstructured.partition.text_type``, which calls ``sent_tokenize``, ``word_tokenize``
and ``pos_tag`` — each a separate full spaCy pipeline run over the whole element text.
Measured on a 200 KB plain-text file (428 paragraphs): 200 s, 99 % of it in spaCy, three
runs per paragraph; a 20 MB TXT ran past 600 s, and one 10-million-character line failed
with spaCy's "[E088] Text of length 10000000 exceeds maximum of 1000000".

:func:`install` (idempotent, per process) replaces ``tokenize._process`` (the one
function the three call) with one that

* looks at no more than :data:`NLP_MAX_CHARS` characters of a text (cut at a space;
  the classification only needs the first sentences: a title is short, two sentences
  make narrative text), so spaCy's maximum is never reached and the cost of one
  element is bounded;
* runs the pipeline once per distinct text (an LRU cache shared by the three calls);
* hands spaCy cleaned text (``stages.text_hygiene``: its tokenizer hashes strict
  UTF-8 and a lone surrogate made unstructured drop a PDF's whole text layer);
* leaves out the components nothing reads (``ner``, ``lemmatizer``: unstructured
  reads ``token.text``, ``token.tag_`` and ``doc.sents``).
"""
from __future__ import annotations

from functools import lru_cache

from stages.text_hygiene import clean_text

#: characters of one text given to spaCy (its own maximum is 1,000,000)
NLP_MAX_CHARS = 5_000
UNUSED_PIPES = ("ner", "lemmatizer")

_installed = False


def bounded(text: str, limit: int = NLP_MAX_CHARS) -> str:
    """``text`` cut to at most ``limit`` characters, at the last whitespace if there is one
    in the second half of the cut."""
    if len(text) <= limit:
        return text
    cut = text[:limit]
    space = max(cut.rfind(" "), cut.rfind("\n"))
    return cut[:space] if space > limit // 2 else cut


def install() -> None:
    """Patch unstructured's spaCy entry point (see the module doc); needs
    ``stages.offline_nlp.ensure_offline_nlp()`` to have chosen the model first."""
    global _installed
    if _installed:
        return
    import unstructured.nlp.tokenize as tokenize

    get_nlp = tokenize._get_nlp
    prepared = []

    def _nlp():
        nlp = get_nlp()
        if not prepared:
            for name in UNUSED_PIPES:
                if name in nlp.pipe_names:
                    nlp.disable_pipe(name)
            prepared.append(True)
        return nlp

    @lru_cache(maxsize=256)
    def _process(text: str):
        return _nlp()(clean_text(bounded(str(text))))

    tokenize._process = _process
    _installed = True
