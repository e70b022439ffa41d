"""Charset names that mail, HTML and XML declare but Python's codecs lack.

:func:`install` registers a ``codecs`` search function (idempotent) so that
``codecs.lookup``, ``bytes.decode``, the ``email`` package and every parser built on
them accept these names.  It is consulted only after Python's own lookup failed.

Covered:

* ISO-8859-6/-8 with the ``-i`` (implicit) and ``-e`` (explicit) directionality
  suffixes of RFC 1556 (``iso-8859-8-i``, ``ISO_8859-6-E``, ``csISO88598I``...):
  the bytes are plain ISO-8859-6/8, the suffix only says how to lay out bidi text.
* :data:`IANA_ALIASES`: IANA registry and WHATWG names with no Python alias, each
  mapped to the Python codec that decodes the same bytes (a superset where the
  WHATWG Encoding Standard decodes them so: ``x-sjis`` → ``cp932``,
  ``ks_c_5601-1987`` → ``cp949``, ``windows-874`` → ``cp874``...).
* Any name that becomes a known codec once its case, ``_``/``-``/spaces and a
  leading ``x-``/``cs`` are normalised.

A name nothing resolves (``x-unknown-foo``, ``x-mac-hebrew``, which Python has no
codec for) still raises LookupError from ``codecs.lookup``; the readers that must
decode anyway use :func:`decode_fallback` (charset-normalizer's best guess, else
UTF-8 with replacement characters): :func:`install` sets it under the ``email``
package's text getter (``EmailMessage.get_content``), and :func:`decode_html` uses
it for HTML whose declared charset is unknown.
"""
from __future__ import annotations

import codecs
import re

#: lower-case name (after ``_normalise``) -> Python codec name
IANA_ALIASES: dict[str, str] = {
    "iso-8859-8-i": "iso8859_8", "iso-8859-8-e": "iso8859_8", "iso88598i": "iso8859_8",
    "iso88598e": "iso8859_8", "logical": "iso8859_8", "visual": "iso8859_8",
    "iso-ir-138": "iso8859_8",
    "iso-8859-6-i": "iso8859_6", "iso-8859-6-e": "iso8859_6", "iso88596i": "iso8859_6",
    "iso88596e": "iso8859_6", "iso-ir-127": "iso8859_6", "ecma-114": "iso8859_6",
    "asmo-708": "iso8859_6",
    "windows-874": "cp874", "x-windows-874": "cp874", "tis-620": "cp874", "iso-8859-11": "cp874",
    "dos-874": "cp874",
    "ks_c_5601-1987": "cp949", "ks-c-5601-1987": "cp949", "ks_c_5601-1989": "cp949",
    "ksc5601": "cp949", "ksc_5601": "cp949", "ks-c5601": "cp949", "windows-949": "cp949",
    "iso-ir-149": "cp949", "korean": "cp949",
    "x-sjis": "cp932", "shift-jis": "cp932", "ms_kanji": "cp932", "windows-31j": "cp932",
    "x-euc-jp": "euc_jp", "x-euc": "euc_jp",
    "x-gbk": "gbk", "gb_2312": "gbk", "gb2312-80": "gbk", "chinese": "gbk", "csgb2312": "gbk",
    "x-gb2312": "gbk", "iso-ir-58": "gbk", "gb_2312-80": "gbk",
    "x-big5": "big5hkscs", "big5-hkscs": "big5hkscs", "cn-big5": "big5hkscs",
    "x-x-big5": "big5hkscs",
    "x-mac-roman": "mac_roman", "macintosh": "mac_roman", "mac": "mac_roman",
    "x-mac-cyrillic": "mac_cyrillic", "x-mac-ukrainian": "mac_cyrillic",
    "x-mac-greek": "mac_greek", "x-mac-turkish": "mac_turkish", "x-mac-iceland": "mac_iceland",
    "x-mac-ce": "mac_latin2", "x-mac-centraleurroman": "mac_latin2",
    "x-user-defined": "latin_1", "x-unknown": "latin_1", "unknown-8bit": "latin_1",
    "x-cp1250": "cp1250", "x-cp1251": "cp1251", "x-cp1252": "cp1252",
    "windows-1252": "cp1252", "ansi": "cp1252", "ansi_x3.110-1983": "latin_1",
    "iso-8859-1-windows-3.0-latin-1": "cp1252", "iso-8859-1-windows-3.1-latin-1": "cp1252",
    "iso-8859-2-windows-latin-2": "cp1250", "iso-8859-9-windows-latin-5": "cp1254",
    "unicode-1-1-utf-7": "utf_7", "unicode-2-0-utf-7": "utf_7", "x-unicode20utf7": "utf_7",
    "unicode-1-1-utf-8": "utf_8", "unicode11utf8": "utf_8", "unicode20utf8": "utf_8",
    "x-unicode20utf8": "utf_8", "utf8mb4": "utf_8", "utf-8mb4": "utf_8",
    "unicodefffe": "utf_16_be", "unicodefeff": "utf_16_le", "ucs-2": "utf_16", "iso-10646-ucs-2": "utf_16",
    "x-utf-16le": "utf_16_le", "x-utf-16be": "utf_16_be",
    "koi8-ru": "koi8_u", "koi": "koi8_r", "koi8": "koi8_r", "cskoi8r": "koi8_r",
    "iso-ir-100": "latin_1", "iso-ir-101": "iso8859_2", "iso-ir-109": "iso8859_3",
    "iso-ir-110": "iso8859_4", "iso-ir-144": "iso8859_5", "iso-ir-126": "iso8859_7",
    "iso-ir-148": "iso8859_9", "iso-ir-157": "iso8859_10", "iso-ir-226": "iso8859_16",
    "elot_928": "iso8859_7", "ecma-118": "iso8859_7", "sun_eu_greek": "iso8859_7",
    "l9": "iso8859_15", "latin-9": "iso8859_15", "latin9": "iso8859_15", "iso_8859-15": "iso8859_15",
    "csisolatinarabic": "iso8859_6", "csisolatinhebrew": "iso8859_8",
    "csisolatingreek": "iso8859_7", "csisolatincyrillic": "iso8859_5",
    "csshiftjis": "cp932", "cseuckr": "cp949", "csbig5": "big5hkscs", "csutf8": "utf_8",
    "x-iscii-de": "latin_1",
}

