"""The exit codes of every command, in one place, so a scheduler can act on them.

A nightly job needs to tell three kinds of trouble apart: work a person must look at, a
command line or input that can never work as given, and a temporary failure that the same
command will get past later. 75 is `EX_TEMPFAIL` from sysexits.h, the code mail systems and
schedulers already read as "try again later".
"""

from __future__ import annotations

OK = 0
"""Everything was done (published, or already there)."""
LOOK = 1
"""A person must look: inputs or bundles refused by policy, failed checks, conflicts."""
UNUSABLE = 2
"""Unusable input, usage or credentials: the same command will fail the same way."""
TEMPORARY = 75
"""A temporary failure (the Hub unavailable or rate limiting after retries, or the bundles
folder locked by another run): retry later; nothing was half-published."""

INTERRUPTED = 130
"""Stopped by Ctrl-C (SIGINT, 128 + 2); nothing partial was left behind."""
TERMINATED = 143
"""Stopped by SIGTERM (128 + 15: a CI timeout, `kill`); nothing partial was left behind."""

_PRECEDENCE = (UNUSABLE, LOOK, TEMPORARY)


def combine(*codes: int) -> int:
    """The exit code of a command whose steps ended with `codes`.

    What asks the most of a person wins: unusable (2), then a person must look (1), then
    retry later (75). A refusal is reported even when the Hub was also down, because a retry
    would not make it go away; a code outside the table counts as 1.
    """
    present = {code for code in codes if code != OK}
    for code in _PRECEDENCE:
        if code in present:
            return code
    return LOOK if present else OK
