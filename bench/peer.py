"""``ragstream bench peer``: ragstream against unstructured-ingest, same corpus, same run.

The peer is the open-source ``unstructured-ingest`` CLI, run by the shared script
``../shared/peers/unstructured_ingest.sh CORPUS OUT`` (it provisions its own venv the
first time and prints ``peer_*`` figures: see that folder's README).  Both sides get
the same files (:func:`bench.e2e.corpus_files`: the corpus without its CSV ground
truth, copied into one folder for the peer) and are measured the same way — wall
seconds from handing over the files to the last document searchable:

- peer: ``peer_wall_s`` (launch to exit) and, the figure compared, that minus its
  start-up ``peer_step_init_s`` (interpreter, imports, embedder probe), since
- ragstream runs on a stack already up, with a warm worker (one warm-up document
  first), from the first upload to the last terminal status (bench/e2e.py
  ``run_pipeline``; COMPLETED = indexed in Milvus, searchable).

The peer runs first, before this command starts a worker, so the two never share the
cores.  ``--runs N`` runs each side N times (the peer's runs first) and compares the
best of each, printing every run.  Printed per side: files, pages, chunks, empty
files (no chunk, no error), failed files, seconds, pages/s; then ragstream's
per-stage profile (bench/profile.py); characters embedded per second for both sides
(bench/embedded_chars.py: the text up to the embedder's 256 word pieces, which
ragstream's chunks fit and the peer's 3,000-character chunks mostly do not; the
peer's only when it ran in this invocation, its output folder being read); the last line is
``vs_unstructured_ingest=<ragstream pages/s ÷ peer pages/s without start-up>``.
"""
from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from rich.console import Console
from rich.table import Table

from bench.e2e import Run
from bench.embedded_chars import EmbeddedChars
from bench.same_work import SameWork, peer_per_file, same_work_lines

REPO = Path(__file__).resolve().parent.parent


def default_peer_script() -> Path:
    """``RAGSTREAM_PEER_SCRIPT``, else ``../shared/peers/unstructured_ingest.sh``
    beside the checkout (as CI lays it out)."""
    env = os.environ.get("RAGSTREAM_PEER_SCRIPT")
    return Path(env) if env else REPO.parent / "shared" / "peers" / "unstructured_ingest.sh"


@dataclass
class PeerFigures:
    """The ``peer_*`` lines of one peer run: ``values`` every ``peer_KEY=VALUE`` (text),
    ``steps`` the ``peer_step_<name>_s`` seconds (``init`` = start-up)."""

    values: dict[str, str] = field(default_factory=dict)
    steps: dict[str, float] = field(default_factory=dict)
    chars: Optional[EmbeddedChars] = None  # from its output folder, when read
    per_file: dict[str, tuple[int, int]] = field(default_factory=dict)  # {file: (chunks, pages)}

    def number(self, key: str, default: float = 0.0) -> float:
        """``peer_<key>`` as a float; ``default`` when absent or not a number
        (the script prints ``None`` for a figure it could not take)."""
        try:
            return float(self.values[key])
        except (KeyError, ValueError):
            return default

    @property
    def wall_s(self) -> float:
        return self.number("wall_s")

    @property
    def startup_s(self) -> float:
        return self.steps.get("init", 0.0)

    def side(self, *, exclude_startup: bool) -> Run:
        """The peer as a :class:`bench.e2e.Run`, its seconds with or without start-up."""
        label = "unstructured-ingest, start-up excluded" if exclude_startup else "unstructured-ingest, launch to exit"
        return Run(label, documents=int(self.number("files")), pages=int(self.number("pages")),
                    chunks=int(self.number("chunks")), empty=int(self.number("files_empty")),
                    failed=int(self.number("failed_documents")),
                    seconds=self.wall_s - (self.startup_s if exclude_startup else 0.0))


