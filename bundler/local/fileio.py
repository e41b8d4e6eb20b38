"""Safe, streaming file I/O shared by every stage: no links followed, bounded reads, digests
computed while bytes flow, and crash-safe writes that never leave a partial file in place."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import io
import os
import secrets
import select
import signal
import stat
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from bundler.core.errors import STOP_SIGNALS, InputError, UsageError, WriteError
from bundler.core.limits import FIFO_WRITER_WAIT_SECONDS
from bundler.local.layout import CACHE_NAMES, TEMP_SUFFIX, is_temporary_name, temporary_prefix

CHUNK_SIZE = 1 << 20


def _open_descriptor(path: Path | str) -> tuple[int, os.stat_result]:
    """A descriptor on a regular file, and its stat, refusing links: a link could pull any file
    on the machine into a bundle that is about to be published. O_NONBLOCK keeps a FIFO from
    hanging the open; its type is then refused."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise InputError(path, "symbolic link; links are never followed") from None
        raise InputError(path, f"cannot read: {error.strerror}") from None
    try:
        status = os.fstat(descriptor)
    except OSError as error:
        os.close(descriptor)
        raise InputError(path, f"cannot read: {error.strerror}") from None
    if not stat.S_ISREG(status.st_mode):
        os.close(descriptor)
        raise InputError(path, "not a regular file")
    return descriptor, status


def open_no_follow(path: Path | str) -> BinaryIO:
    """Open a regular file for buffered reading, refusing links and non-regular files."""
    return os.fdopen(_open_descriptor(path)[0], "rb")


def read_bounded(path: Path | str, limit: int) -> bytes:
    """Read a whole small file, refusing one larger than `limit` so memory stays bounded."""
    return read_bounded_stat(path, limit)[0]


def read_bounded_stat(path: Path | str, limit: int) -> tuple[bytes, os.stat_result]:
    """`read_bounded`, with the file's stat taken before its bytes were read (as collect's
    stat cache records a file it read: bundler.local.discover.ListingParts).

    Plain descriptor reads, no buffered file object: for tens of thousands of small prediction
    files the per-file overhead of a file object costs more than the read itself.
    """
    descriptor, status = _open_descriptor(path)
    try:
        wanted = min(status.st_size, limit) + 1  # one more byte shows growth
        data = os.read(descriptor, wanted)
        if len(data) < wanted:
            return data, status  # the whole file in one read, as almost always
        return _read_rest(path, descriptor, data, limit), status
    except OSError as error:
        raise InputError(path, f"cannot read: {error.strerror}") from None
    finally:
        os.close(descriptor)


def _read_rest(path: Path | str, descriptor: int, first: bytes, limit: int) -> bytes:
    """What `read_bounded` reads after a first chunk that filled what it asked for: a file that
    grew after it was opened, or one larger than `limit`."""
    chunks, total = [first], len(first)
    while total <= limit:
        wanted = min(CHUNK_SIZE, limit + 1 - total)
        chunk = os.read(descriptor, wanted)
        chunks.append(chunk)
        total += len(chunk)
        if len(chunk) < wanted:
            break  # a short read of a regular file is its end: spare the empty read
    if total > limit:
        raise InputError(path, f"larger than {limit} bytes; refusing to load it")
    return b"".join(chunks)


