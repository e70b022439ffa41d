"""Project lanes (topics/lanes.py ``burst_lane``): a project's burst of uploads goes to
the bulk half of every topic on its way, and arrives whole; another project's file
stays in the other half.  The figures (a second project's file while the first's
200 documents drain) come from ``ragstream bench fairness --backlog 200``."""
import pytest

from conftest import run

pytestmark = pytest.mark.integration


async def _partitions(bootstrap: str, topic: str, ids: set[str]) -> dict[str, set[int]]:
    """``{document id: partitions its records are on}`` for the records of ``topic``."""
    from streams.kafka_io import read_topic

    seen: dict[str, set[int]] = {}
    async for msg in read_topic(bootstrap, topic, timeout_s=60):
        doc = (msg.key or b"").decode()
        if doc in ids:
            seen.setdefault(doc, set()).add(msg.partition)
    return seen


def test_a_burst_goes_to_the_bulk_lane_and_completes(stack, worker, tmp_path, project):
    from cli.progress import follow_until_terminal, uploader
    from rich.console import Console
    from streams.ingest import ingest_file
    from topics import CHUNKS, ELEMENTS, EMBEDDINGS, ENHANCED, PAGE_RANGES, PARTITION_TASKS, UPLOADS

    other = project + "x"
    files = []
    for i in range(3):
        files.append(tmp_path / f"note-{i}.txt")
        files[-1].write_text(f"Burst note {i} of {project}: the lanes keep a backlog apart.\n")
    (tmp_path / "solo.txt").write_text(f"The other project's single file, {other}.\n")

    async def scenario():
        async with uploader(stack) as (store, metadata, prod):
            async def upload(path, owner):
                return await ingest_file(path, project=owner, category="default", store=store,
                                         metadata=metadata, producer=prod, burst=3)

            first = await upload(files[0], project)  # in flight: itself only
            # three versions registered and never sent (no raw object: the outbox sweep
            # leaves them), so the project has 3 + 1 in flight at each next upload,
            # whatever the worker has finished meanwhile
            for n in range(3):
                await metadata.register_version(
                    document_id=f"{project}.held-{n}", project=project, category="default",
                    filename=f"held-{n}.txt", sha256=f"{n:064x}", size=1,
                    raw_key_for=lambda v, n=n: f"raw/{project}/held-{n}/v{v}.txt")
            burst = [first] + [await upload(p, project) for p in files[1:]]
            solo = await upload(tmp_path / "solo.txt", other)
            assert await metadata.in_flight_versions(project, 600, 100) >= 3
        results = burst + [solo]
        last = await follow_until_terminal({r.document_id: r.version for r in results},
                                           Console(width=160), timeout_s=300, settings=stack)
        ids = {r.document_id for r in results}
        return burst, solo, last, {t.name: await _partitions(stack.kafka_bootstrap, t.name, ids)
                                   for t in (UPLOADS, PARTITION_TASKS, ELEMENTS, CHUNKS, ENHANCED,
                                             EMBEDDINGS)}, \
            await _partitions(stack.kafka_bootstrap, PAGE_RANGES.name, ids)

    burst, solo, last, seen, ranges = run(scenario())
    assert {e.status for e in last.values()} == {"COMPLETED"}, last
    # the project's first upload (nothing else in flight) and the other project's file:
    # the first half (partitions 0-1 of 4); the uploads with 3 + 1 in flight (over the
    # threshold, 3): the bulk half, on every topic but partition-tasks, where they never
    # go: the partition stage's bulk lane is page-ranges (its parse slots are the ranges')
    for topic, where in seen.items():
        for r in burst[:1] + [solo]:
            assert where[r.document_id] <= {0, 1}, (topic, r.document_id, where)
        for r in burst[1:]:
            if topic == PARTITION_TASKS.name:
                assert r.document_id not in where, (topic, r.document_id, where)
            else:
                assert where[r.document_id] <= {2, 3}, (topic, r.document_id, where)
    assert {r.document_id for r in burst[1:]} <= set(ranges), ranges
    assert not {r.document_id for r in burst[:1] + [solo]} & set(ranges), ranges