def parse_peer_output(text: str) -> PeerFigures:
    """The ``peer_KEY=VALUE`` lines of the peer script's stdout (others ignored; a
    later line wins).  Raises ValueError when ``peer_wall_s`` or ``peer_pages`` is
    missing (the run did not get to its figures)."""
    figs = PeerFigures()
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("peer_") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        key = key.removeprefix("peer_")
        figs.values[key] = value.strip()
        if key.startswith("step_") and key.endswith("_s"):
            try:
                figs.steps[key[len("step_"):-len("_s")]] = float(value)
            except ValueError:
                pass
    missing = [k for k in ("wall_s", "pages") if k not in figs.values]
    if missing:
        raise ValueError("peer output lacks " + ", ".join(f"peer_{k}" for k in missing))
    figs.per_file = peer_per_file(text)
    return figs


def stage_corpus(files: list[Path], root: Path, dest: Path) -> Path:
    """Copy ``files`` (under ``root``) into ``dest`` keeping their relative paths, so
    the peer reads exactly the files ragstream ingests.  Returns ``dest``."""
    for f in files:
        target = dest / f.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, target)
    return dest


def run_peer(script: Path, corpus: Path, out: Path, log: Path, timeout_s: float = 3600.0) -> PeerFigures:
    """Run the peer script on ``corpus`` writing under ``out``; its stderr (and stdout)
    go to ``log``.  Raises FileNotFoundError (no script), RuntimeError (non-zero
    exit, with the log's tail), ValueError (no figures)."""
    if not script.is_file():
        raise FileNotFoundError(f"peer script {script} not found (set RAGSTREAM_PEER_SCRIPT or --peer-script)")
    # not from the checkout, and without our PYTHONPATH: the repo's triton/ folder on the
    # peer's sys.path shadows the `triton` package its torch imports (README)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(["bash", str(script.resolve()), str(corpus.resolve()), str(out.resolve())],
                          capture_output=True, text=True, timeout=timeout_s, check=False,
                          cwd=out, env=env)
    log.write_text(proc.stdout + "\n--- stderr ---\n" + proc.stderr)
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).splitlines()[-15:])
        raise RuntimeError(f"peer script exited {proc.returncode} (log {log}):\n{tail}")
    return parse_peer_output(proc.stdout)


def comparison_lines(ours: Run, peer: PeerFigures, ours_chars: Optional[EmbeddedChars] = None,
                     same: Optional[SameWork] = None, same_run: bool = False) -> list[str]:
    """The ``key=value`` lines that end the report; the last is
    ``vs_unstructured_ingest`` (ours ÷ peer without start-up, pages/s), followed by
    `` same_work_ratio=`` when the same-work run was made (``same_run``; ``n/a`` when
    its figures could not be taken: bench/same_work.py).  Characters
    embedded per second (each side's seconds as in its pages/s; the peer's without
    start-up) and the share of each side's chunk text that reached a vector come
    before it, ``n/a`` for a side whose chunks were not read."""
    cold, warm = peer.side(exclude_startup=False), peer.side(exclude_startup=True)

    def ratio(a: float, b: float) -> float:
        return a / b if b else 0.0

    def chars(c: Optional[EmbeddedChars], seconds: float) -> tuple[str, str]:
        if c is None:
            return "n/a", "n/a"
        return f"{c.per_s(seconds):.0f}", f"{c.share:.3f}"

    (ours_cps, ours_share), (peer_cps, peer_share) = chars(ours_chars, ours.seconds), chars(peer.chars, warm.seconds)
    return [
        f"ragstream_chars_embedded_per_s={ours_cps}",
        f"peer_chars_embedded_per_s_excl_startup={peer_cps}",
        f"ragstream_text_share_embedded={ours_share}",
        f"peer_text_share_embedded={peer_share}",
        f"ragstream_pages_per_s={ours.pages_per_s:.3f}",
        f"peer_pages_per_s_excl_startup={warm.pages_per_s:.3f}",
        f"peer_pages_per_s_incl_startup={cold.pages_per_s:.3f}",
        f"vs_unstructured_ingest_incl_startup={ratio(ours.pages_per_s, cold.pages_per_s):.3f}",
        *(same_work_lines(same) if same_run else []),
        f"vs_unstructured_ingest={ratio(ours.pages_per_s, warm.pages_per_s):.3f}"
        + ((f" same_work_ratio={same.ratio_all:.3f}" if same else " same_work_ratio=n/a") if same_run else ""),
    ]


