"""PDF streams that decode to more than a page could ever need: measured, bounded,
and cut out before any parser decodes them.

A 2 KB PDF whose page-2 content stream passes through three nested ``/FlateDecode``
filters inflates to 64 GiB (shared/cases R10); pdfminer and pdfium decode a stream
whole, so the parse process grew to ~7 GB and aborted under an 8 GB address-space
cap.  :func:`defuse` measures, before any parser runs, what every stream a page
reaches (its contents, form and image XObjects, recursively, fonts' embedded
programs, annotation appearances) decodes to — decoding incrementally, filter by
filter, and stopping as soon as the output passes the limit ``max_stream_decoded_mb``
(:mod:`stages.limits`) — so the measurement itself costs at most that much output
per stream.  Pages that reach such a stream are emptied in a copy of the file (their
content stream replaced by an empty one, their resources dropped) and reported in
``skipped``, with a reason that names the limit; the other pages are read as usual.

Filters measured: ``FlateDecode``, ``LZWDecode`` (streamed), ``ASCIIHexDecode``,
``ASCII85Decode``, ``RunLengthDecode``; image codecs (``DCTDecode``, ``JPXDecode``,
``JBIG2Decode``, ``CCITTFaxDecode``) end the chain: their output is bounded by the
image's declared pixels, which :func:`stages.limits.check_pixels` checks.
"""
from __future__ import annotations

import base64
import binascii
import zlib
from pathlib import Path

from stages.limits import limit

_CHUNK = 1 << 16
_IMAGE_CODECS = {"/DCTDecode", "/JPXDecode", "/JBIG2Decode", "/CCITTFaxDecode"}


class _TooBig(Exception):
    pass


def _flate(chunks, cap: int):
    d = zlib.decompressobj()
    produced = 0
    for chunk in chunks:
        while chunk:
            out = d.decompress(chunk, _CHUNK)
            chunk = d.unconsumed_tail
            produced += len(out)
            if produced > cap:
                raise _TooBig
            yield out
            if d.eof:
                return
    try:
        yield d.flush()
    except zlib.error:
        return


def _lzw(chunks, cap: int):
    """Streaming LZW (PDF variant: 9-12 bit codes, MSB first, early change)."""
    data = b"".join(chunks)  # the compressed input is small next to the cap
    table = [bytes([i]) for i in range(256)] + [b"", b""]
    width, buf, bits, prev, produced, out = 9, 0, 0, b"", 0, []
    for byte in data:
        buf, bits = (buf << 8) | byte, bits + 8
        while bits >= width:
            bits -= width
            code = (buf >> bits) & ((1 << width) - 1)
            if code == 256:
                table, width, prev = table[:258], 9, b""
                continue
            if code == 257:
                yield b"".join(out)
                return
            entry = table[code] if code < len(table) else prev + prev[:1]
            if prev:
                table.append(prev + entry[:1])
            prev = entry
            produced += len(entry)
            if produced > cap:
                raise _TooBig
            out.append(entry)
            if len(out) > 4096:
                yield b"".join(out)
                out = []
            if len(table) + 1 >= (1 << width) and width < 12:
                width += 1
    yield b"".join(out)


def _whole(decode):
    def run(chunks, cap: int):
        out = decode(b"".join(chunks))
        if len(out) > cap:
            raise _TooBig
        yield out
    return run


def _run_length(data: bytes) -> bytes:
    out, i = bytearray(), 0
    while i < len(data):
        n = data[i]
        if n == 128:
            break
        if n < 128:
            out += data[i + 1:i + 2 + n]
            i += n + 2
        else:
            out += data[i + 1:i + 2] * (257 - n)
            i += 2
    return bytes(out)


def _a85(data: bytes) -> bytes:
    data = data.strip()
    data = data[2:] if data.startswith(b"<~") else data
    return base64.a85decode(data.split(b"~>")[0] + b"~>", adobe=True) if data else b""


def _hex(data: bytes) -> bytes:
    digits = bytes(c for c in data.split(b">")[0] if chr(c) in "0123456789abcdefABCDEF")
    return binascii.unhexlify(digits + (b"0" if len(digits) % 2 else b""))


_DECODERS = {"/FlateDecode": _flate, "/Fl": _flate, "/LZWDecode": _lzw, "/LZW": _lzw,
             "/ASCIIHexDecode": _whole(_hex), "/AHx": _whole(_hex),
             "/ASCII85Decode": _whole(_a85), "/A85": _whole(_a85),
             "/RunLengthDecode": _whole(_run_length), "/RL": _whole(_run_length)}


def _filter_names(stream) -> list[str]:
    """The stream's ``/Filter`` chain as names (``["/FlateDecode", ...]``), [] if none."""
    import pikepdf

    filters = stream.get("/Filter")
    if filters is None:
        return []
    return [str(f) for f in filters] if isinstance(filters, pikepdf.Array) else [str(filters)]


