"""Many staged pairs (an archive and its sidecar) made durable and committed together, for
collect of many small runs: one fsync after another costs a journal commit each, while many
issued at once share them."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from bundler.core.errors import WriteError
from bundler.core.forked import threads_that_end
from bundler.local.fileio import StagedFile, commit_pair, signals_held, write_error

SYNC_THREADS = 16
"""fsyncs issued at once by `sync_all`: a journaling file system commits concurrent fsyncs
together, so an fsync among many at once costs a fraction of one issued after another (ext4
here; it shows in collect of many runs, docs/performance.md)."""


def sync_all(descriptors: list[int]) -> list[OSError | None]:
    """fsync every descriptor, many at once; each one's error, or None."""

    def one(descriptor: int) -> OSError | None:
        try:
            os.fsync(descriptor)
        except OSError as error:
            return error
        return None

    if len(descriptors) <= 1:
        return [one(descriptor) for descriptor in descriptors]
    from concurrent.futures import ThreadPoolExecutor

    with threads_that_end(), ThreadPoolExecutor(min(SYNC_THREADS, len(descriptors))) as pool:
        return list(pool.map(one, descriptors))


class DurableBatch:
    """Commits many staged pairs (an archive and its sidecar) together, for many small runs:
    the staged files are written and flushed as each run is bundled, and `flush` makes them
    durable at once (every file fsynced, many at a time), then commits each pair as
    `commit_pair` does (old sidecar removed, archive renamed, sidecar renamed) and fsyncs each
    folder once. No rename happens before both files of its pair are durable, so a sidecar
    never names an archive that is not all there. Used as a context manager, pairs still
    pending when it is left by an exception are removed (they are temporary files)."""

    def __init__(self, max_pairs: int = 64, max_bytes: int = 64 << 20) -> None:
        self.max_pairs, self.max_bytes = max_pairs, max_bytes
        self.pending: list[tuple[StagedFile, StagedFile, Callable[[WriteError | None], None]]]
        self.pending = []
        self.size = 0

    def __enter__(self) -> DurableBatch:
        return self

    def __exit__(self, kind: object, error: BaseException | None, trace: object) -> None:
        if error is None:
            self.flush()
        else:
            self.discard()

    def add(
        self,
        first: StagedFile,
        second: StagedFile,
        size: int,
        done: Callable[[WriteError | None], None],
    ) -> None:
        """Queue a pair; `done` is told, once it is committed, None (or why it failed)."""
        self.pending.append((first, second, done))
        self.size += size
        if len(self.pending) >= self.max_pairs or self.size >= self.max_bytes:
            self.flush()

    def flush(self) -> None:
        pending, self.pending, self.size = self.pending, [], 0
        try:
            outcomes = self._commit(pending)
        finally:  # whatever was not committed (an error, SIGTERM) is a temporary file: removed
            for first, second, _ in pending:
                for file in (first, second):
                    file.close()
        for done, failure in outcomes:
            done(failure)

    def _commit(
        self, pending: list[tuple[StagedFile, StagedFile, Callable[[WriteError | None], None]]]
    ) -> list[tuple[Callable[[WriteError | None], None], WriteError | None]]:
        staged = [file for first, second, _ in pending for file in (first, second)]
        errors: list[OSError | None] = []
        for file in staged:
            try:
                file.handle.flush()
                os.fchmod(file.handle.fileno(), 0o644)
                errors.append(None)
            except OSError as flush_error:
                errors.append(flush_error)
        synced = sync_all([file.handle.fileno() for file in staged])
        errors = [before or after for before, after in zip(errors, synced, strict=True)]
        outcomes: list[tuple[Callable[[WriteError | None], None], WriteError | None]] = []
        folders: dict[Path, list[int]] = {}
        with signals_held():  # once for the batch's commits, each a few microseconds
            for number, (first, second, done) in enumerate(pending):
                problem = errors[2 * number] or errors[2 * number + 1]
                failure: WriteError | None = None
                if problem is not None:
                    failed = first if errors[2 * number] else second
                    failure = write_error(failed.final, problem)
                else:
                    try:
                        commit_pair(first, second, sync_folder=False)
                        for holding in (
                            first.final.parent,
                            *first.entries_to_sync,
                            *second.entries_to_sync,
                        ):
                            folders.setdefault(holding, []).append(number)
                    except WriteError as error_written:
                        failure = error_written
                outcomes.append((done, failure))
        opened: list[tuple[Path, int]] = []
        try:
            for folder in folders:
                opened.append((folder, os.open(folder, os.O_RDONLY | os.O_DIRECTORY)))
            for (folder, _), synced_error in zip(
                opened, sync_all([descriptor for _, descriptor in opened]), strict=True
            ):
                if synced_error is not None:
                    for number in folders[folder]:
                        done = outcomes[number][0]
                        outcomes[number] = (done, write_error(folder, synced_error))
        except OSError as error:
            raise write_error(next(iter(folders)), error) from None
        finally:
            for _, descriptor in opened:
                os.close(descriptor)
        return outcomes

    def discard(self) -> None:
        pending, self.pending, self.size = self.pending, [], 0
        for first, second, _ in pending:
            for file in (first, second):
                file.close()
