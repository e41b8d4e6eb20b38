"""Bundle files uploaded ahead of their commit, with an earlier commit of the same upload.

The Hub recommends commits of fewer than 100 files (huggingface.co/docs/hub/repositories-
recommendations: "Commit size: <100 files", "upload files in multiple commits"), so an upload
of more bundles than one commit holds makes several (`plan.batches`). Each commit the client
makes asks the Hub how to upload its files (preupload) and where to put their LFS blobs (LFS
batch) before committing them, and each of those requests takes up to CLIENT_FILES_PER_REQUEST
files. So a commit uploads, with its own files, those of the commits after it while that keeps
it to one such request each: the later commits pass the very same operations to the client,
which remembers that they were uploaded (`CommitOperationAdd`), and ask again only about the
tables, record and card they write, known only once the commit before them has landed (the
record names it).

Each commit uploads ahead as many of the next bundles (whole, in order) as fit beside its own
files in one request, so the blobs of an upload of many commits go up ahead of its commits; a
run stopped in between leaves blobs uploaded and not committed, which the next run's LFS batch
request finds on the Hub (those it still keeps) instead of sending them again.

Only a bundle's own files are uploaded ahead: no commit but its own writes them, so what the
Hub said of them (their upload mode, that they are not there yet) still holds at our own
commits after the one that asked. When a commit is planned on any other head (someone else
committed meanwhile), nothing uploaded ahead is used: its files are asked about again.
"""

from __future__ import annotations

from pathlib import Path

from huggingface_hub import CommitOperationAdd

from bundler.hub.publish.plan import LocalBundle

CLIENT_FILES_PER_REQUEST = 256
"""Files huggingface_hub puts in one preupload request and one LFS batch request (its
`_fetch_upload_modes` and `UPLOAD_BATCH_MAX_NUM_FILES`): an upload ahead that stays within
it costs no more requests than the commit's own files alone."""


class UploadAhead:
    """The operations of later commits' bundle files, uploaded (or being uploaded) with an
    earlier commit made on `head`, by path."""

    def __init__(self) -> None:
        self.head: str | None = None
        self._waiting: dict[str, tuple[Path | bytes, CommitOperationAdd]] = {}
        """By path: what was uploaded (the client keeps a path as text) and its operation."""

    def operations(self, files: dict[str, Path | bytes], head: str) -> list[CommitOperationAdd]:
        """The operations writing `files` in a commit planned on `head`: those uploaded ahead
        where they were uploaded on this head's line (our own commits since), new ones for the
        others."""
        if head != self.head:
            self._waiting.clear()  # the branch moved under us: what the Hub said may not hold
            self.head = head
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

    def landed(self, parent: str, oid: str) -> None:
        """Our commit `oid` on `parent` landed: it wrote none of the files waiting, so what
        the Hub said of them holds at `oid` too."""
        if self.head == parent:
            self.head = oid
