"""``ragstream mcp`` end to end: the SDK's own MCP client talks to the server over
stdio (``python -m cli mcp`` as a subprocess) and over streamable HTTP, the server
talks to the real API (tests/api_helpers.py), the session worker ingests.

A document uploaded through the MCP server becomes COMPLETED (seen through its status
tool) and is found by its search tool; another project's key sees none of it; paths
outside ``--root`` and bad arguments are tool errors with a reason.
"""
from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Optional

import httpx
import pytest

from api_helpers import create_key, free_port, stop_process
from conftest import ROOT, run

pytestmark = pytest.mark.integration

TOOLS = {"search", "document_status", "list_documents", "upload_url", "upload_file"}
TEXT = ("Maintenance log of the Quillmore pumping station. The zephyrine valve on pump three "
        "seized in March and was replaced; after the repair the engineers measured a flow of "
        "412 litres per second and no vibration at the bearings.\n")
QUERY = "zephyrine valve Quillmore pumping station"
HTML = ("<html><body><h1>Brackenfold reservoir</h1><p>The Brackenfold reservoir's spillway "
        "gates are inspected every autumn by the dam safety team.</p></body></html>")


@pytest.fixture(scope="module")
def tenants(api, stack, tmp_path_factory):
    """Projects A and B with a key each, and A's upload root: ``notes/quillmore.txt``,
    a symlink to a file outside, a symlinked directory outside, and a FIFO."""
    suffix = uuid.uuid4().hex[:8]
    root = tmp_path_factory.mktemp("mcp-root")
    outside = tmp_path_factory.mktemp("mcp-outside")
    (root / "notes").mkdir()
    (root / "notes" / "quillmore.txt").write_text(TEXT)
    (outside / "secret.txt").write_text("the outside file " + TEXT)
    (root / "escape.txt").symlink_to(outside / "secret.txt")
    (root / "outdir").symlink_to(outside)
    os.mkfifo(root / "fifo")
    a, b = f"mcpa{suffix}", f"mcpb{suffix}"
    return SimpleNamespace(api=api.url, stack=stack, root=root, outside=outside,
                           a=a, key_a=create_key(a), b=b, key_b=create_key(b))


def server_env(t: SimpleNamespace, key: str) -> dict[str, str]:
    """The environment of an MCP server process: the test stack's settings and the key."""
    return {**os.environ, "RAGSTREAM_MCP_API_KEY": key, "RAGSTREAM_MCP_API_URL": t.api,
            "PYTHONUNBUFFERED": "1"}


def stdio_client(t: SimpleNamespace, key: str, root: Optional[Path]):
    """An SDK client that starts ``python -m cli mcp [--root ROOT]`` over stdio."""
    from mcp import Client, StdioServerParameters

    args = ["-m", "cli", "mcp"] + (["--root", str(root)] if root is not None else [])
    return Client(StdioServerParameters(command=sys.executable, args=args, cwd=str(ROOT),
                                        env=server_env(t, key)))


async def call(client, tool: str, **args: Any) -> dict[str, Any]:
    """A tool's structured answer; fails the test on a tool error."""
    result = await client.call_tool(tool, args)
    assert not result.is_error, f"{tool}{args}: {result.content[0].text}"
    return result.structured_content


async def refusal(client, tool: str, **args: Any) -> str:
    """A tool error's text; fails the test when the call succeeds."""
    result = await client.call_tool(tool, args)
    assert result.is_error, f"{tool}{args} succeeded: {result.structured_content}"
    return result.content[0].text


async def wait_terminal(client, document_id: str, timeout_s: float = 300) -> list[str]:
    """Poll the status tool until COMPLETED or FAILED; the statuses seen, in order."""
    seen: list[str] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status = (await call(client, "document_status", document_id=document_id))["status"]
        if not seen or seen[-1] != status:
            seen.append(status)
        if status in ("COMPLETED", "FAILED"):
            return seen
        await asyncio.sleep(0.5)
    raise TimeoutError(f"{document_id}: {seen} after {timeout_s} s")


@pytest.fixture(scope="module")
def doc_a(tenants):
    """notes/quillmore.txt uploaded by path through a stdio MCP server with A's key and
    followed to a terminal status through the status tool."""
    async def go():
        async with stdio_client(tenants, tenants.key_a, tenants.root) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            upload = await call(client, "upload_file", path="notes/quillmore.txt", category="logs")
            statuses = await wait_terminal(client, upload["document_id"])
            return SimpleNamespace(names=names, upload=upload, statuses=statuses, id=upload["document_id"])

    return run(go())


