"""One run at a time on a bundles folder: `collect`, `upload` and `sync` hold its lock.

Two nightly jobs (or a nightly job and a person) working on one bundles folder at once would
interleave: an upload could read a bundle while a collect replaces it, and a clean-up of one
run's leftovers could remove the other's work in progress. The lock is an operating-system
lock (flock, through the `filelock` library) on `<bundles>/.bundler.local.lock`: the kernel releases
it when its holder exits for any reason, `kill -9` included, so a lock left by a dead process
is simply free and taking it over needs no guessing about whether the holder still lives.

The holder writes its pid, host, start time and command into the lock file as it takes the
lock (filelock's `on_acquired` hook, while holding it), so whoever is kept out can say who
holds it. The lock is reentrant within a process: `sync` holds it across the `collect` and
`upload` it runs, and they take it again without waiting on themselves.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
from collections.abc import Iterator
from contextvars import ContextVar
from datetime import UTC, datetime
from pathlib import Path

from pydantic import ValidationError

from bundler.core.errors import BundlesLockedError, InputError, UsageError, WriteError
from bundler.core.limits import MAX_LOCK_RECORD_BYTES
from bundler.core.model import Model
from bundler.local.fileio import describe_os_error, make_durable_folders, read_bounded, write_error
from bundler.local.layout import LOCK_NAME

POLL_SECONDS = 0.1

_operation: ContextVar[str | None] = ContextVar("bundler_lock_operation", default=None)


class LockHolder(Model):
    """What a holder records about itself in the lock file."""

    pid: int | None = None
    host: str | None = None
    started: str | None = None
    operation: str | None = None


def lock_path(bundles_dir: Path) -> Path:
    return bundles_dir / LOCK_NAME


@contextlib.contextmanager
def bundles_lock(
    bundles_dir: Path, *, operation: str, wait: float = 0, create: bool = True
) -> Iterator[None]:
    """Hold the lock of `bundles_dir` for the `with` block, waiting up to `wait` seconds.

    Raises BundlesLockedError (exit code 75) naming the holder when it is not free in time.
    `create` makes the folder if it is missing (collect and sync write into it); without it
    a path that is not a folder (missing, or one archive) is left alone and unlocked, for the
    caller to handle as it always has.
    """
    if not bundles_dir.is_dir():
        if not create:
            yield
            return
        if bundles_dir.exists() or bundles_dir.is_symlink():
            raise UsageError(f"{bundles_dir}: exists and is not a directory")
        try:
            make_durable_folders(bundles_dir)
        except OSError as error:
            raise write_error(bundles_dir, error) from None
    from filelock import FileLock, Timeout  # its import shows in start-up: only when locking

    path = lock_path(bundles_dir)
    # One instance per path in the process (is_singleton), so a nested hold is reentrant; the
    # options must be the same on every call, so the wait is given to acquire(), not here.
    lock = FileLock(path, is_singleton=True, on_acquired=_record_holder)
    reset = _operation.set(operation)
    try:
        lock.acquire(timeout=wait, poll_interval=POLL_SECONDS)
    except Timeout:
        holder = read_holder(bundles_dir)
        raise BundlesLockedError(
            bundles_dir,
            waited=wait,
            pid=holder.pid,
            started=holder.started,
            host=holder.host,
            operation=holder.operation,
        ) from None
    except OSError as error:
        raise WriteError(f"{path}: cannot lock: {describe_os_error(error)}") from None
    finally:
        _operation.reset(reset)
    try:
        yield
    finally:
        lock.release()


def read_holder(bundles_dir: Path) -> LockHolder:
    """Who holds (or last held) the lock, as far as the lock file says; empty if unknown.

    A record naming a process of this host that no longer runs is stale (the holder took the
    lock an instant ago and has not written its record yet), so it is not shown as the holder.
    """
    try:
        record = read_bounded(lock_path(bundles_dir), MAX_LOCK_RECORD_BYTES)
        holder = LockHolder.model_validate(json.loads(record))
    except (InputError, ValueError, ValidationError):
        return LockHolder()
    if holder.host == socket.gethostname() and holder.pid is not None and not _alive(holder.pid):
        return LockHolder()
    return holder


def _record_holder(descriptor: int) -> None:
    """filelock's on_acquired hook: runs with the lock just taken, before anyone else can."""
    holder = LockHolder(
        pid=os.getpid(),
        host=socket.gethostname(),
        started=datetime.now(UTC).isoformat(timespec="seconds"),
        operation=_operation.get(),
    )
    data = holder.model_dump_json().encode("utf-8") + b"\n"
    os.pwrite(descriptor, data, 0)
    os.ftruncate(descriptor, len(data))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it runs, under another account
    return True