def read_named_file(path: Path | str, limit: int, what: str) -> bytes:
    """A file the person named for the bundler to read (a key, a config file), whatever it is:
    a regular file, a link to one, a FIFO (`--key <(...)`), a device. At most `limit` + 1
    bytes are read, so /dev/zero or a file growing under the read costs no more than the
    bound. A FIFO's writer is waited for FIFO_WRITER_WAIT_SECONDS at most (the open itself
    does not wait: O_NONBLOCK; Linux's poll reports a FIFO no writer has opened yet as neither
    readable nor hung up). UsageError (exit 2), naming the file, past `limit` bytes ("larger
    than"), when no writer comes, or when it cannot be read; `what` names the file's role
    ("key file")."""
    chunks: list[bytes] = []
    total = 0
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as error:
        raise UsageError(f"{path}: cannot read the {what} ({error.strerror})") from None
    try:
        if stat.S_ISFIFO(os.fstat(descriptor).st_mode) and not _writer_came(descriptor):
            raise UsageError(
                f"{path}: no writer opened this FIFO within {FIFO_WRITER_WAIT_SECONDS} s;"
                f" not a {what}"
            )
        os.set_blocking(descriptor, True)
        while total <= limit and (chunk := os.read(descriptor, min(CHUNK_SIZE, limit + 1 - total))):
            chunks.append(chunk)
            total += len(chunk)
    except OSError as error:
        raise UsageError(f"{path}: cannot read the {what} ({error.strerror})") from None
    finally:
        os.close(descriptor)
    if total > limit:
        raise UsageError(f"{path}: larger than {limit:,} bytes; not a {what}")
    return b"".join(chunks)


def _writer_came(descriptor: int) -> bool:
    """Whether a writer opened the FIFO (it wrote, or came and went) within the wait."""
    poller = select.poll()
    poller.register(descriptor, select.POLLIN | select.POLLHUP)
    return bool(poller.poll(FIFO_WRITER_WAIT_SECONDS * 1000))


def sha256_file(path: Path) -> tuple[str, int]:
    """Streaming sha256 and size of a file."""
    digest = hashlib.sha256()
    size = 0
    with open_no_follow(path) as handle:
        while chunk := handle.read(CHUNK_SIZE):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


class HashingWriter:
    """A write-only file object that hashes and counts every byte on its way to `target`."""

    def __init__(self, target: BinaryIO) -> None:
        self._target = target
        self._digest = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes | bytearray | memoryview) -> int:
        self._digest.update(data)
        self.size += len(data)
        return self._target.write(data)

    def flush(self) -> None:
        self._target.flush()

    @property
    def sha256(self) -> str:
        return self._digest.hexdigest()


class HashingReader:
    """A read-only file object that hashes and counts every byte read through it: sha256, and
    sha512 too when asked (what a bundle's SSH signature signs), in the same single pass."""

    def __init__(self, source: BinaryIO, *, sha512: bool = False) -> None:
        self._source = source
        self._digest = hashlib.sha256()
        self._sha512 = hashlib.sha512() if sha512 else None
        self.size = 0

    def read(self, size: int = -1) -> bytes:
        data = self._source.read(size)
        self._digest.update(data)
        if self._sha512 is not None:
            self._sha512.update(data)
        self.size += len(data)
        return data

    def digest(self, algorithm: str) -> bytes | None:
        """The raw digest by `algorithm` ("sha256", or "sha512" when asked); None otherwise."""
        if algorithm == "sha256":
            return self._digest.digest()
        if algorithm == "sha512" and self._sha512 is not None:
            return self._sha512.digest()
        return None

    def drain(self) -> None:
        """Read to the end, so the digest covers the whole source."""
        while self.read(CHUNK_SIZE):
            pass

    @property
    def sha256(self) -> str:
        return self._digest.hexdigest()


