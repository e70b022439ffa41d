"""Size lanes (topics/lanes.py): which partition a document's chunks go to."""
import pytest

from topics.lanes import lane_partition


def test_small_documents_use_the_first_half_and_big_ones_the_rest():
    ids = [f"proj.doc-{i}" for i in range(200)]
    small = {lane_partition(d, 3, 4, 64) for d in ids}
    bulk = {lane_partition(d, 3000, 4, 64) for d in ids}
    assert small == {0, 1} and bulk == {2, 3}  # both halves used, never crossed
    assert {lane_partition(d, 64, 12, 64) for d in ids} == set(range(6))  # the boundary is small
    assert {lane_partition(d, 65, 12, 64) for d in ids} == set(range(6, 12))
    assert {lane_partition(d, 1, 3, 64) for d in ids} == {0}  # odd counts: small gets p // 2
    assert {lane_partition(d, 100, 3, 64) for d in ids} == {1, 2}


def test_one_document_keeps_one_partition():
    """Every chunk of a document names the same partition (its chunks stay in order),
    on every worker: CRC-32, not Python's salted hash."""
    assert lane_partition("p.report", 500, 12, 64) == lane_partition("p.report", 500, 12, 64) == 7


def test_lanes_off():
    assert lane_partition("p.d", 3, 4, 0) is None  # setting 0: the key picks, as before lanes
    assert lane_partition("p.d", 3000, 1, 64) is None  # one partition: nothing to separate
    with pytest.raises(ValueError):
        lane_partition("p.d", -1, 4, 64)


def test_a_project_burst_sends_even_small_documents_to_the_bulk_lane():
    """Project lanes: a document of a project's burst (``bulk``) goes to the bulk half
    whatever its size; the other project's small one stays in the first half."""
    from topics.lanes import half_partition

    ids = [f"proj.doc-{i}" for i in range(200)]
    assert {lane_partition(d, 3, 4, 64, bulk=True) for d in ids} == {2, 3}
    assert {half_partition(d, True, 4) for d in ids} == {2, 3}
    assert {half_partition(d, False, 4) for d in ids} == {0, 1}
    assert half_partition("proj.doc-1", True, 1) is None  # one partition: the key picks
    assert lane_partition("proj.doc-1", 3, 4, 0, bulk=True) is None  # size lanes off


def test_burst_lane_counts_beyond_the_threshold():
    from topics.lanes import burst_lane

    assert [burst_lane(n, 8) for n in (1, 8, 9, 500)] == [False, False, True, True]
    assert not burst_lane(10_000, 0)  # 0: project lanes off
