"""Safe, streaming file I/O shared by every stage: no links followed, bounded reads, digests
computed while bytes flow, and atomic writes that never leave a partial file behind."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from bundler.errors import InputError, WriteError

CHUNK_SIZE = 1 << 20


def open_no_follow(path: Path) -> BinaryIO:
    """Open a regular file for reading, refusing links: a link could pull any file on the
    machine into a bundle that is about to be published."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise InputError(path, "symbolic link; links are never followed") from None
        raise InputError(path, f"cannot read: {error.strerror}") from None
    # Check the type on the raw descriptor first: os.fdopen itself raises IsADirectoryError
    # for a directory, which would escape as an unexplained OSError (and leak the descriptor).
    try:
        is_regular = stat.S_ISREG(os.fstat(descriptor).st_mode)
    except OSError:
        os.close(descriptor)
        raise
    if not is_regular:
        os.close(descriptor)
        raise InputError(path, "not a regular file")
    return os.fdopen(descriptor, "rb")


def read_bounded(path: Path, limit: int) -> bytes:
    """Read a whole small file, refusing one larger than `limit` so memory stays bounded."""
    with open_no_follow(path) as handle:
        try:
            # Ask for the size the file has (plus one byte to see growth), not for `limit`:
            # read(n) allocates n bytes up front, and per file that costs more than the read.
            expected = min(os.fstat(handle.fileno()).st_size, limit)
            data = handle.read(expected + 1)
            if len(data) > expected:  # the file grew since fstat; read on, still bounded
                data += handle.read(limit + 1 - len(data))
        except OSError as error:
            raise InputError(path, f"cannot read: {error.strerror}") from None
    if len(data) > limit:
        raise InputError(path, f"larger than {limit} bytes; refusing to load it")
    return data


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
    """A read-only file object that hashes and counts every byte read through it."""

    def __init__(self, source: BinaryIO) -> None:
        self._source = source
        self._digest = hashlib.sha256()
        self.size = 0

    def read(self, size: int = -1) -> bytes:
        data = self._source.read(size)
        self._digest.update(data)
        self.size += len(data)
        return data

    def drain(self) -> None:
        """Read to the end, so the digest covers the whole source."""
        while self.read(CHUNK_SIZE):
            pass

    @property
    def sha256(self) -> str:
        return self._digest.hexdigest()


@contextlib.contextmanager
def atomic_output(final_path: Path) -> Iterator[BinaryIO]:
    """Write to a temporary file beside `final_path`, then rename it into place.

    The rename is atomic within one folder, so a reader (or a crash) sees either the old file
    or the complete new one, never a partial one. On any failure the temporary file is removed.
    """
    try:
        final_path.parent.mkdir(parents=True, exist_ok=True)
        descriptor, temporary_name = tempfile.mkstemp(
            dir=final_path.parent, prefix=f".{final_path.name}.", suffix=".partial"
        )
    except OSError as error:
        raise WriteError(f"{final_path}: cannot write: {error.strerror}") from None
    temporary = Path(temporary_name)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, 0o644)
        os.replace(temporary, final_path)
    except BaseException as error:
        temporary.unlink(missing_ok=True)
        if isinstance(error, OSError):
            raise WriteError(f"{final_path}: cannot write: {_describe_os_error(error)}") from None
        raise


def _describe_os_error(error: OSError) -> str:
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        return "the disk is full; free some space and run again"
    if error.errno == errno.EFBIG:
        return "file size limit exceeded"
    return error.strerror or str(error)


def atomic_write_bytes(final_path: Path, data: bytes) -> None:
    with atomic_output(final_path) as handle:
        handle.write(data)