def print_report(ours: Run, peer: PeerFigures, console: Console,
                 ours_chars: Optional[EmbeddedChars] = None, basic: Optional[Run] = None,
                 basic_chars: Optional[EmbeddedChars] = None, corpus: Optional[Path] = None) -> None:
    """The side-by-side table (with the same-work run ``basic`` when made), the peer's
    step times, then :func:`comparison_lines`."""
    from bench.same_work import same_work

    table = Table("run", "files", "pages", "chunks", "empty", "failed", "seconds", "pages/s", "chunks/s",
                  title="same files, same machine, same run")
    sides = [ours] + ([basic] if basic else []) + [peer.side(exclude_startup=True), peer.side(exclude_startup=False)]
    for s in sides:
        table.add_row(s.name, str(s.documents), str(s.pages), str(s.chunks), str(s.empty), str(s.failed),
                      f"{s.seconds:.1f}", f"{s.pages_per_s:.2f}", f"{s.chunks_per_s:.2f}")
    console.print(table)
    if peer.steps:
        console.print("peer steps (s): " + ", ".join(f"{k} {v:.2f}" for k, v in peer.steps.items()),
                      highlight=False)
    same = None
    if basic is not None and corpus is not None:
        same = same_work(basic, corpus, peer.per_file, peer.side(exclude_startup=True).seconds)
        if basic_chars is not None:
            print(f"same_work_chars_embedded_per_s={basic_chars.per_s(basic.seconds):.0f} "
                  f"same_work_text_share_embedded={basic_chars.share:.3f}")
    for line in comparison_lines(ours, peer, ours_chars, same, same_run=basic is not None):
        print(line)


