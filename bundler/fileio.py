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


def _open_descriptor(path: Path | str) -> tuple[int, int]:
    """A descriptor on a regular file, refusing links: a link could pull any file on the
    machine into a bundle that is about to be published. O_NONBLOCK keeps a FIFO from hanging
    the open; its type is then refused."""
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
    return descriptor, status.st_size


def open_no_follow(path: Path | str) -> BinaryIO:
    """Open a regular file for buffered reading, refusing links and non-regular files."""
    return os.fdopen(_open_descriptor(path)[0], "rb")


def read_bounded(path: Path | str, limit: int) -> bytes:
    """Read a whole small file, refusing one larger than `limit` so memory stays bounded.

    Plain descriptor reads, no buffered file object: for tens of thousands of small prediction
    files the per-file overhead of a file object costs more than the read itself.
    """
    descriptor, size = _open_descriptor(path)
    chunks: list[bytes] = []
    total = 0
    try:
        wanted = min(size, limit) + 1  # one more byte shows growth
        while chunk := os.read(descriptor, wanted):
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise InputError(path, f"larger than {limit} bytes; refusing to load it")
            if len(chunk) < wanted:
                break  # a short read of a regular file is its end: spare the empty read
            wanted = min(CHUNK_SIZE, limit + 1 - total)
    except OSError as error:
        raise InputError(path, f"cannot read: {error.strerror}") from None
    finally:
        os.close(descriptor)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


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
            raise WriteError(f"{final_path}: cannot write: {describe_os_error(error)}") from None
        raise


def describe_os_error(error: OSError) -> str:
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        return "the disk is full; free some space and run again"
    if error.errno == errno.EFBIG:
        return "file size limit exceeded"
    return error.strerror or str(error)


def atomic_write_bytes(final_path: Path, data: bytes) -> None:
    with atomic_output(final_path) as handle:
        handle.write(data)