def test_stdio_upload_by_path_completes_and_is_found(tenants, doc_a):
    assert doc_a.names == TOOLS
    assert doc_a.upload["queued"] and doc_a.upload["version"] == 1
    assert doc_a.upload["filename"] == "quillmore.txt" and doc_a.upload["size"] == len(TEXT)
    assert doc_a.statuses[-1] == "COMPLETED", doc_a.statuses

    async def go():
        async with stdio_client(tenants, tenants.key_a, tenants.root) as client:
            found = await call(client, "search", query=QUERY, k=5)
            assert found["project"] == tenants.a and found["k"] == 5
            assert found["hits"] and found["hits"][0]["document_id"] == doc_a.id
            assert "zephyrine" in found["hits"][0]["text"]
            # the filters reach the API: each narrows the same query
            assert (await call(client, "search", query=QUERY, document_id=doc_a.id))["hits"]
            assert (await call(client, "search", query=QUERY, category="logs"))["hits"]
            assert (await call(client, "search", query=QUERY, category="other"))["hits"] == []
            # a text file's chunks have no page (0): any page filter leaves them out
            assert (await call(client, "search", query=QUERY, page_from=1, page_to=3))["hits"] == []
            status = await call(client, "document_status", document_id=doc_a.id)
            assert (status["status"], status["project"], status["chunks_total"] > 0) == ("COMPLETED", tenants.a, True)
            listing = await call(client, "list_documents", status="COMPLETED")
            assert doc_a.id in {d["document_id"] for d in listing["items"]}
            # the same bytes again: no new version
            again = await call(client, "upload_file", path=str(tenants.root / "notes" / "quillmore.txt"),
                               category="logs")
            assert (again["queued"], again["version"]) == (False, 1)

    run(go())


