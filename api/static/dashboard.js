// ragstream dashboard: documents from GET /v1/documents, then live transitions from
// the server-sent-event stream (read with fetch so the API key can travel in a
// header), per-status counts and stage lag from GET /v1/stats every few seconds.
// The search box posts to /v1/search and lists the hits.
// The key comes from the URL fragment (#key=...) or the form, kept in sessionStorage.
"use strict";
(function () {
  const ORDER = ["QUEUED", "NORMALIZING", "PARTITIONING", "CHUNKING", "ENHANCING", "EMBEDDING",
                 "INDEXING", "COMPLETED", "FAILED", "DELETED"];
  const docs = new Map();   // document_id -> {row fields, history: [status...]}
  let key = null;

  function $(sel) { return document.querySelector(sel); }
  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function fmtTime(t) {
    if (!t) return "";
    const d = typeof t === "number" ? new Date(t * 1000) : new Date(t);
    return d.toLocaleTimeString();
  }
  function headers() { return { "X-API-Key": key }; }

  function upsert(ev, fromStream) {
    const prev = docs.get(ev.document_id);
    if (prev && prev.seq !== undefined && ev.seq !== undefined && prev.seq >= ev.seq) return;
    const history = prev ? prev.history.slice() : [];
    if (fromStream && (history.length === 0 || history[history.length - 1] !== ev.status)) history.push(ev.status);
    if (!fromStream && history.length === 0) history.push(ev.status);
    docs.set(ev.document_id, Object.assign({}, prev || {}, ev, { history: history, flash: fromStream }));
  }

  function render() {
    const tbody = $("#docs tbody");
    tbody.textContent = "";
    const rows = Array.from(docs.values()).sort((a, b) => (b.at || 0) - (a.at || 0));
    for (const d of rows) {
      const tr = el("tr", d.flash ? "flash" : "");
      tr.dataset.document = d.document_id;
      tr.dataset.status = d.status;
      tr.appendChild(el("td", "mono", d.document_id));
      tr.appendChild(el("td", "", d.filename));
      tr.appendChild(el("td", "", d.version));
      const statusCell = el("td", "status s-" + d.status, d.status + (d.partial ? " (partial)" : ""));
      if (d.partial) statusCell.title = (d.failed_parts || []).map((f) => f.part + ": " + f.reason).join("\n");
      tr.appendChild(statusCell);
      tr.appendChild(el("td", "", d.stage));
      tr.appendChild(el("td", "", d.chunks_total ? (d.chunks_done || 0) + "/" + d.chunks_total : ""));
      tr.appendChild(el("td", "", fmtTime(d.at)));
      tr.appendChild(el("td", "mono", d.history.join(" → ")));
      d.flash = false;
      tbody.appendChild(tr);
    }
    const fbody = $("#failures tbody");
    fbody.textContent = "";
    for (const d of rows.filter((x) => x.status === "FAILED")) {
      const tr = el("tr");
      tr.appendChild(el("td", "mono", d.document_id));
      tr.appendChild(el("td", "", d.filename));
      tr.appendChild(el("td", "", d.version));
      tr.appendChild(el("td", "", d.stage));
      tr.appendChild(el("td", "mono code", d.error_code || ""));
      tr.appendChild(el("td", "s-FAILED", d.error || "(no reason)"));
      fbody.appendChild(tr);
    }
    // a partial document's missing parts, one row each (it is COMPLETED: the rest is searchable)
    for (const d of rows.filter((x) => x.status === "COMPLETED" && x.partial)) {
      for (const f of d.failed_parts || []) {
        const tr = el("tr", "partial");
        tr.appendChild(el("td", "mono", d.document_id));
        tr.appendChild(el("td", "", d.filename));
        tr.appendChild(el("td", "", d.version));
        tr.appendChild(el("td", "", "partial"));
        tr.appendChild(el("td", "mono code", f.code || ""));
        tr.appendChild(el("td", "", f.part + ": " + f.reason));
        fbody.appendChild(tr);
      }
    }
  }

  function renderStats(stats) {
    $("#project").textContent = "project " + stats.project;
    const counts = $("#counts");
    counts.textContent = "";
    for (const s of ORDER) {
      const c = el("div", "card");
      c.appendChild(el("b", "s-" + s, stats.counts[s] || 0));
      c.appendChild(el("span", "", s));
      counts.appendChild(c);
    }
    const lbody = $("#lag tbody");
    lbody.textContent = "";
    const lag = stats.lag || {};
    if (lag.error) {
      const tr = el("tr"); const td = el("td", "s-FAILED", lag.error); td.colSpan = 4;
      tr.appendChild(td); lbody.appendChild(tr); return;
    }
    for (const [stage, e] of Object.entries(lag)) {
      const tr = el("tr");
      tr.appendChild(el("td", "", stage));
      tr.appendChild(el("td", "mono", e.topic));
      tr.appendChild(el("td", "", e.lag === null ? "no consumer" : e.lag));
      tr.appendChild(el("td", "mono", Object.entries(e.groups || {}).map(([g, n]) => g + ": " + n).join(", ")));
      lbody.appendChild(tr);
    }
  }

  async function loadDocuments() {
    const r = await fetch("/v1/documents?limit=200", { headers: headers() });
    if (r.status === 401) throw new Error("unauthorized");
    const page = await r.json();
    for (const d of page.items.reverse()) {
      upsert({ document_id: d.document_id, filename: d.filename, version: d.version, status: d.status,
               stage: d.stage, chunks_total: d.chunks_total, chunks_done: d.chunks_done, error: d.error,
               error_code: d.error_code, partial: d.partial, failed_parts: d.failed_parts,
               at: Date.parse(d.updated_at) / 1000 }, false);
    }
    render();
  }

  async function pollStats() {
    try {
      const r = await fetch("/v1/stats", { headers: headers() });
      if (r.ok) renderStats(await r.json());
    } catch (e) { /* next poll */ }
  }

  function setConn(on) {
    const c = $("#conn");
    c.textContent = on ? "live" : "reconnecting";
    c.className = "pill " + (on ? "on" : "off");
  }

  async function stream() {
    for (;;) {
      try {
        const r = await fetch("/v1/status/stream", { headers: headers() });
        if (!r.ok || !r.body) throw new Error("stream " + r.status);
        setConn(true);
        const reader = r.body.getReader();
        const dec = new TextDecoder();
        let buf = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += dec.decode(value, { stream: true });
          let i;
          while ((i = buf.indexOf("\n\n")) >= 0) {
            const frame = buf.slice(0, i); buf = buf.slice(i + 2);
            let event = "message"; const data = [];
            for (const line of frame.split("\n")) {
              if (line.startsWith("event:")) event = line.slice(6).trim();
              else if (line.startsWith("data:")) data.push(line.slice(5).trim());
            }
            if (event === "status" && data.length) { upsert(JSON.parse(data.join("\n")), true); render(); }
          }
        }
      } catch (e) { /* reconnect below */ }
      setConn(false);
      await new Promise((res) => setTimeout(res, 2000));
      try { await loadDocuments(); } catch (e) { /* keep trying */ }
    }
  }

  async function runSearch() {
    const q = $("#searchq").value.trim();
    const info = $("#searchinfo");
    if (!q || !key) return;
    const body = { query: q, k: Math.min(100, Math.max(1, parseInt($("#searchk").value, 10) || 10)) };
    const doc = $("#searchdoc").value.trim();
    if (doc) body.document_id = doc;
    info.textContent = "searching…";
    try {
      const r = await fetch("/v1/search", {
        method: "POST", headers: Object.assign({ "Content-Type": "application/json" }, headers()),
        body: JSON.stringify(body) });
      const res = await r.json();
      if (!r.ok) { info.textContent = "error " + r.status + ": " + JSON.stringify(res.detail); return; }
      renderHits(res);
    } catch (e) { info.textContent = "error: " + e; }
  }

  function renderHits(res) {
    const table = $("#hits");
    const tbody = $("#hits tbody");
    tbody.textContent = "";
    res.hits.forEach((h, i) => {
      const tr = el("tr");
      tr.dataset.document = h.document_id;
      tr.appendChild(el("td", "", i + 1));
      tr.appendChild(el("td", "mono", h.score.toFixed(3)));
      tr.appendChild(el("td", "", h.filename + " v" + h.version));
      tr.appendChild(el("td", "", h.page_number || ""));
      tr.appendChild(el("td", "mono", h.element_types.join(", ")));
      const text = h.text.replace(/\s+/g, " ");
      tr.appendChild(el("td", "hittext", text.length > 400 ? text.slice(0, 400) + "…" : text));
      tbody.appendChild(tr);
    });
    table.hidden = false;
    $("#searchinfo").textContent = res.hits.length + " hits in " + Math.round(res.latency_ms) + " ms, " +
      res.rankers.join(" + ") + (res.reranked ? "" : " (not reranked: " + (res.fallback_reason || "?") + ")");
  }

  async function start() {
    try {
      await loadDocuments();
    } catch (e) {
      sessionStorage.removeItem("ragstream-key");
      $("#keyform").hidden = false;
      $("#conn").textContent = "API key needed";
      return;
    }
    $("#keyform").hidden = true;
    pollStats();
    setInterval(pollStats, 3000);
    stream();
  }

  const m = /(?:^|[#&])key=([^&]+)/.exec(location.hash);
  if (m) {
    sessionStorage.setItem("ragstream-key", decodeURIComponent(m[1]));
    history.replaceState(null, "", location.pathname);
  }
  key = sessionStorage.getItem("ragstream-key");
  $("#keyform").addEventListener("submit", (ev) => {
    ev.preventDefault();
    key = $("#keyinput").value.trim();
    sessionStorage.setItem("ragstream-key", key);
    start();
  });
  $("#searchform").addEventListener("submit", (ev) => { ev.preventDefault(); runSearch(); });
  if (key) start(); else $("#keyform").hidden = false;
})();
