"""The dashboard in headless Chromium (Debian ``chromium``) against the running API:
it shows a document uploaded over HTTP move through the stages to COMPLETED, live
from the SSE stream, and loads nothing from outside the API (no CDN).  The page is
driven over the DevTools protocol (websockets) and a screenshot is saved to
test-output/dashboard.png."""
from __future__ import annotations

import asyncio
import base64
import json
import shutil
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from api_helpers import create_key, stop_process, upload

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
STATIC = Path(__file__).resolve().parents[1] / "api" / "static"


def test_dashboard_assets_are_self_contained():
    for f in STATIC.iterdir():
        text = f.read_text()
        assert "http://" not in text and "https://" not in text and "//cdn" not in text, f.name


class Chromium:
    """Headless Chromium with a fresh profile and a DevTools port."""

    def __init__(self, profile: Path):
        profile.mkdir(parents=True, exist_ok=True)
        self.profile = profile
        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run",
             "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--remote-debugging-port=0",
             "--window-size=1400,1000", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=open(profile / "chromium.log", "wb"), start_new_session=True)
        port_file = profile / "DevToolsActivePort"
        deadline = time.time() + 30
        while not port_file.exists() or not port_file.read_text().strip():
            assert self.proc.poll() is None, (profile / "chromium.log").read_text()[-2000:]
            assert time.time() < deadline, "chromium did not open its DevTools port"
            time.sleep(0.1)
        self.port = int(port_file.read_text().split()[0])

    def page_ws(self) -> str:
        """The DevTools websocket URL of the first page target."""
        targets = httpx.get(f"http://127.0.0.1:{self.port}/json/list", timeout=10).json()
        return next(t["webSocketDebuggerUrl"] for t in targets if t["type"] == "page")

    def close(self) -> None:
        stop_process(self.proc)


class Page:
    """A minimal DevTools protocol client for one page."""

    def __init__(self, ws):
        self.ws, self.next_id = ws, 0

    async def call(self, method: str, **params):
        self.next_id += 1
        ident = self.next_id
        await self.ws.send(json.dumps({"id": ident, "method": method, "params": params}))
        while True:
            msg = json.loads(await asyncio.wait_for(self.ws.recv(), 60))
            if msg.get("id") == ident:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})

    async def js(self, expression: str):
        res = await self.call("Runtime.evaluate", expression=expression, returnByValue=True,
                              awaitPromise=True)
        return res.get("result", {}).get("value")

    async def until(self, expression: str, timeout_s: float, every_s: float = 0.2):
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            value = await self.js(expression)
            if value:
                return value
            await asyncio.sleep(every_s)
        raise TimeoutError(f"not true after {timeout_s} s: {expression}")


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="Debian chromium not installed (scripts/bootstrap.sh)")
def test_dashboard_shows_document_reaching_completed(api, project, stack, output_dir, tmp_path):
    import websockets

    from stages.samples import generate_samples

    key = create_key(project)
    pdf = generate_samples(stack.data_dir / "dashboard-samples")[0]
    browser = Chromium(tmp_path / "chromium-profile")

    async def drive():
        async with websockets.connect(browser.page_ws(), max_size=64 * 2**20) as ws:
            page = Page(ws)
            await page.call("Page.enable")
            await page.call("Runtime.enable")
            await page.call("Emulation.setDeviceMetricsOverride", width=1400, height=1000,
                            deviceScaleFactor=1, mobile=False)
            await page.call("Page.navigate", url=f"{api.url}/dashboard#key={key}")
            await page.until("document.querySelector('#conn') && "
                             "document.querySelector('#conn').textContent === 'live'", 30)
            r = upload(api.url, key, pdf, project=project, category="default")
            assert r.status_code == 202, r.text
            doc = r.json()["document_id"]
            row = f"document.querySelector('tr[data-document=\"{doc}\"]')"
            seen: list[str] = []
            deadline = time.time() + 300
            while time.time() < deadline:
                status = await page.js(f"{row} ? {row}.dataset.status : null")
                if status and (not seen or seen[-1] != status):
                    seen.append(status)
                if status in ("COMPLETED", "FAILED"):
                    break
                await asyncio.sleep(0.1)
            transitions = await page.js(f"{row}.cells[7].textContent")
            await page.until("Array.from(document.querySelectorAll('#counts .card')).some("
                             "c => c.textContent.endsWith('COMPLETED') && c.querySelector('b')"
                             ".textContent === '1')", 15)
            lag_rows = await page.js("document.querySelectorAll('#lag tbody tr').length")
            resources = await page.js("performance.getEntriesByType('resource').map(e => e.name)")
            shot = await page.call("Page.captureScreenshot", format="png")
            return doc, seen, transitions, lag_rows, resources, base64.b64decode(shot["data"])

    try:
        doc, seen, transitions, lag_rows, resources, png = asyncio.run(drive())
    finally:
        browser.close()
    out = output_dir / "dashboard.png"
    out.write_bytes(png)
    assert seen[-1] == "COMPLETED", seen
    assert len(seen) >= 2, f"the row never changed live: {seen}"  # it moved while we watched
    assert transitions.split(" → ") == ["QUEUED", "NORMALIZING", "PARTITIONING", "CHUNKING",
                                        "ENHANCING", "EMBEDDING", "INDEXING", "COMPLETED"], transitions
    assert lag_rows >= 7  # one row per stage with an input topic
    assert all(u.startswith(api.url) for u in resources), resources
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    print(f"\ndashboard saw {' → '.join(seen)}; screenshot {out} ({len(png)} bytes)")
