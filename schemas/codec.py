"""The one serializer for every ragstream message: orjson, registered with Faust.

Records declare ``serializer="orjson"``; nothing else calls json.dumps around a send.
"""
from __future__ import annotations

from typing import Any

import orjson
from faust.serializers import codecs

CODEC_NAME = "orjson"


class OrjsonCodec(codecs.Codec):
    """Faust codec backed by orjson (UTF-8 JSON bytes; numpy arrays allowed)."""

    def _dumps(self, obj: Any) -> bytes:
        return orjson.dumps(obj, option=orjson.OPT_SERIALIZE_NUMPY)

    def _loads(self, s: bytes) -> Any:
        return orjson.loads(s)


codecs.register(CODEC_NAME, OrjsonCodec())
