# The ragstream image for production (docker-compose.yml, Kubernetes): one image,
# one process type per container (see Procfile).  Not buildable on the development
# machines (no Docker engine); the embedded stack runs the same code paths.
FROM python:3.11-slim-bookworm
ENV DO_NOT_TRACK=1 PIP_NO_CACHE_DIR=1 PYTHONUNBUFFERED=1
RUN apt-get update && apt-get install -y --no-install-recommends \
        libmagic1 tesseract-ocr tesseract-ocr-eng poppler-utils libreoffice-core libreoffice-writer \
        libreoffice-calc libreoffice-impress libgl1 libglib2.0-0 bubblewrap \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY pyproject.toml README.md ./
COPY requirements/ requirements/
COPY schemas/ schemas/
COPY topics/ topics/
COPY agents/ agents/
COPY stages/ stages/
COPY adapters/ adapters/
COPY streams/ streams/
COPY api/ api/
COPY cli/ cli/
COPY mcp_server/ mcp_server/
COPY devstack/ devstack/
COPY search/ search/
COPY drills/ drills/
COPY bench/ bench/
COPY triton/ triton/
RUN pip install --extra-index-url https://download.pytorch.org/whl/cpu -c requirements/constraints.txt . \
    && python triton/export_embedder.py --output triton/embedder/1/model.onnx
# the in-process ONNX embedder (search's fallback when Triton does not answer, and
# RAGSTREAM_EMBEDDER=onnx): the installed package lives in site-packages, where no
# triton/ is, so point it at the model exported above
ENV RAGSTREAM_EMBEDDER_ONNX_PATH=/app/triton/embedder/1/model.onnx
ENTRYPOINT ["ragstream"]
CMD ["worker"]
