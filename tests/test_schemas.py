"""Records, sequences and ids: the contracts between stages."""
from schemas import Chunk, DocumentStatus, StatusEvent, chunk_id, sequence, status_event
from streams.app import app_id, UnknownStage, STAGES
from topics import ALL, STAGE_TOPICS, STATUS, stage_sources
import pytest


def test_chunk_id_is_deterministic():
    assert chunk_id("doc-1", 3, 7) == "doc-1:3:7"


def test_sequence_orders_versions_then_stages():
    order = [sequence(1, s) for s in DocumentStatus]
    assert order == sorted(order)
    running = [s for s in DocumentStatus if not s.terminal]
    assert len({sequence(1, s) for s in running}) == len(running)
    assert sequence(2, DocumentStatus.QUEUED) > sequence(1, DocumentStatus.DELETED)


def test_one_terminal_state_per_version():
    """COMPLETED and FAILED of one version compare equal (the first projected stays);
    DELETED supersedes both; every terminal state is above every running one."""
    done, failed = sequence(1, DocumentStatus.COMPLETED), sequence(1, DocumentStatus.FAILED)
    assert done == failed < sequence(1, DocumentStatus.DELETED)
    assert done > max(sequence(1, s) for s in DocumentStatus if not s.terminal)


def test_records_round_trip_through_orjson():
    ev = status_event("d", 2, DocumentStatus.FAILED, stage="partition", project="p",
                      error="encrypted PDF")
    back = StatusEvent.loads(ev.dumps())
    assert (back.document_id, back.version, back.status, back.error) == ("d", 2, "FAILED", "encrypted PDF")
    assert back.seq == 2 * 100 + DocumentStatus.FAILED.rank
    c = Chunk(chunk_id="d:1:0", document_id="d", version=1, index=0, total=1, project="p",
              category="c", filename="f.pdf", text="hello", page_number=1, element_types=["Title"])
    assert Chunk.loads(c.dumps()) == c


def test_topic_catalogue_is_the_only_source_of_names():
    names = [t.name for t in ALL]
    assert len(names) == len(set(names))
    assert STATUS.compacted and STATUS.config()["cleanup.policy"] == "compact"
    assert set(STAGE_TOPICS) == set(STAGES)


def test_app_ids_give_each_stage_its_consumer_group():
    for stage in STAGES:
        assert app_id(stage) == f"ragstream-{stage}"
    with pytest.raises(UnknownStage):
        app_id("nope")


def test_each_agent_consumes_the_topic_the_catalogue_names(tmp_path):
    """``topics.STAGE_TOPICS`` is the map the README points readers to; each stage's
    agent must read the topic it names (building the apps starts nothing)."""
    from streams.app import create_app
    from streams.settings import Settings

    settings = Settings(data_dir=tmp_path)
    for stage in STAGES:
        app = create_app(stage, settings)
        sources = {t for agent in app.agents.values() for t in agent.channel.topics}
        assert sources == {spec.name for spec in stage_sources(stage)}, stage
        assert stage_sources(stage)[0] is STAGE_TOPICS[stage][0]