class StagedFile:
    """A temporary file beside `final`, written in full, then put in place by `commit_pair`.

    It is created under the bundler's temporary name pattern and holds an exclusive flock for
    as long as this process may still use it, which is how `remove_leftovers` in a later (or
    concurrent) run tells the leftover of a killed writer from a file being written right now.
    Used as a context manager it removes itself on the way out unless it was committed.
    """

    def __init__(self, final: Path, *, durable: bool = True) -> None:
        self.final = final
        self.durable = durable
        """Whether it survives a crash once committed (fsynced); a copy whose loss costs
        nothing but a download need not be."""
        self.committed = False
        self.path, self.handle, made = _create_locked(final)
        self.entries_to_sync = {folder.parent for folder in made}
        """The folders holding a folder made for this file: fsynced with the file's own folder
        when it is committed, so the made folder's entry is as durable as the file."""

    def __enter__(self) -> StagedFile:
        return self

    def __exit__(self, kind: object, error: BaseException | None, trace: object) -> None:
        self.close()
        if isinstance(error, OSError):
            raise write_error(self.final, error) from None

    def close(self) -> None:
        """Done with it: removed unless committed, its descriptor (and flock) released. The
        folders it made stay, so their entries are fsynced now if no commit did it: a later
        file committed into one of them (which makes no folder) must not be lost with it."""
        _unowned.pop(self.path, None)
        if not self.committed:
            self.path.unlink(missing_ok=True)
            if self.durable:
                for folder in self.entries_to_sync:
                    with contextlib.suppress(OSError):  # its own error comes with that commit
                        fsync_folder(folder)
        with contextlib.suppress(OSError):  # a write error is reported where it happened
            self.handle.close()

    def finish(self) -> None:
        """Flush and fsync the content: after a crash it is either all there or not renamed."""
        self.handle.flush()
        if self.durable:
            os.fsync(self.handle.fileno())
        os.fchmod(self.handle.fileno(), 0o644)

    def commit(self) -> None:
        """Finish this one file and rename it into place, then fsync its folder: a reader
        sees the previous file or this one, never half of one."""
        self.finish()
        try:
            with signals_held():
                os.replace(self.path, self.final)
                self.committed = True
            if self.durable:
                for folder in (*self.entries_to_sync, self.final.parent):
                    fsync_folder(folder)
        except OSError as error:
            raise write_error(self.final, error) from None


def fsync_folder(folder: Path) -> None:
    """fsync a folder: what was renamed into it, or made in it, survives a crash."""
    descriptor = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def make_folders(folder: Path) -> list[Path]:
    """`mkdir -p`, giving the folders it made, outermost first. A made folder survives a
    crash only once the folder holding it is fsynced: without that, a crash soon after a new
    player's first bundle could lose the player's folder, and the archive fsynced inside it
    with it. StagedFile and DurableBatch fsync those folders with what they commit (many at
    once, for many runs); `make_durable_folders` at once. Folders that exist cost one stat.
    OSError as mkdir raises it (a file in the way: FileExistsError)."""
    missing: list[Path] = []
    while not os.path.isdir(folder):
        missing.append(folder)
        folder = folder.parent
    made = list(reversed(missing))
    for path in made:
        try:
            path.mkdir()
        except FileExistsError:
            if not path.is_dir():
                raise
    return made


def make_durable_folders(folder: Path) -> None:
    """`make_folders`, each folder made fsynced into its parent before this returns."""
    for made in make_folders(folder):
        fsync_folder(made.parent)


def write_atomically(final: Path, data: bytes, *, durable: bool = True) -> None:
    """Write a small file (a report) in one piece: temporary file beside it, then rename;
    fsynced unless not `durable` (a copy that a lost write costs only a download of)."""
    with StagedFile(final, durable=durable) as staged:
        staged.handle.write(data)
        staged.commit()


_CREATE_FLAGS = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
"""How a temporary file is created: new (never an existing file or a link), as mkstemp does."""


_unowned: dict[Path, BinaryIO] = {}
"""Every temporary file this process made (`_create_locked`) and has not closed, by path.
Python acts on a stop signal between two steps of the code, so one can come in the moment
after a file is made and before the code that will close it holds it (its StagedFile being
returned and assigned): the file is then no one's, and `remove_unowned` is how a stopped
command still leaves nothing partial behind. Entered while stop signals are held, with the
file's creation; a forked child forgets its parent's (they are the parent's to finish)."""
os.register_at_fork(after_in_child=_unowned.clear)


