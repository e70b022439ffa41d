"""Boxes of partitioned elements: an element's bounding box and how much of one box
lies inside another.  Shared by the PDF extras, the rule-based tables and the PDF
partitioner (boxes are ``(x0, y0, x1, y1)``, y down, in the element's coordinate
system; ``tol`` in the same units).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from unstructured.documents.elements import Element


def element_bbox(el: Element) -> tuple[float, float, float, float] | None:
    """``(x0, y0, x1, y1)`` of an element's coordinates (page pixels or points, as
    stored), or None when it has none."""
    coords = el.metadata.coordinates
    if coords is None or not coords.points:
        return None
    xs = [p[0] for p in coords.points]
    ys = [p[1] for p in coords.points]
    return min(xs), min(ys), max(xs), max(ys)


def fraction_inside(inner, outer, tol: float = 2.0) -> float:
    """Fraction of ``inner``'s area inside ``outer`` (a degenerate box counts by centre)."""
    x0, y0 = max(inner[0], outer[0] - tol), max(inner[1], outer[1] - tol)
    x1, y1 = min(inner[2], outer[2] + tol), min(inner[3], outer[3] + tol)
    area = (inner[2] - inner[0]) * (inner[3] - inner[1])
    if area <= 0:
        cx, cy = (inner[0] + inner[2]) / 2, (inner[1] + inner[3]) / 2
        return float(outer[0] - tol <= cx <= outer[2] + tol and outer[1] - tol <= cy <= outer[3] + tol)
    return max(0.0, x1 - x0) * max(0.0, y1 - y0) / area
