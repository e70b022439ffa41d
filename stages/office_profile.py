"""The LibreOffice user profile every conversion runs with: links and macros blocked.

Second layer of "the converter reads nothing outside the document" (README; first:
:mod:`stages.external_refs`, third: :mod:`stages.sandbox`).  :func:`seed_profile`
writes ``user/registrymodifications.xcu`` into a fresh ``-env:UserInstallation``
directory before LibreOffice first starts there:

- ``Common/Security/Scripting/BlockUntrustedRefererLinks = true``: with no trusted
  locations configured, no document may load a linked picture, movie, sound or
  other external entity.  Measured (LibreOffice 7.4.7, shared/cases R11): without
  it the ODT's ``file:///tmp/ragstream-canary.svg`` and
  ``/usr/share/pixmaps/debian-logo.png`` both ended up in the PDF; with it, neither.
- macros never run (``MacroSecurityLevel = 3``, ``DisableMacrosExecution``);
- Writer and Calc never update links when loading (``Content/Update/Link``).
"""
from __future__ import annotations

from pathlib import Path

_ITEMS = (
    ("/org.openoffice.Office.Common/Security/Scripting", "BlockUntrustedRefererLinks", "true"),
    ("/org.openoffice.Office.Common/Security/Scripting", "MacroSecurityLevel", "3"),
    ("/org.openoffice.Office.Common/Security/Scripting", "DisableMacrosExecution", "true"),
    # "update links when loading": Writer's values are sw's SwLinkUpdateMode (0 never,
    # 1 on request, 2 always), Calc's are ScLkUpdMode (0 always, 1 never, 2 on request)
    ("/org.openoffice.Office.Writer/Content/Update", "Link", "0"),
    ("/org.openoffice.Office.Calc/Content/Update", "Link", "1"),
)


def registry_xml() -> str:
    """The ``registrymodifications.xcu`` text with the settings above."""
    items = "\n".join(
        f'<item oor:path="{path}"><prop oor:name="{name}" oor:op="fuse"><value>{value}</value></prop></item>'
        for path, name, value in _ITEMS)
    return ('<?xml version="1.0" encoding="UTF-8"?>\n'
            '<oor:items xmlns:oor="http://openoffice.org/2001/registry" '
            'xmlns:xs="http://www.w3.org/2001/XMLSchema" '
            'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">\n'
            f"{items}\n</oor:items>\n")


def seed_profile(profile_dir: Path) -> Path:
    """Write the locked-down settings into ``profile_dir`` (an ``-env:UserInstallation``
    directory; created if missing), overwriting what a previous run left.  Returns
    the path of the ``.xcu`` file."""
    user = Path(profile_dir) / "user"
    user.mkdir(parents=True, exist_ok=True)
    xcu = user / "registrymodifications.xcu"
    xcu.write_text(registry_xml(), encoding="utf-8")
    return xcu