def remove_unowned() -> None:
    """Remove every temporary file this process made and did not close: for the end of a
    command (or of a forked child's work) stopped by a signal or an error, when nothing may be
    left in the middle of being written. A file committed meanwhile has no temporary name any
    more, so its entry removes nothing."""
    while _unowned:
        path, handle = _unowned.popitem()
        with contextlib.suppress(OSError):  # a write error was reported where it happened
            handle.close()
        with contextlib.suppress(OSError):
            path.unlink(missing_ok=True)


def _create_locked(final: Path) -> tuple[Path, BinaryIO, list[Path]]:
    """Create and flock a fresh temporary file beside `final`, making its folder if need
    be (the folders made are given too: see `make_folders`).

    SIGINT and SIGTERM wait until the file exists with its name known and is entered in
    `_unowned`, so an interruption right after creation cannot leave it behind: here it is
    removed, and after the return, before the caller holds it, `remove_unowned` removes it.
    A concurrent `remove_leftovers` may lock or remove it in the moment between creation and
    lock; then another is made. The file is made as tempfile.mkstemp makes one (a random
    name, exclusive creation, mode 0600), in a few calls: collect makes two for every run (its
    Python-level work was a tenth of a small run's bundling).
    """
    path: Path | None = None
    handle: BinaryIO | None = None
    folder = final.parent
    prefix = f"{folder}{os.sep}{temporary_prefix(final)}"
    try:
        with signals_held():
            made = make_folders(folder)
            while True:
                # eight random characters, as mkstemp gives: a name no longer than it was
                name = f"{prefix}{secrets.token_hex(4)}{TEMP_SUFFIX}"
                try:
                    descriptor = os.open(name, _CREATE_FLAGS, 0o600)
                except FileExistsError:
                    continue  # a name taken already: another, as mkstemp would
                path = Path(name)
                # Buffered as os.fdopen would be, without asking whether a disk file is a tty
                handle = open(descriptor, "wb", buffering=io.DEFAULT_BUFFER_SIZE)  # noqa: SIM115
                with contextlib.suppress(BlockingIOError):
                    fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    if os.fstat(descriptor).st_nlink > 0:
                        _unowned[path] = handle
                        return path, handle, made
                handle.close()
    except BaseException as error:
        if handle is not None:
            handle.close()
        if path is not None:
            _unowned.pop(path, None)
            path.unlink(missing_ok=True)
        if isinstance(error, OSError):
            raise write_error(final, error) from None
        raise


def commit_pair(first: StagedFile, second: StagedFile, *, sync_folder: bool = True) -> None:
    """Put two finished files of one folder in place, `second` being the commit point.

    A crash at any moment leaves the previous pair, or a `first` without its `second` (an
    uncommitted leftover the next run overwrites), or the new pair; never a `second` without
    its `first` or beside another one. Hence: remove the old `second`, rename `first`, rename
    `second`, then fsync the folder. The three steps are a few microseconds apart, with SIGINT
    and SIGTERM held until they are done, and the folder is locked so that two processes
    cannot interleave their commits. Without `sync_folder` the caller fsyncs the folder
    (`DurableBatch`, once for many pairs).
    """
    directory = first.final.parent
    if second.final.parent != directory:
        raise ValueError("a pair is committed within one folder")
    try:
        folder = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as error:
        raise write_error(directory, error) from None
    current = second.final
    try:
        fcntl.flock(folder, fcntl.LOCK_EX)
        with signals_held():
            with contextlib.suppress(FileNotFoundError):
                os.unlink(second.final)
            current = first.final
            os.replace(first.path, first.final)
            first.committed = True
            current = second.final
            os.replace(second.path, second.final)
            second.committed = True
        if sync_folder:
            os.fsync(folder)
            for holding in first.entries_to_sync | second.entries_to_sync:
                fsync_folder(holding)
    except OSError as error:
        raise write_error(current, error) from None
    finally:
        os.close(folder)


