"""The GPU Triton model repository (triton/build_gpu_repository.py; issue 27 finding 1):
``triton/gpu/`` alone is incomplete (configurations without model files: Triton would
never become ready); the build writes a complete repository with every model the
code asks Triton for, and the check finds each kind of hole.  ONNX models load in
ONNX Runtime on the CPU here; the GPU run is bench/gpu_check.py's, on a GPU machine."""
from __future__ import annotations

import runpy
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "triton" / "build_gpu_repository.py"
check_repository = runpy.run_path(str(SCRIPT))["check_repository"]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """A repository built from the exported CPU embedder (exported now if missing)."""
    from adapters.embedder import DEFAULT_ONNX_PATH, export_onnx

    onnx = DEFAULT_ONNX_PATH if DEFAULT_ONNX_PATH.is_file() else export_onnx(DEFAULT_ONNX_PATH)
    out = tmp_path_factory.mktemp("gpu") / "repository"
    run = subprocess.run([sys.executable, str(SCRIPT), "--output", str(out), "--embedder-onnx", str(onnx)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "complete" in run.stdout and "left out (no --reranker-from): reranker" in run.stdout
    return out


def test_the_source_folder_alone_is_not_a_repository_triton_could_serve():
    problems = check_repository(ROOT / "triton" / "gpu")
    assert any("embedder_onnx: 1/model.onnx is missing" in p for p in problems), problems


def test_the_built_repository_is_complete_and_serves_what_the_code_asks_for(built):
    assert check_repository(built) == []
    models = {d.name for d in built.iterdir() if (d / "config.pbtxt").is_file()}
    # the embed stage's batch model and the API's query model (search/query.embed_query)
    assert {"embedder", "embedder_online"} <= models
    assert "embedder_online" in (ROOT / "search" / "query.py").read_text()


@pytest.mark.parametrize("breaks, says", [
    (lambda r: (r / "embedder_tokenizer" / "1" / "tokenizer.json").unlink(), "tokenizer.json is missing"),
    (lambda r: (r / "embedder_tokenizer" / "1" / "tokenizer.json").write_text("{not json"), "does not load"),
    (lambda r: shutil.rmtree(r / "embedder_online_onnx"), "'embedder_online_onnx' is not in the repository"),
    (lambda r: (r / "embedder_onnx" / "config.pbtxt").write_text(
        (r / "embedder_onnx" / "config.pbtxt").read_text().replace('"attention_mask"', '"mask"', 1)),
     "config inputs"),
    (lambda r: (r / "embedder" / "config.pbtxt").write_text("name: [broken"), "does not parse"),
    (lambda r: (r / "embedder_onnx" / "1" / "model.onnx").write_bytes(b"not onnx"), "does not load"),
])
def test_the_check_finds_each_kind_of_hole(built, tmp_path, breaks, says):
    repo = tmp_path / "repo"
    shutil.copytree(built, repo)
    breaks(repo)
    problems = check_repository(repo)
    assert any(says in p for p in problems), problems
    out = subprocess.run([sys.executable, str(SCRIPT), "--check", str(repo)], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 1 and says in out.stdout