_SUFFIXED = re.compile(r"^iso[-_ ]?8859[-_ ]?(6|8)[-_ ]?(i|e)$")
_installed = False


def _normalise(name: str) -> str:
    return re.sub(r"[\s]+", "-", name.strip().strip('"\'').lower())


def resolve(name: str) -> str | None:
    """Python codec name for charset ``name``, or None when nothing matches.

    Tries Python's own lookup first, then the ``-i``/``-e`` suffix rule, then
    :data:`IANA_ALIASES`, then a loosened spelling (``_``→``-``, no ``x-``/``cs``).
    """
    norm = _normalise(name)
    for candidate in (norm, norm.replace("_", "-")):
        if candidate in IANA_ALIASES:
            return IANA_ALIASES[candidate]
    match = _SUFFIXED.match(norm)
    if match:
        return f"iso8859_{match.group(1)}"
    for candidate in (norm.replace("_", "-"), re.sub(r"^(x-|cs)", "", norm)):
        if candidate != norm:
            if candidate in IANA_ALIASES:
                return IANA_ALIASES[candidate]
            info = _builtin(candidate)
            if info is not None:
                return info.name
    return None


def _builtin(name: str) -> codecs.CodecInfo | None:
    """Python's own codec for ``name`` (the stdlib ``encodings`` search, never ours)."""
    import encodings

    return encodings.search_function(name.replace("-", "_"))


def _search(name: str) -> codecs.CodecInfo | None:
    target = resolve(name)
    if target is None or _normalise(target) == _normalise(name):
        return None
    return _builtin(target)


#: byte-order marks, longest first (UTF-32LE's starts with UTF-16LE's)
UNICODE_BOMS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),
                (codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"),
                (codecs.BOM_UTF16_BE, "utf-16"))
SNIFF_BYTES = 64 * 1024  # how much of the data :func:`sniff_unicode` reads
MIN_ZERO_SHARE = 0.10  # of code units whose high byte(s) are zero: Latin-script text has ~100 %,
#                        Cyrillic or Greek ~15 % (spaces, digits, punctuation); ASCII/UTF-8 text 0
MAX_BAD_SHARE = 0.01  # of decoded characters that are controls, unassigned or private use


def sniff_unicode(data: bytes) -> str | None:
    """The Python codec of ``data`` when it is UTF-32 or UTF-16, with or without a
    byte-order mark, or UTF-8 with one; None otherwise (plain UTF-8, legacy charsets,
    binary).

    A BOM decides alone (``"utf-32"``, ``"utf-16"``, ``"utf-8-sig"``).  Without one,
    the first :data:`SNIFF_BYTES` bytes are read as code units of 4 and 2 bytes in each
    byte order: a candidate needs at least :data:`MIN_ZERO_SHARE` of its units with a
    zero high part (UTF-32: every unit's top byte zero) and at most
    :data:`MAX_BAD_SHARE` units that are zero altogether, then a strict decode (a unit
    cut by the sample's end is allowed) with at most :data:`MAX_BAD_SHARE` control,
    unassigned or private-use characters.  UTF-16 text in a script with no zero bytes
    at all (Chinese, say) is not recognised: nothing tells it apart from an 8-bit
    charset.
    """
    for bom, name in UNICODE_BOMS:
        if data.startswith(bom):
            return name
    sample = data[:SNIFF_BYTES]
    for unit, codec in ((4, "utf-32-le"), (4, "utf-32-be"), (2, "utf-16-le"), (2, "utf-16-be")):
        usable = sample[: len(sample) - len(sample) % unit]
        if len(usable) < 2 * unit or not _zero_pattern(usable, unit, codec.endswith("le")):
            continue
        text = _strict_prefix(usable, codec)
        if text and _bad_share(text) <= MAX_BAD_SHARE:
            return codec
    return None