_held: list[list[signal.Signals]] = []
"""The signals received by the outermost `signals_held` block now running, if one is."""


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Hold SIGINT and SIGTERM until the block is done, then act on them as usual.

    Only the main thread can change signal handlers; elsewhere the block runs unguarded. A
    block within a block holds nothing more: the outer one's handlers record what arrives,
    and act on it when it ends (so many commits can be held at once, at the cost of one).
    """
    if _held or threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[signal.Signals] = []
    previous = {
        number: signal.signal(number, lambda n, _: received.append(signal.Signals(n)))
        for number in STOP_SIGNALS
    }
    _held.append(received)
    try:
        yield
    finally:
        _held.pop()
        for number, handler in previous.items():
            signal.signal(number, signal.SIG_DFL if handler is None else handler)
        for number in dict.fromkeys(received):
            handler = previous[number]
            if callable(handler):
                handler(number, None)
            elif handler != signal.SIG_IGN:
                signal.raise_signal(number)


def remove_leftovers(bundles_dir: Path) -> list[Path]:
    """Remove the temporary files a killed run left in the player folders of `bundles_dir`,
    and return them. Only regular files of the bundler's temporary name pattern that no live
    process holds locked are removed; nothing else is touched, and no link is followed."""
    removed: list[Path] = []
    removed.extend(_top_leftovers(bundles_dir))
    try:
        folders = sorted(
            entry.name
            for entry in os.scandir(bundles_dir)
            if not entry.name.startswith(".") and entry.is_dir(follow_symlinks=False)
        )
    except OSError:
        return removed  # no folder yet, or one collect cannot list: nothing it left there
    for folder in folders:  # names, not paths: a nightly folder holds thousands of them
        try:
            with os.scandir(os.path.join(bundles_dir, folder)) as entries:
                names = sorted(entry.name for entry in entries if is_temporary_name(entry.name))
        except OSError:
            continue
        removed.extend(
            bundles_dir / folder / name
            for name in names
            if _remove_if_abandoned(bundles_dir / folder / name)
        )
    return removed


def _top_leftovers(bundles_dir: Path) -> list[Path]:
    """The temporary files of the caches at the top of the folder (bundler.local.statcache)
    that a killed run left; nothing else there is touched."""
    prefixes = tuple(temporary_prefix(bundles_dir / name) for name in CACHE_NAMES)
    try:
        names = sorted(
            entry.name
            for entry in os.scandir(bundles_dir)
            if entry.name.startswith(prefixes) and is_temporary_name(entry.name)
        )
    except OSError:
        return []
    return [bundles_dir / name for name in names if _remove_if_abandoned(bundles_dir / name)]


def _remove_if_abandoned(path: Path) -> bool:
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):
            return False
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held: a live writer's file
        now = os.stat(path, follow_symlinks=False)
        if (now.st_dev, now.st_ino) != (status.st_dev, status.st_ino):
            return False
        path.unlink()
        return True
    except OSError:
        return False
    finally:
        os.close(descriptor)


def printable_name(name: str) -> str:
    """A file name as text that JSON can carry: bytes that are not UTF-8 (which `os` keeps as
    lone surrogates) are shown as `\\xNN`."""
    return os.fsencode(name).decode("utf-8", "backslashreplace")


def write_error(path: Path, error: OSError) -> WriteError:
    """`path` could not be written: one line, with what to do when the disk is full."""
    return WriteError(f"{path}: cannot write: {describe_os_error(error)}", path=path)


def unusable_output_folder(folder: Path, error: OSError) -> UsageError:
    """The output folder a user named cannot be created or written to (download, export)."""
    return UsageError(
        f"{folder}: cannot be used as the output folder: {describe_os_error(error)}",
        hint="choose another folder, or make this one writable",
    )


def describe_os_error(error: OSError) -> str:
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        return "the disk is full; free some space and run again"
    if error.errno == errno.EFBIG:
        return "file size limit exceeded"
    return error.strerror or str(error)
