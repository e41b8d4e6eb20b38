"""Names that identify a bundle: slugs, the capability fingerprint, and the bundle id.

These reproduce the harness's own definitions exactly (see statics-outputs.md), because a bundle
id that differs from the one published GPTNT submissions use would split one player setup into
two on the leaderboard.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

SAFE_TASK_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
"""A task name becomes a path component, so it must not be able to escape or break a path."""

_NOT_SLUG = re.compile(r"[^a-z0-9]+")

FINGERPRINT_EXCLUDED_KEY = "usage_limits"
"""Usage limits are budget settings, not the player's setup, so the harness leaves them out."""


def slugify(name: str) -> str:
    """Lowercase, collapse each run of characters outside [a-z0-9] into one '-', strip '-'."""
    return _NOT_SLUG.sub("-", name.lower()).strip("-")


def capability_fingerprint(capabilities: dict[str, Any]) -> str:
    """The harness's player-setup fingerprint: BLAKE2b-128 of the sorted JSON, minus usage_limits.

    It must be computed from the capabilities exactly as read from run_meta.json (not from a
    re-serialised model), because any difference in keys or values changes the digest.
    """
    kept = {key: value for key, value in capabilities.items() if key != FINGERPRINT_EXCLUDED_KEY}
    encoded = json.dumps(kept, sort_keys=True).encode("utf-8")
    return hashlib.blake2b(encoded, digest_size=16).hexdigest()