class HttpMcp:
    """``python -m cli mcp --transport http`` on a free loopback port (its log beside
    the API's); stopped with SIGTERM, then SIGKILL, by its own pid."""

    def __init__(self, t: SimpleNamespace, key: str, root: Optional[Path]):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.log = t.stack.data_dir / "logs" / f"mcp-http-{self.port}.log"
        args = [sys.executable, "-m", "cli", "mcp", "--transport", "http", "--port", str(self.port)]
        args += ["--root", str(root)] if root is not None else []
        self.proc = subprocess.Popen(args, cwd=ROOT, env=server_env(t, key), stdout=open(self.log, "ab"),
                                     stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"MCP server exited at start; see {self.log}"
            try:
                httpx.get(self.url, timeout=2)
                return
            except httpx.TransportError:
                time.sleep(0.2)
        self.stop()
        raise TimeoutError(f"MCP HTTP server not listening in 60 s; see {self.log}")

    def stop(self) -> None:
        stop_process(self.proc)


@pytest.fixture(scope="module")
def http_a(tenants):
    server = HttpMcp(tenants, tenants.key_a, tenants.root)
    yield server
    server.stop()


def test_http_upload_by_s3_reference_completes_and_is_found(tenants, http_a):
    from mcp import Client

    from adapters.object_store import ObjectStore

    async def put() -> str:
        async with ObjectStore(tenants.stack) as store:
            await store.ensure_bucket()
            await store.put_bytes(f"incoming/{tenants.a}/brackenfold.html", HTML.encode(), "text/html")
            return store.bucket

    bucket = run(put())
    # the key travels in the environment, never on the command line `ps` shows
    assert tenants.key_a not in Path(f"/proc/{http_a.proc.pid}/cmdline").read_text()

    async def go():
        async with Client(http_a.url) as client:
            assert {tool.name for tool in (await client.list_tools()).tools} == TOOLS
            up = await call(client, "upload_url", url=f"s3://{bucket}/incoming/{tenants.a}/brackenfold.html")
            assert up["queued"] and up["filename"] == "brackenfold.html"
            assert (await wait_terminal(client, up["document_id"]))[-1] == "COMPLETED"
            hits = (await call(client, "search", query="Brackenfold spillway gates inspection", k=3))["hits"]
            assert hits and hits[0]["document_id"] == up["document_id"]
            # the API's own rule on references: outside incoming/<project>/ is its 403
            text = await refusal(client, "upload_url", url=f"s3://{bucket}/raw/{tenants.b}/x.pdf")
            assert "403" in text and f"incoming/{tenants.a}/" in text

    run(go())
    # DNS rebinding: a page on another host name cannot drive the loopback server
    r = httpx.post(http_a.url, headers={"Host": "evil.example", "Content-Type": "application/json"},
                   content=b"{}", timeout=10)
    assert r.status_code == 421, r.status_code


def test_another_projects_key_sees_nothing_of_it(tenants, doc_a):
    async def go():
        async with stdio_client(tenants, tenants.key_b, None) as client:
            text = await refusal(client, "document_status", document_id=doc_a.id)
            assert "404" in text and "document not found" in text
            found = await call(client, "search", query=QUERY, k=50)
            assert found["project"] == tenants.b
            assert doc_a.id not in {h["document_id"] for h in found["hits"]}
            assert all("zephyrine" not in h["text"] for h in found["hits"])
            listing = await call(client, "list_documents")
            assert listing["total"] == 0 and listing["items"] == []
            # the filter cannot reach across either
            assert (await call(client, "search", query=QUERY, document_id=doc_a.id))["hits"] == []

    run(go())


def test_paths_outside_the_root_are_refused(tenants):
    async def go():
        async with stdio_client(tenants, tenants.key_a, tenants.root) as client:
            for path in ("/etc/passwd", "../" + tenants.outside.name + "/secret.txt",
                         str(tenants.outside / "secret.txt"), "escape.txt", "outdir/secret.txt",
                         "notes/../../" + tenants.outside.name + "/secret.txt"):
                text = await refusal(client, "upload_file", path=path)
                assert "outside the upload root" in text, (path, text)
            assert "not a regular file" in await refusal(client, "upload_file", path="fifo")
            assert "not a regular file" in await refusal(client, "upload_file", path="notes")
            assert "No such file" in await refusal(client, "upload_file", path="notes/missing.txt")
        async with stdio_client(tenants, tenants.key_a, None) as client:  # no --root: no path upload
            text = await refusal(client, "upload_file", path=str(tenants.root / "notes" / "quillmore.txt"))
            assert "upload by path is off" in text and "--root" in text
            # nothing of the outside file was ever uploaded
            listing = await call(client, "list_documents", limit=500)
            assert {d["filename"] for d in listing["items"]} <= {"quillmore.txt", "brackenfold.html"}

    run(go())


def test_bad_arguments_are_tool_errors_with_a_reason(tenants):
    async def go():
        async with stdio_client(tenants, tenants.key_a, tenants.root) as client:
            assert "k" in await refusal(client, "search", query=QUERY, k="many")  # the SDK's schema
            assert "query" in await refusal(client, "search", k=3)
            text = await refusal(client, "search", query=QUERY, k=0)  # the API's rule, its message
            assert "422" in text and "k" in text
            assert "422" in await refusal(client, "search", query="   ")
            assert "page_from is after page_to" in await refusal(client, "search", query=QUERY,
                                                                 page_from=3, page_to=2)
            assert "must match" in await refusal(client, "document_status", document_id="../v1/search")
            assert "422" in await refusal(client, "list_documents", status="DONE")
            assert "s3://bucket/key" in await refusal(client, "upload_url", url="https://example.com/a.pdf")
            assert "s3://bucket/key" in await refusal(client, "upload_url", url="s3://only-a-bucket")
            text = await refusal(client, "upload_url", url="s3://ragstream/incoming/../raw/x.pdf")
            assert "422" in text and "'..'" in text
            assert "category" in await refusal(client, "upload_file", path="notes/quillmore.txt",
                                                 category="no spaces!")
            assert "Unknown tool" in await refusal(client, "drop_tables")
            # after all that the same session still answers
            assert (await call(client, "search", query=QUERY, k=1))["k"] == 1

    run(go())


def _api_has_metadata_filter(api_url: str) -> bool:
    """Whether the running API's ``POST /v1/search`` body declares ``metadata_filter``
    (read from its OpenAPI schema now, not assumed)."""
    schema = httpx.get(api_url + "/openapi.json", timeout=30).json()
    return "metadata_filter" in schema["components"]["schemas"]["SearchRequest"]["properties"]


def test_metadata_filter_reaches_the_api_unchanged(tenants, doc_a):
    """The search tool's ``metadata_filter`` is the API's, as it is: the MCP answer for a
    filter is the API's own answer for it (hits, or the same refusal), and it differs
    from the unfiltered search (a filter on a key no document has keeps none of them)."""
    if not _api_has_metadata_filter(tenants.api):
        pytest.skip("the API's POST /v1/search has no metadata_filter yet (its OpenAPI schema)")
    flt = {"mcp_test_no_such_key": "no such value"}
    direct = httpx.post(tenants.api + "/v1/search", headers={"X-API-Key": tenants.key_a}, timeout=60,
                        json={"query": QUERY, "k": 10, "metadata_filter": flt})

    async def go():
        async with stdio_client(tenants, tenants.key_a, None) as client:
            unfiltered = await call(client, "search", query=QUERY, k=10)
            return unfiltered, await client.call_tool("search", {"query": QUERY, "k": 10,
                                                                 "metadata_filter": flt})

    unfiltered, result = run(go())
    assert doc_a.id in {h["document_id"] for h in unfiltered["hits"]}
    if direct.status_code == 200:
        assert not result.is_error, result.content[0].text
        hits = [(h["document_id"], h["text"]) for h in result.structured_content["hits"]]
        assert hits == [(h["document_id"], h["text"]) for h in direct.json()["hits"]]
        assert hits != [(h["document_id"], h["text"]) for h in unfiltered["hits"]]
    else:
        assert result.is_error and str(direct.status_code) in result.content[0].text
