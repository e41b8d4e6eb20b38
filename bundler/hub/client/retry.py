"""How often, and after how long, a failed commit to the Hub is tried again (upload, card).
A module of plain numbers, so that the options models can name them without loading the Hub
client."""

from __future__ import annotations

COMMIT_ATTEMPTS = 8
"""How often `commit_replanned` plans and tries a commit before giving up (upload, card)."""
COMMIT_RETRY_SECONDS = 0.5
"""The first wait after a failed commit; it doubles, up to RETRY_MAX_SECONDS."""
RETRY_MAX_SECONDS = 30.0
"""The longest wait between two attempts."""
