#!/usr/bin/env python
"""Build the GPU Triton model repository from ``triton/gpu/`` and check it.

``triton/gpu/`` holds the configurations and the tokenizer code only; the model files
are export products (gitignored).  Served as it is, Triton finds no ``model.onnx`` and,
since one model failing to load stops ``tritonserver``, never becomes ready.  This
script writes a complete repository to ``--output`` (default
``triton/gpu-repository/``, gitignored; compose mounts it, the Kubernetes PVC is
filled from it, ``triton/Dockerfile.gpu`` bakes it into an image):

- every configuration of ``triton/gpu/*/config.pbtxt`` and the Python models' code;
- ``embedder_onnx/1/model.onnx``: ``--embedder-onnx FILE`` (its ``tokenizer.json``
  beside it), or exported by ``triton/export_embedder.py`` (about 10 s on 2 cores);
  the same file for ``embedder_online_onnx`` (the API's query model), and
  ``tokenizer.json`` for ``embedder_tokenizer``;
- the reranker (``reranker``, ``reranker_onnx``, ``reranker_tokenizer``) only with
  ``--reranker-from DIR`` (a cross-encoder, exported by ``triton/export_reranker.py``):
  no such weights can be downloaded here, and without them the models are left out,
  so Triton serves the embedders and search falls back to reciprocal rank fusion, as
  on the embedded stack.

Then it checks the result (``--check DIR`` checks an existing repository): every
configuration parses as Triton's ``ModelConfig`` and names its directory; every
ensemble step names a model of the repository and maps only tensors that model
has; every ONNX model loads in ONNX Runtime with the inputs and outputs its
configuration declares; every Python model has its ``model.py``, and a tokenizer
model's ``tokenizer.json`` loads.  Exit status 0 when the repository is complete, 1
with one line per problem otherwise.

Usage::

    .venv/bin/python triton/build_gpu_repository.py [--output DIR] [--embedder-onnx FILE]
                                                     [--reranker-from DIR]
    .venv/bin/python triton/build_gpu_repository.py --check DIR
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "gpu"
DEFAULT_OUTPUT = HERE / "gpu-repository"
RERANKER_MODELS = ("reranker", "reranker_onnx", "reranker_tokenizer")
#: ONNX models and the exported file each one serves
EMBEDDER_ONNX = ("embedder_onnx", "embedder_online_onnx")


def _read_config(path: Path):
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2

    return text_format.Parse(path.read_text(), model_config_pb2.ModelConfig())


def _tensors(config) -> tuple[set[str], set[str]]:
    return {t.name for t in config.input}, {t.name for t in config.output}


def _check_onnx(model_dir: Path, config) -> list[str]:
    import onnxruntime

    path = model_dir / "1" / "model.onnx"
    if not path.is_file():
        return [f"{model_dir.name}: 1/model.onnx is missing"]
    try:
        session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    except Exception as exc:  # noqa: BLE001 - any load failure is the finding
        return [f"{model_dir.name}: 1/model.onnx does not load ({type(exc).__name__}: {str(exc)[:200]})"]
    problems = []
    inputs, outputs = _tensors(config)
    have_in = {i.name for i in session.get_inputs()}
    have_out = {o.name for o in session.get_outputs()}
    if inputs != have_in:
        problems.append(f"{model_dir.name}: config inputs {sorted(inputs)} != model inputs {sorted(have_in)}")
    if not outputs <= have_out:
        problems.append(f"{model_dir.name}: config outputs {sorted(outputs - have_out)} not in the model")
    return problems


def _check_python(model_dir: Path) -> list[str]:
    if not (model_dir / "1" / "model.py").is_file():
        return [f"{model_dir.name}: 1/model.py is missing"]
    if "tokenizer" not in model_dir.name:
        return []
    tokenizer = model_dir / "1" / "tokenizer.json"
    if not tokenizer.is_file():
        return [f"{model_dir.name}: 1/tokenizer.json is missing"]
    from tokenizers import Tokenizer

    try:
        Tokenizer.from_file(str(tokenizer)).encode("a test sentence")
    except Exception as exc:  # noqa: BLE001
        return [f"{model_dir.name}: 1/tokenizer.json does not load ({type(exc).__name__}: {str(exc)[:200]})"]
    return []


def check_repository(repo: Path) -> list[str]:
    """One line per problem of the Triton model repository ``repo`` (module
    docstring); ``[]`` when it is complete."""
    configs = {}
    problems = []
    for config_path in sorted(repo.glob("*/config.pbtxt")):
        name = config_path.parent.name
        try:
            configs[name] = _read_config(config_path)
        except Exception as exc:  # noqa: BLE001 - text_format.ParseError and friends
            problems.append(f"{name}: config.pbtxt does not parse ({str(exc)[:200]})")
            continue
        if configs[name].name != name:
            problems.append(f"{name}: config names the model {configs[name].name!r}")
    if not configs:
        return [f"{repo}: no model configurations"]
    for name, config in configs.items():
        model_dir = repo / name
        if config.platform == "ensemble":
            for step in config.ensemble_scheduling.step:
                target = configs.get(step.model_name)
                if target is None:
                    problems.append(f"{name}: step model {step.model_name!r} is not in the repository")
                    continue
                inputs, outputs = _tensors(target)
                for key in step.input_map:
                    if key not in inputs:
                        problems.append(f"{name}: {step.model_name} has no input {key!r}")
                for key in step.output_map:
                    if key not in outputs:
                        problems.append(f"{name}: {step.model_name} has no output {key!r}")
        elif config.backend == "onnxruntime":
            problems += _check_onnx(model_dir, config)
        elif config.backend == "python":
            problems += _check_python(model_dir)
        else:
            problems.append(f"{name}: unexpected backend {config.backend or config.platform!r}")
    return problems


def _export_embedder(target: Path) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, str(HERE / "export_embedder.py"), "--output", str(target)], check=True)
    return target


def build(output: Path, embedder_onnx: Path | None, reranker_from: Path | None) -> list[str]:
    """Write the repository to ``output`` (replacing it); returns the models left out."""
    if output.exists():
        shutil.rmtree(output)
    left_out = [] if reranker_from else list(RERANKER_MODELS)
    for model_dir in sorted(SOURCE.glob("*/config.pbtxt")):
        name = model_dir.parent.name
        if name in left_out:
            continue
        shutil.copytree(model_dir.parent, output / name,
                        ignore=shutil.ignore_patterns("__pycache__", "*.onnx", "tokenizer.json"))
    onnx = output / "embedder_onnx" / "1" / "model.onnx"
    if embedder_onnx:
        onnx.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(embedder_onnx, onnx)
        shutil.copyfile(embedder_onnx.parent / "tokenizer.json", onnx.parent / "tokenizer.json")
    else:
        _export_embedder(onnx)
    for name in EMBEDDER_ONNX[1:]:
        (output / name / "1").mkdir(parents=True, exist_ok=True)
        shutil.copyfile(onnx, output / name / "1" / "model.onnx")
    shutil.copyfile(onnx.parent / "tokenizer.json", output / "embedder_tokenizer" / "1" / "tokenizer.json")
    if reranker_from:
        rerank = output / "reranker_onnx" / "1"
        subprocess.run([sys.executable, str(HERE / "export_reranker.py"), "--from", str(reranker_from),
                        "--output-dir", str(rerank)], check=True)
        shutil.copyfile(rerank / "tokenizer.json", output / "reranker_tokenizer" / "1" / "tokenizer.json")
    return left_out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    p.add_argument("--embedder-onnx", type=Path, help="an exported embedder model.onnx (tokenizer.json beside it)")
    p.add_argument("--reranker-from", type=Path, help="a local cross-encoder directory")
    p.add_argument("--check", type=Path, help="only check this repository")
    args = p.parse_args(argv)
    repo = args.check or args.output
    if not args.check:
        left_out = build(args.output, args.embedder_onnx, args.reranker_from)
        if left_out:
            print(f"left out (no --reranker-from): {', '.join(left_out)}")
    problems = check_repository(repo)
    for line in problems:
        print(f"problem: {line}")
    models = sorted(d.parent.name for d in repo.glob("*/config.pbtxt"))
    print(f"repository {repo}: {len(models)} models ({', '.join(models)}), "
          f"{'complete' if not problems else f'{len(problems)} problem(s)'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
