"""stages/ocr_agent.py: one tesseract run per page gives what unstructured's two give."""
from __future__ import annotations

import pypdfium2
import pytest
import unstructured_pytesseract.pytesseract as pytesseract_module

from stages.offline_nlp import ensure_offline_nlp
from stages.samples import generate_samples


@pytest.fixture(scope="module")
def page_images(tmp_path_factory):
    """Page 1 of the sample PDF rendered at 300 dpi (text in tesseract's preferred
    height: no zoom) and at 100 dpi (too small: upstream zooms and OCRs again)."""
    pdf, _, _ = generate_samples(tmp_path_factory.mktemp("samples"))
    doc = pypdfium2.PdfDocument(str(pdf))
    try:
        return {dpi: doc[0].render(scale=dpi / 72).to_pil().convert("RGB") for dpi in (300, 100)}
    finally:
        doc.close()


def _layout(agent, image, monkeypatch):
    """(tesseract runs, [(text, bbox)]) of ``agent`` on ``image``."""
    runs = []
    real = pytesseract_module.run_tesseract

    def counted(*args, **kwargs):
        runs.append(kwargs.get("extension"))
        return real(*args, **kwargs)

    monkeypatch.setattr(pytesseract_module, "run_tesseract", counted)
    elements = agent.get_layout_elements_from_image(image)
    monkeypatch.setattr(pytesseract_module, "run_tesseract", real)
    return runs, list(zip(elements.texts, elements.element_coords.tolist()))


@pytest.mark.parametrize("dpi, upstream_runs, our_runs", [(300, 2, 1), (100, 3, 2)])
def test_single_pass_agent_matches_upstream(page_images, monkeypatch, dpi, upstream_runs, our_runs):
    from unstructured.partition.utils.ocr_models.tesseract_ocr import OCRAgentTesseract

    from stages.ocr_agent import SinglePassTesseract

    image = page_images[dpi]
    theirs_runs, theirs = _layout(OCRAgentTesseract("eng"), image, monkeypatch)
    ours_runs, ours = _layout(SinglePassTesseract("eng"), image, monkeypatch)
    assert len(theirs_runs) == upstream_runs and len(ours_runs) == our_runs
    assert ours == theirs
    assert any("Riverside" in text for text, _ in ours)


def test_partition_uses_the_single_pass_agent():
    """Whatever imported unstructured first, partitioning OCRs with our agent."""
    from unstructured.partition.utils.ocr_models.ocr_interface import OCRAgent

    ensure_offline_nlp()
    assert type(OCRAgent.get_agent("eng")).__name__ == "SinglePassTesseract"


def test_uncompressed_keeps_pixels_and_whitens_transparency():
    """The image handed to tesseract is PPM (no PNG compression) with the same pixels;
    a transparent pixel becomes white, as upstream's prepare does."""
    from PIL import Image

    from stages.ocr_agent import uncompressed

    rgba = Image.new("RGBA", (4, 2), (10, 20, 30, 255))
    rgba.putpixel((0, 0), (0, 0, 0, 0))
    out = uncompressed(rgba)
    assert out.format == "PPM" and out.mode == "RGB"
    assert out.getpixel((0, 0)) == (255, 255, 255) and out.getpixel((1, 1)) == (10, 20, 30)
    gray = uncompressed(Image.new("L", (3, 3), 77))
    assert gray.mode == "L" and gray.getpixel((2, 2)) == 77
