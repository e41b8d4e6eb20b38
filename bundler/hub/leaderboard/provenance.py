"""Which record of what was derived a read of the branch may build on: the one written by the
last commit that is not a pull request merged on the Hub.

The record (`bundler.hub.leaderboard.record`) names the bytes of every table, chart and the
card, so an edit of any of them alone is caught. But a pull request can edit them all and the
record with them, consistently: merged in the Hub's web page, its commit is the last to have
written the record, and a read that took that commit's word would publish the forged board.
Review refuses such a pull request; a maintainer merging it in the web page does not look.

So the commit that last wrote the record is judged by what the Hub says of it, which the
pull request's author cannot choose: the Hub titles the commit that merges pull request N
"<its title> (#N)" (a squash of its changes onto the branch, one parent), so a commit titled
so is a merge, and its record is passed over. The record then built on is the one the branch
held just before that commit (at its first parent, the second commit the Hub lists from it):
the commit that last wrote that one is judged in turn, back to a commit that is not a merge.
Everything changed since that commit, the merge's edits included, is found as any edit is
(the bytes on the branch are not the ones its record names) and derived again.

Cost: nothing more when nothing was merged over the record (the branch's listing names the
commit that last changed each file, with its title); two requests per merged commit passed
over (the first page of the Hub's commit listing from it, for its parent; the record's entry
there), and the record's bytes at the commit believed; at most MAX_MERGES_PASSED, then
nothing vouches for the tables and the board is derived from every bundle.

What it trusts: anyone with write access to the repository. A direct commit (a maintainer's
upload in the web page, `hf upload`, a hand-made record) is not a merge, and its record is
believed: write access is what running the bundler needs anyway. It would also be fooled by a
Hub that titled a merge otherwise.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote

from pydantic import TypeAdapter, ValidationError

from bundler.core.errors import HubUnavailableError
from bundler.core.model import Model
from bundler.hub.client.remote import LastCommit, RemoteEntry, RemoteFile
from bundler.hub.client.session import MAX_SMALL_FILE_BYTES, REPO_TYPE, HubSession
from bundler.hub.leaderboard.record import BoardRecord
from bundler.hub.leaderboard.tablecache import cached_table, keep_table
from bundler.hub.repo.paths import RECORD

MERGED_TITLE = re.compile(r"\(#\d+\)\s*\Z")
"""The end of the title the Hub gives the commit that merges a pull request."""
MAX_MERGES_PASSED = 20
"""Merged commits over the record passed over before giving up on every record."""
MAX_LISTING_BYTES = MAX_SMALL_FILE_BYTES
"""A page of the commit listing: 50 commits, each with its message, a few KB."""


class ListedCommit(Model):
    """A commit as the Hub's commit listing names it (the rest of the entry is not read)."""

    id: str


LISTING = TypeAdapter(list[ListedCommit])


@dataclass(frozen=True)
class Vouched:
    """The record a read builds on, and the commit that wrote it."""

    record: BoardRecord | None
    """None when that commit's record is not one (edited, truncated, another format)."""
    commit: str


def merged(commit: LastCommit) -> bool:
    """Whether the Hub made this commit to merge a pull request."""
    return MERGED_TITLE.search(commit.title) is not None


def vouched_record(
    session: HubSession, listed: RemoteFile | None, tables: RemoteEntry | None
) -> Vouched | None:
    """The record of the last commit to write it that is not a merged pull request, from the
    record as the branch lists it (with the commit that last changed it), or, where the branch
    holds none, from `tables` (the folder of the tables, as listed): a merged pull request that
    deleted the record is passed over too. None when there is no such record (every one
    merged, too many merged, or deleted by a commit that is no merge)."""
    at = listed
    if at is None:
        last = tables.last_commit if tables is not None else None
        if last is None or not merged(last):
            return None
        at = _record_before(session, last.oid)
    for _ in range(MAX_MERGES_PASSED + 1):
        if at is None or at.last_commit is None:
            return None
        last = at.last_commit
        if not merged(last):
            return Vouched(BoardRecord.parse(read_kept(session, RECORD, at, last.oid)), last.oid)
        at = _record_before(session, last.oid)
    return None


def _record_before(session: HubSession, commit: str) -> RemoteFile | None:
    """The record as the branch listed it at `commit`'s first parent (None: it held none)."""
    parent = first_parent(session, commit)
    found = session.entries([RECORD], parent).get(RECORD) if parent is not None else None
    return found if isinstance(found, RemoteFile) else None


def first_parent(session: HubSession, commit: str) -> str | None:
    """The first parent of `commit` (None for a first commit): the second entry of the first
    page of the Hub's commit listing from it (the client's `list_repo_commits` reads every
    page, the whole history). An answer that is no such listing is the Hub's fault: tried
    again later."""
    url = f"{session.api.endpoint}/api/{REPO_TYPE}s/{session.repo_id}/commits/{quote(commit)}"
    doing = f"listing the commits from {commit}"
    data = session.read_url(doing, url, "the commit listing", MAX_LISTING_BYTES)
    try:
        history = LISTING.validate_json(data)
    except ValidationError:
        history = []
    if not history or history[0].id != commit:
        raise HubUnavailableError(f"{doing}: the Hub's answer is not a listing of commits")
    return history[1].id if len(history) > 1 else None


def read_kept(session: HubSession, path: str, listed: RemoteFile, revision: str) -> bytes:
    """A small file of the branch's: the local copy of the bytes listed, else read at
    `revision` (and kept)."""
    data = cached_table(session, path, listed, MAX_SMALL_FILE_BYTES)
    if data is None:
        data = session.read_small_file(path, revision)
        keep_table(session, path, data)
    return data
