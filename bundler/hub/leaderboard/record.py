"""The record a bundler commit leaves beside the tables: what it derived, so that a later read
tells the tables and card it wrote from anything changed outside it.

`leaderboard/derived.json` is written in the same commit as the tables. It names the bytes of
every table and of the card as derived (sha256 and git blob id), the head the commit was
planned on, and the bundles left off the board, each with why. Review refuses a pull request
that touches `leaderboard/`, but a maintainer can merge one in the Hub's web page, record and
all: a read believes only a record written by a commit that is no such merge
(`bundler.hub.leaderboard.provenance`), takes the tables as that commit wrote them, checked
byte for byte against the record, and compares `bundles/` with that commit's tree. Whatever
changed since (a merge in the Hub's web page, a hand edit or deletion, a table or card edited
by anyone) no longer matches, and what it affects is derived again. A branch without a record
has tables nobody vouches for: they are never read, and the board is derived from its bundles.
So has a branch whose record is of another format: format 1 was written in layout 2, before
`bundles/` had shards, and its board is derived again so that its bundles are moved into their
shards (bundler.hub.repo.paths). Format 3 wrote the tables' timestamps in nanoseconds (and
milliseconds): its parts are read once more, and every table written again in microseconds.
"""

from __future__ import annotations

import hashlib
import json
from typing import Literal

from pydantic import Field, ValidationError

from bundler.core.model import Model
from bundler.hub.client.remote import RemoteFile, git_blob_id
from bundler.hub.repo.paths import CHARTS_DIR

LAST_ONE_FILE_FORMAT = 2
"""The last format of the record whose all-tasks table is one file."""
LAST_NANOSECOND_FORMAT = 3
"""The last format of the record whose tables hold run dates in nanoseconds."""
CHART_LOOK = "2"
"""How this bundler draws a chart (bundler.hub.leaderboard.chart), named by the record beside
each chart it wrote: 2 is sized to its entries and names each by its model, where 1 (a chart
named no look) was a fixed 800 x 600 of folder names. A commit by a bundler that draws charts
draws again every chart of another look, so that a board's charts show one look."""


class DerivedFile(Model):
    """The bytes a commit wrote at a path, as the Hub names them: the sha256 for a file it
    stores in LFS, the git blob id for a regular one."""

    sha256: str
    blob_id: str
    look: str | None = Field(default=None, exclude_if=lambda look: look is None)
    """A chart's look (CHART_LOOK) as drawn; None for a chart drawn before looks were named,
    and absent for a table or the card."""

    @classmethod
    def of(cls, data: bytes, path: str | None = None) -> DerivedFile:
        """The bytes written at `path`: a chart there is of this bundler's look."""
        look = CHART_LOOK if path is not None and path.startswith(f"{CHARTS_DIR}/") else None
        return cls(sha256=hashlib.sha256(data).hexdigest(), blob_id=git_blob_id(data), look=look)

    def matches(self, remote: RemoteFile | None) -> bool:
        """Whether the Hub's file holds exactly these bytes."""
        if remote is None:
            return False
        if remote.lfs_sha256 is not None:
            return remote.lfs_sha256 == self.sha256
        return remote.blob_id == self.blob_id

    def listed_as(self, path: str) -> RemoteFile:
        """These bytes as a listing would name them, to find a local copy of them."""
        return RemoteFile(path, 0, self.blob_id, self.sha256)


class TaskTally(Model):
    """A task's bundles on the board, counted by the commit that wrote the record, and the
    metric its rows are scored by: what a commit that only adds bundles needs to know of the
    task's other rows, so that it reads none of them."""

    total: int
    complete: int
    metric: str | None = None


class BoardRecord(Model):
    """What one bundler commit derived (see the module docstring)."""

    format: Literal[2, 3, 4] = 4
    """4 since every timestamp in the tables is in microseconds, the run date's text beside
    it; 3 had run dates in nanoseconds (read once more, to be written again:
    LAST_NANOSECOND_FORMAT); 3 and 2 before it hold the all-tasks table in parts, each row
    scored; 2 had it in one file (read once more, to be split: LAST_ONE_FILE_FORMAT); a record
    of format 1, before bundles had shards, vouches for nothing."""
    parent: str
    """The head the commit was planned on: every record differs from the one before it, so a
    commit of bundles always rewrites it and marks itself as the bundler's."""
    files: dict[str, DerivedFile]
    """Each table and the card, by path, as written or found true by the commit."""
    scoring: dict[str, str] = Field(default_factory=dict)
    """What each task's rows are scored by (`TaskScoring.digest`): a task whose scoring is
    another by the next commit has its rows scored again."""
    left_off: dict[str, str] = Field(default_factory=dict)
    """Bundles left off the board, by the path of the file that names them, with why: named
    again by every read until the bundle is fixed or removed."""
    tasks: dict[str, TaskTally] | None = None
    """Each task's tally; None in a record written before tallies were kept (its next commit
    reads every part of the table once, and writes them)."""
    card_shared: bool = Field(default=False, exclude_if=lambda shared: not shared)
    """The card holds its owner's text beside the board's section (`init --adopt`,
    bundler.hub.leaderboard.card_section): a read reads the card, to keep that text. Absent
    (false) where the board owns the whole card, which a read then need not download."""

    def holds(self, path: str, listed: RemoteFile | None) -> bool:
        """Whether the branch's file at `path`, as `listed`, holds the bytes this record names
        there (False where it names none)."""
        derived = self.files.get(path)
        return derived is not None and derived.matches(listed)

    def to_bytes(self) -> bytes:
        return (json.dumps(self.model_dump(mode="json"), indent=1, sort_keys=True) + "\n").encode()

    @classmethod
    def parse(cls, data: bytes) -> BoardRecord | None:
        """The record these bytes hold; None when they hold none (edited, truncated, another
        format): the branch's tables are then vouched for by nothing."""
        try:
            return cls.model_validate_json(data)
        except ValidationError:
            return None