def bench_peer(corpus: Path, console: Console, *, script: Optional[Path] = None,
               peer_output: Optional[Path] = None, keep_running: bool = False,
               out_dir: Optional[Path] = None, runs: int = 1, same_work: bool = True) -> float:
    """Run the peer ``runs`` times (or read its recorded stdout from ``peer_output``),
    then ragstream ``runs`` times on the same files and one stack (each run a new
    project, the embedding cache emptied first: bench/e2e.run_pipeline); print every
    run, then the best of each side (fewest seconds; the peer's without start-up)
    with the best ragstream run's profile.  With ``same_work``, ragstream's runs are
    followed by as many with the ``basic`` profile (bench/same_work.py), the best of
    which gives ``same_work_ratio``.  Returns ``vs_unstructured_ingest`` of the two
    bests.  Raises ValueError when ``runs`` < 1 or the corpus is empty."""
    import asyncio

    import devstack
    from bench.e2e import corpus_files, run_pipeline
    from bench.embedded_chars import embedded_chars, project_embed_texts
    from bench.same_work import PROFILE, ensure_profile
    from bench.profile import StageProbe, print_profile
    from devstack.worker_process import start_worker, stop_worker
    from stages.samples import generate_samples
    from streams.settings import get_settings
    from topics.admin import ensure_topics

    if runs < 1:
        raise ValueError(f"runs must be at least 1 (got {runs})")
    files = corpus_files(corpus)
    if not files:
        raise ValueError(f"no documents under {corpus}")
    work = out_dir or Path(tempfile.mkdtemp(prefix="ragstream-bench-peer-"))
    work.mkdir(parents=True, exist_ok=True)
    console.print(f"corpus: {corpus} ({len(files)} files); work folder {work}; load {_load()}",
                  highlight=False)
    peers: list[PeerFigures] = []
    if peer_output:
        peers.append(parse_peer_output(peer_output.read_text()))
        console.print(f"peer: figures read from {peer_output}", highlight=False)
    else:
        staged = stage_corpus(files, corpus, work / "corpus")
        for i in range(1, runs + 1):
            console.print(f"peer run {i}/{runs}: {script or default_peer_script()} "
                          "(first time: installs its venv) ...", highlight=False)
            t = time.perf_counter()
            peers.append(run_peer(script or default_peer_script(), staged, work / f"peer-{i}",
                                  work / f"peer-{i}.log"))
            peers[-1].chars = peer_chars(work / f"peer-{i}")
            console.print(f"peer run {i}: done in {time.perf_counter() - t:.1f} s; "
                          f"{peers[-1].side(exclude_startup=True).seconds:.1f} s without start-up "
                          f"(log {work / f'peer-{i}.log'})", highlight=False)
    peer = min(peers, key=lambda f: f.side(exclude_startup=True).seconds)

    settings = get_settings()
    warmup = generate_samples(work / "samples")[2]  # the HTML sample, as bench e2e
    devstack.up(settings)
    asyncio.run(ensure_topics(settings.kafka_bootstrap, settings.topic_partitions))
    probe = StageProbe()
    worker = start_worker(settings.data_dir / "logs" / "bench-worker.log", env=probe.env)
    probe.watch(worker.pid, settings.data_dir)
    ours_runs = []
    try:
        for i in range(1, runs + 1):
            run = run_pipeline(files, warmup, settings, console, on_start=probe.mark)
            ours_runs.append((run, probe.profile(settings, run.project, run.seconds)))
            console.print(f"ragstream run {i}/{runs}: {run.seconds:.1f} s, {run.pages_per_s:.2f} pages/s, "
                          f"{run.chunks} chunks, {run.empty} empty, {run.failed} failed", highlight=False)
        run, profile = min(ours_runs, key=lambda rp: rp[0].seconds)
        ours_chars = embedded_chars(project_embed_texts(settings.milvus_uri, run.project))
        basic = basic_chars = None
        if same_work:
            asyncio.run(ensure_profile(settings.pg_dsn))
            basics = []
            for i in range(1, runs + 1):
                basics.append(run_pipeline(files, warmup, settings, console, category=PROFILE))
                console.print(f"same-work run {i}/{runs} (profile {PROFILE}): {basics[-1].seconds:.1f} s, "
                              f"{basics[-1].pages_per_s:.2f} pages/s, {basics[-1].chunks} chunks, "
                              f"{basics[-1].empty} empty, {basics[-1].failed} failed", highlight=False)
            basic = dataclasses.replace(min(basics, key=lambda r: r.seconds),
                                        name=f"ragstream, same work (profile {PROFILE})")
            basic_chars = embedded_chars(project_embed_texts(settings.milvus_uri, basic.project))
    finally:
        stop_worker(worker)
        if not keep_running:
            devstack.down(settings)
    label = "ragstream (stack up, warm worker)" + (f", best of {runs}" if runs > 1 else "")
    ours = dataclasses.replace(run, name=label)
    print_profile(profile, console)
    console.print(f"load after: {_load()}", highlight=False)
    print_report(ours, peer, console, ours_chars, basic, basic_chars, corpus)
    warm = peer.side(exclude_startup=True)
    return ours.pages_per_s / warm.pages_per_s if warm.pages_per_s else 0.0


def peer_chars(run_dir: Path) -> Optional[EmbeddedChars]:
    """:func:`bench.embedded_chars.embedded_chars` over the chunks of the peer run
    written under ``run_dir`` (the script's ``np<N>/out`` folder); None when there is
    no such folder."""
    from bench.embedded_chars import embedded_chars, peer_chunk_texts

    out = next(iter(sorted(Path(run_dir).glob("np*/out"))), None)
    return embedded_chars(peer_chunk_texts(out)) if out is not None else None


def _load() -> str:
    """The 1/5/15-minute load averages, as uptime shows them."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())