def _zero_pattern(data: bytes, unit: int, little: bool) -> bool:
    """True when ``data``'s ``unit``-byte code units look like text in that byte order:
    enough units with a zero high part, almost no units that are zero altogether."""
    from array import array

    units = len(data) // unit
    if unit == 4:  # code points stop at U+10FFFF: the top byte is always zero
        top, second = (data[3::4], data[1::4]) if little else (data[0::4], data[2::4])
        high_zero = second.count(0) if top.count(0) == units else 0
    else:
        high_zero = (data[1::2] if little else data[0::2]).count(0)
    all_zero = array("I" if unit == 4 else "H", data).count(0)
    return high_zero >= MIN_ZERO_SHARE * units and all_zero <= MAX_BAD_SHARE * units


def _strict_prefix(data: bytes, codec: str) -> str | None:
    """``data`` decoded strictly, allowing only a unit (or surrogate pair) cut at the end."""
    try:
        return data.decode(codec)
    except UnicodeDecodeError as exc:
        if exc.start < len(data) - 4:
            return None
        return data[: exc.start].decode(codec, errors="replace")


def _bad_share(text: str) -> float:
    import unicodedata

    bad = sum(1 for c in text if c not in "\t\n\r\f\v"
              and unicodedata.category(c) in ("Cc", "Cn", "Co", "Cs"))
    return bad / max(1, len(text))


def decode_fallback(data: bytes) -> str:
    """``data`` decoded without a usable declared charset: UTF-32/UTF-16 when
    :func:`sniff_unicode` finds it (with or without a byte-order mark), else strict
    UTF-8 when it is valid, else charset-normalizer's best guess, else UTF-8 with
    U+FFFD replacements.  Never raises."""
    unicode = sniff_unicode(data)
    if unicode:
        return data.decode(unicode, errors="replace")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    try:
        from charset_normalizer import from_bytes

        best = from_bytes(data).best()
        if best is not None:
            return str(best)
    except Exception:  # noqa: BLE001 - a detector failure falls through to replacement
        pass
    return data.decode("utf-8", errors="replace")


def decode(data: bytes, charset: str | None, errors: str = "replace") -> str:
    """``data`` decoded with ``charset`` (aliases included), or :func:`decode_fallback`
    when the name is missing or unknown."""
    if charset:
        try:
            return data.decode(charset.strip().strip('"\''), errors=errors)
        except LookupError:
            pass
    return decode_fallback(data)


_META = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9._:()+-]+)""", re.IGNORECASE)


def declared_html_charset(data: bytes) -> str | None:
    """The charset an HTML document declares in its first 4 KiB (``<meta charset>``,
    ``http-equiv`` Content-Type, or the XML declaration's ``encoding``); None when none."""
    head = data[:4096]
    match = _META.search(head) or re.search(rb"""<\?xml[^>]+encoding\s*=\s*["']([A-Za-z0-9._:()+-]+)""", head)
    return match.group(1).decode("ascii") if match else None


def decode_html(data: bytes) -> str:
    """An HTML document's bytes as text: a BOM or UTF-32/UTF-16 content wins
    (:func:`sniff_unicode`), then the declared charset (with the aliases above; a
    declared UTF-16 or UTF-32 means UTF-8 there, as the WHATWG prescan rules, since the
    declaration was readable as ASCII), then :func:`decode_fallback` for a missing or
    unknown one."""
    unicode = sniff_unicode(data)
    if unicode:
        return data.decode(unicode, errors="replace")
    declared = declared_html_charset(data)
    if declared and re.match(r"(?i)(x-)?(utf|ucs)-?(16|32|2|4)", declared.strip()):
        declared = "utf-8"
    return decode(data, declared)


def _email_text(part, errors: str = "replace") -> str:
    """``email`` text getter: as the standard library's, but an unknown charset is
    decoded with :func:`decode_fallback` instead of raising LookupError."""
    content = part.get_payload(decode=True)
    return decode(content, part.get_param("charset", "ASCII"), errors)


def install() -> None:
    """Register the alias search function with ``codecs`` and the fallback text getter
    with ``email`` (idempotent, per process)."""
    global _installed
    if not _installed:
        from email.contentmanager import raw_data_manager

        codecs.register(_search)
        raw_data_manager.add_get_handler("text", _email_text)
        _installed = True
