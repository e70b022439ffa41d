"""unstructured's tesseract OCR agent, with one tesseract run per page image instead of two.

unstructured's ``OCRAgentTesseract.get_layout_elements_from_image`` (the ``ocr_only``
path) runs tesseract twice on the same image: once for hOCR (word boxes, with
per-character confidences) and once more with ``image_to_string`` for the text
it groups those boxes by.  Both outputs come from the same recognition, and
tesseract writes several renderers from one run (``tesseract IMG OUT hocr txt``,
``unstructured_pytesseract.run_and_get_multiple_output``).  :class:`SinglePassTesseract`
asks for both at once and otherwise follows the upstream method step for step:
the same character-confidence filter, and when the text height is outside
tesseract's preferred range, the same zoom and a second hOCR-only run on the
zoomed image, its boxes grouped by the first run's text (as upstream).

Measured on the shared corpus' scans (2-core VM, other jobs running):
``double-column-A.jpg`` two runs of ~3.5 s each → one; ``loremipsum-flat.pdf``
(zoomed) three runs → two.  ``tests/test_ocr_agent.py`` checks that both agents give
the same elements.

unstructured picks its agent from ``OCR_AGENT`` among the modules listed in
``OCR_AGENT_MODULES_WHITELIST``; :func:`use_single_pass_tesseract` sets both
(``stages.offline_nlp.ensure_offline_nlp`` calls it before every partition), unless
the environment already chose another agent.
"""
from __future__ import annotations

import os
import sys

AGENT = "stages.ocr_agent.SinglePassTesseract"
UPSTREAM_MODULES = ("unstructured.partition.utils.ocr_models.tesseract_ocr,"
                    "unstructured.partition.utils.ocr_models.paddle_ocr,"
                    "unstructured.partition.utils.ocr_models.google_vision_ocr")


def use_single_pass_tesseract() -> None:
    """Make :class:`SinglePassTesseract` unstructured's OCR agent in this process
    (idempotent; an ``OCR_AGENT`` chosen by the environment is left alone).

    Sets ``OCR_AGENT`` and lists this module in unstructured's agent whitelist: in
    the ``OCR_AGENT_MODULES_WHITELIST`` variable when unstructured's constants are
    not loaded yet, else in the list they were loaded into (read once at import, so
    the variable alone would come too late in a process that imported unstructured
    first).  This is the one place ragstream touches that setting."""
    if os.environ.get("OCR_AGENT", AGENT) != AGENT:
        return
    os.environ["OCR_AGENT"] = AGENT
    module = AGENT.rsplit(".", 1)[0]
    loaded = sys.modules.get("unstructured.partition.utils.constants")
    if loaded is not None:
        if module not in loaded.OCR_AGENT_MODULES_WHITELIST:
            loaded.OCR_AGENT_MODULES_WHITELIST.append(module)
        return
    allowed = os.environ.get("OCR_AGENT_MODULES_WHITELIST", UPSTREAM_MODULES)
    if module not in allowed.split(","):
        os.environ["OCR_AGENT_MODULES_WHITELIST"] = f"{allowed},{module}"


def uncompressed(image):
    """``image`` (PIL) as a copy that unstructured_pytesseract hands to tesseract as a
    PPM/PGM file instead of a PNG: the same pixels, without the PNG compression, which
    took 0.5 s of a 2.6 s OCR'd page (``loremipsum-flat.pdf``, cProfile, 2026-12-02)."""
    from PIL import Image

    if "A" in image.getbands():  # as upstream's prepare: transparent → white, not black
        background = Image.new("RGB", image.size, (255, 255, 255))
        background.paste(image, (0, 0), image.getchannel("A"))
        image = background
    copy = image.convert("L") if image.mode in ("1", "L", "I", "F") else image.convert("RGB")
    copy.format = "PPM"
    return copy


def _agent_class():
    """Define the subclass lazily: importing unstructured here would read the
    whitelist before :func:`use_single_pass_tesseract` could set it."""
    import numpy as np
    import unstructured_pytesseract
    from unstructured.partition.pdf_image.inference_utils import build_layout_elements_from_ocr_regions
    from unstructured.partition.utils.config import env_config
    from unstructured.partition.utils.constants import (IMAGE_COLOR_DEPTH, TESSERACT_MAX_SIZE,
                                                        TESSERACT_TEXT_HEIGHT)
    from unstructured.partition.utils.ocr_models.tesseract_ocr import OCRAgentTesseract, zoom_image

    class _SinglePassTesseract(OCRAgentTesseract):
        """``OCRAgentTesseract`` whose ``get_layout_elements_from_image`` runs
        tesseract once for hOCR + text (twice when the page needs a zoom)."""

        def _hocr_frame(self, hocr):
            return self.hocr_to_dataframe(
                hocr, env_config.TESSERACT_CHARACTER_CONFIDENCE_THRESHOLD).dropna()

        def get_layout_elements_from_image(self, image):
            hocr, text = unstructured_pytesseract.run_and_get_multiple_output(
                uncompressed(image), extensions=["hocr", "txt"], lang=self.language,
                extra_config="-c hocr_char_boxes=1")
            frame, zoom = self._hocr_frame(hocr), 1
            height = frame[TESSERACT_TEXT_HEIGHT].quantile(env_config.TESSERACT_TEXT_HEIGHT_QUANTILE)
            if height < env_config.TESSERACT_MIN_TEXT_HEIGHT or height > env_config.TESSERACT_MAX_TEXT_HEIGHT:
                # upstream's zoom, to the letter (tesseract_ocr.get_layout_from_image)
                max_zoom = max(0, np.round(np.sqrt(TESSERACT_MAX_SIZE / np.prod(image.size)
                                                   / IMAGE_COLOR_DEPTH), 1))
                zoom = min(np.round(env_config.TESSERACT_OPTIMUM_TEXT_HEIGHT / height, 1), max_zoom)
                frame = self.image_to_data_with_character_confidence_filter(
                    uncompressed(zoom_image(image, zoom)), lang=self.language,
                    character_confidence_threshold=env_config.TESSERACT_CHARACTER_CONFIDENCE_THRESHOLD,
                ).dropna()
            return build_layout_elements_from_ocr_regions(
                ocr_regions=self.parse_data(frame, zoom=zoom), ocr_text=text, group_by_ocr_text=True)

    _SinglePassTesseract.__name__ = _SinglePassTesseract.__qualname__ = "SinglePassTesseract"
    return _SinglePassTesseract


def __getattr__(name: str):
    """``SinglePassTesseract``, built on first access (see :func:`_agent_class`)."""
    if name == "SinglePassTesseract":
        cls = _agent_class()
        globals()[name] = cls
        return cls
    raise AttributeError(name)
