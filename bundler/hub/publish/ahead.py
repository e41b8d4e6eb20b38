"""Bundle files uploaded ahead of their commit, with an earlier commit of the same upload.

The Hub recommends commits of fewer than 100 files (huggingface.co/docs/hub/repositories-
recommendations: "Commit size: <100 files", "upload files in multiple commits"), so an upload
of more bundles than one commit holds makes several (`plan.batches`). Each commit the client
makes asks the Hub how to upload its files (preupload) and where to put their LFS blobs (LFS
batch) before committing them, and each of those requests takes up to CLIENT_FILES_PER_REQUEST
files. So a commit uploads, with its own files, those of the commits after it while that keeps
it to one such request each: the later commits pass the very same operations to the client,
which remembers that they were uploaded (`CommitOperationAdd`), and ask again only about the
record and card they write, known only once the commit before them has landed (the record
names it), and about any table that came out other than computed ahead (below).

Each commit uploads ahead as many of the next bundles (whole, in order) as fit beside its own
files in one request, so the blobs of an upload of many commits go up ahead of its commits; a
run stopped in between leaves blobs uploaded and not committed, which the next run's LFS batch
request finds on the Hub (those it still keeps) instead of sending them again.

A bundle's own files are uploaded ahead: no commit but its own writes them, so what the
Hub said of them (their upload mode, that they are not there yet) still holds at our own
commits after the one that asked. So are the next commit's tables and charts, when it is the
upload's last and all of its bundles' files are uploaded ahead: the Hub keeps them in LFS
(`*.parquet`, `*.png` in a new repository's `.gitattributes`), so they would take that commit
an LFS batch request of its own. They are computed from the branch as the commit being planned
leaves it (`Holdings.tables_ahead`), and uploaded all but the record, which names that commit
(unknown until it lands), and the card; and none whose bytes the branch holds now, so that the
Hub's answer (the file's id at this head, which the client compares with the bytes to skip an
unchanged file) cannot make the later commit leave out a file it must write. Planned on our
commit, the later commit takes what was computed (the branch is what it was computed from),
the record written again to name that commit (`Holdings.table_operations`); planned on any
other head, it computes its tables again. Either way it passes the operation uploaded ahead
only for a table of the same path and bytes; any other is asked about and uploaded as ever.

When a commit is planned on any other head (someone else committed meanwhile), nothing
uploaded ahead is used: its files are asked about again.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from huggingface_hub import CommitOperationAdd

from bundler.hub.client.commit import Operation
from bundler.hub.publish.plan import LocalBundle

CLIENT_FILES_PER_REQUEST = 256
"""Files huggingface_hub puts in one preupload request and one LFS batch request (its
`_fetch_upload_modes` and `UPLOAD_BATCH_MAX_NUM_FILES`): an upload ahead that stays within
it costs no more requests than the commit's own files alone."""


class UploadAhead:
    """The operations of later commits' bundle files, and of the next commit's tables,
    uploaded (or being uploaded) with an earlier commit made on `head`, by path."""

    def __init__(self) -> None:
        self.head: str | None = None
        self._waiting: dict[str, tuple[Path | bytes, CommitOperationAdd]] = {}
        """By path: what was uploaded (the client keeps a path as text) and its operation."""
        self._tables: dict[str, tuple[bytes, CommitOperationAdd]] = {}
        """The next commit's tables uploaded ahead, as `_waiting`: for that commit alone."""

    def _on(self, head: str) -> None:
        """A commit is planned on `head`: what was uploaded ahead on another line is dropped
        (the branch moved under us: what the Hub said may not hold)."""
        if head != self.head:
            self._waiting.clear()
            self._tables.clear()
            self.head = head

    def operations(self, files: dict[str, Path | bytes], head: str) -> list[CommitOperationAdd]:
        """The operations writing `files` in a commit planned on `head`: those uploaded ahead
        where they were uploaded on this head's line (our own commits since), new ones for the
        others."""
        self._on(head)
        operations = []
        for path, content in files.items():
            uploaded, operation = self._waiting.pop(path, (None, None))
            if operation is None or uploaded != content:
                operation = CommitOperationAdd(path, content)
            operations.append(operation)
        return operations

    def window(self, later: list[list[LocalBundle]], room: int) -> list[CommitOperationAdd]:
        """The files of the next bundles in `later` (the batches after the commit being
        planned, in order) not uploaded ahead yet, as many whole bundles as `room` files
        allow: to be uploaded with that commit's own files."""
        operations: list[CommitOperationAdd] = []
        for bundle in (bundle for batch in later for bundle in batch):
            files = bundle.repo_files()
            if all(path in self._waiting for path in files):
                continue
            if len(operations) + len(files) > room:
                break
            for path, content in files.items():
                operation = CommitOperationAdd(path, content)
                self._waiting[path] = (content, operation)
                operations.append(operation)
        return operations

    def reused(self, operations: list[Operation], head: str) -> list[Operation]:
        """The table operations of a commit planned on `head`, each writing the very bytes of
        a table uploaded ahead on this head's line replaced by the operation uploaded (which
        the client then sends no more); the others as they are, asked about as ever."""
        self._on(head)
        waiting, self._tables = self._tables, {}
        reused: list[Operation] = []
        for operation in operations:
            if isinstance(operation, CommitOperationAdd):
                uploaded, ahead = waiting.get(operation.path_in_repo, (None, None))
                if ahead is not None and uploaded == operation.path_or_fileobj:
                    operation = ahead
            reused.append(operation)
        return reused

    def upload_with(
        self,
        later: list[list[LocalBundle]],
        used: int,
        tables: Callable[[list[LocalBundle]], list[CommitOperationAdd]],
    ) -> list[CommitOperationAdd]:
        """What to upload with a commit of `used` files, within CLIENT_FILES_PER_REQUEST:
        the next bundles' files (`window`), then the next commit's tables (`tables`, that is
        `Holdings.tables_ahead`) where they fit (`_tables_ahead`)."""
        room = CLIENT_FILES_PER_REQUEST - used
        bundles = self.window(later, room)
        return bundles + self._tables_ahead(later, tables, room - len(bundles))

    def _tables_ahead(
        self,
        later: list[list[LocalBundle]],
        compute: Callable[[list[LocalBundle]], list[CommitOperationAdd]],
        room: int,
    ) -> list[CommitOperationAdd]:
        """The next commit's tables, from `compute`, to upload with the commit being planned:
        only when it is the upload's last (any other uploads the files of those after it, in
        an LFS batch request its own tables then join), every file of its bundles is
        uploaded ahead already (else it asks the Hub about files anyway), and they fit in
        `room`."""
        self._tables = {}
        if len(later) != 1 or not all(p in self._waiting for b in later[0] for p in b.repo_paths):
            return []
        operations = compute(later[0])
        if len(operations) > room:
            return []
        self._tables = {
            op.path_in_repo: (data, op)
            for op in operations
            if isinstance(data := op.path_or_fileobj, bytes)  # as tables are written
        }
        return [op for _, op in self._tables.values()]

    def landed(self, parent: str, oid: str) -> None:
        """Our commit `oid` on `parent` landed: it wrote none of the files waiting, so what
        the Hub said of them holds at `oid` too."""
        if self.head == parent:
            self.head = oid