def decoded_size(stream, cap: int) -> int | None:
    """Bytes ``stream`` (a pikepdf Stream) decodes to through its filter chain, or
    None when that passes ``cap`` bytes.  Stops at the first image codec or unknown
    filter (what came out so far is returned); a malformed stream counts what
    decoded before the error (the parser reports the damage)."""
    names = _filter_names(stream)
    try:
        chunks = iter([stream.read_raw_bytes()])
        for name in names:
            decoder = _DECODERS.get(name)
            if decoder is None:
                break
            chunks = decoder(chunks, cap)
        return sum(len(c) for c in chunks)
    except _TooBig:
        return None
    except (zlib.error, ValueError, binascii.Error, IndexError):
        return 0


#: the most one input byte can become through each filter (zlib's ratio limit is
#: 1032:1; an LZW code of 12 bits can emit 4,096 bytes; a run-length pair 128)
_MAX_RATIO = {"/FlateDecode": 1032, "/Fl": 1032, "/LZWDecode": 2731, "/LZW": 2731,
              "/RunLengthDecode": 64, "/RL": 64, "/ASCIIHexDecode": 1, "/AHx": 1,
              "/ASCII85Decode": 1, "/A85": 1}


def exceeds(stream, cap: int) -> bool:
    """True when ``stream`` decodes past ``cap`` bytes.  Streams whose raw length
    times the filters' worst-case ratios stays under ``cap`` (nearly all) are not
    decoded at all; the others are measured by :func:`decoded_size`."""
    names = _filter_names(stream)
    bound = int(stream.get("/Length", 0) or 0) or len(stream.read_raw_bytes())
    for name in names:
        if name not in _MAX_RATIO:
            break
        bound *= _MAX_RATIO[name]
        if bound > cap:
            return decoded_size(stream, cap) is None
    return False


def _page_streams(page):
    """Every stream a page reaches, each once."""
    import pikepdf

    seen: set[tuple[int, int]] = set()
    todo = [page.obj.get("/Contents"), page.obj.get("/Resources"), page.obj.get("/Annots")]
    while todo:
        obj = todo.pop()
        if not isinstance(obj, (pikepdf.Stream, pikepdf.Array, pikepdf.Dictionary)):
            continue  # names, numbers, strings: nothing to decode
        if obj.is_indirect:
            key = obj.objgen
            if key in seen:
                continue
            seen.add(key)
        if isinstance(obj, pikepdf.Stream):
            yield obj
            todo.extend(v for k, v in obj.stream_dict.items() if k in ("/Resources",))
        elif isinstance(obj, pikepdf.Array):
            todo.extend(obj)
        elif isinstance(obj, pikepdf.Dictionary):
            todo.extend(v for k, v in obj.items() if k != "/Parent" and k != "/P")


def defuse(path: Path, first: int, last: int, out_dir: Path) -> tuple[Path, list[str], list[int]]:
    """``(pdf to parse, skipped reasons, emptied page numbers)`` for pages
    ``first..last`` (1-based, inclusive) of ``path``: ``path`` itself and ``[]``,
    ``[]`` when no stream passes the limit; else a copy in ``out_dir`` whose bombed
    pages are empty, with one reason per such page, e.g. ``"page 2: a stream decodes
    past 512 MiB (RAGSTREAM_MAX_STREAM_DECODED_MB)"``.  A file pikepdf cannot open is
    returned as is (the parser reports it)."""
    import pikepdf

    cap_mb = limit("max_stream_decoded_mb")
    if not cap_mb:
        return path, [], []
    cap = cap_mb << 20
    try:
        pdf = pikepdf.open(path)
    except Exception:  # noqa: BLE001 - damage is the parser's to report
        return path, [], []
    with pdf:
        bombed = []
        for number in range(first, min(last, len(pdf.pages)) + 1):
            try:
                if any(exceeds(s, cap) for s in _page_streams(pdf.pages[number - 1])):
                    bombed.append(number)
            except Exception:  # noqa: BLE001 - a damaged page is the parser's to report
                continue
        if not bombed:
            return path, [], []
        for number in bombed:
            page = pdf.pages[number - 1]
            page.obj["/Contents"] = pdf.make_stream(b"")
            page.obj["/Resources"] = pikepdf.Dictionary()
            if "/Annots" in page.obj:
                del page.obj["/Annots"]
        out_dir.mkdir(parents=True, exist_ok=True)
        dst = out_dir / "defused.pdf"
        pdf.save(dst, compress_streams=False, stream_decode_level=pikepdf.StreamDecodeLevel.none)
    reasons = [f"page {n}: a stream decodes past {cap_mb:,} MiB (RAGSTREAM_MAX_STREAM_DECODED_MB)"
               for n in bombed]
    return dst, reasons, bombed
