"""JSON text that every parser takes, for the reports the bundler writes (`--json`, sync's
report file): Python's `json` writes a lone surrogate as a `\\udXXX` escape, which is valid
JSON syntax but not Unicode, and strict parsers (serde_json, pydantic's) refuse it."""

from __future__ import annotations

import re
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")


def valid_unicode(value: Any) -> Any:
    """`value` with every string made valid Unicode, which strict JSON parsers demand: a lone
    surrogate (a file name's byte that is not UTF-8, kept by `os` as U+DC80 to U+DCFF; or a
    `\\udXXX` escape in a stranger's JSON) becomes the text `\\xNN` or `\\udXXX`."""
    if isinstance(value, str):
        return value if not _SURROGATE.search(value) else _SURROGATE.sub(_escaped, value)
    if isinstance(value, dict):
        return {valid_unicode(key): valid_unicode(item) for key, item in value.items()}
    if isinstance(value, list):
        return [valid_unicode(item) for item in value]
    return value


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}"
