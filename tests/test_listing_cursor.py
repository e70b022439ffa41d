"""The listing cursor round-trips and refuses what it did not hand out."""
from datetime import datetime, timezone

import pytest

from api.listing_cursor import BadCursor, decode_cursor, encode_cursor


def test_a_cursor_round_trips_to_the_microsecond():
    stamp = datetime(2026, 12, 6, 1, 2, 3, 456789, tzinfo=timezone.utc)
    assert decode_cursor(encode_cursor(stamp, "p1.doc-ab|c")) == (stamp, "p1.doc-ab|c")


@pytest.mark.parametrize("cursor", [
    "", "x" * 600, "!!!", "bm8tc2VwYXJhdG9y",            # "no-separator"
    "MjAyNi0xMi0wNlQwMTowMjowMw",                        # no "|" and no id
    "MjAyNi0xMi0wNlQwMTowMjowM3w",                       # naive time, empty id
    "bm90LWEtZGF0ZXxkb2M",                                # "not-a-date|doc"
    "MjAyNi0xMi0wNlQwMTowMjowM3xkb2M",                   # naive time "...03|doc"
    "_-8",                                               # bytes that are not UTF-8
])
def test_anything_else_is_a_bad_cursor(cursor):
    with pytest.raises(BadCursor):
        decode_cursor(cursor)
