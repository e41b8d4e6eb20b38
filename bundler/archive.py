"""Stage 3: write a bundle as a reproducible, streaming `.tar.zst`.

Reproducibility comes from controlling every byte: members in a fixed order, tar headers with
fixed owner, mode and an mtime taken from the run's own date, a manifest serialised the same way
every time, and zstd in multi-threaded mode, whose output does not depend on how many worker
threads there are (only single-threaded mode differs), so every machine makes the same bytes.

Every source file is read once: the bytes that are validated are the bytes archived. The tar
members after the manifest are compressed into a temporary "body" frame while the run is being
validated; once the manifest is known, the archive is written as three checksummed zstd frames
that decompress to one tar stream: the manifest member, the body, and the end-of-archive blocks.
"""

from __future__ import annotations

import os
import shutil
import tarfile
import tempfile
from collections.abc import Iterable
from typing import Any, BinaryIO, Final

import zstandard

from bundler.errors import WriteError
from bundler.fileio import CHUNK_SIZE, HashingWriter, describe_os_error
from bundler.manifest import MANIFEST_PATH, BundleClaim
from bundler.runs import ArchivedFile

TAR_FORMAT: Final = tarfile.PAX_FORMAT
TAR_ENCODING = "utf-8"
"""Fixed, not the machine's file-system encoding, so no locale can change a header."""
DEFAULT_LEVEL = 3
MANIFEST_SPOOL_BYTES = 4 << 20


def default_threads() -> int:
    return max(1, os.cpu_count() or 1)


def normalised_tar_info(name: str, size: int, mtime: int) -> tarfile.TarInfo:
    """A header that says nothing about the machine: no owner, fixed mode, the run's date."""
    info = tarfile.TarInfo(name)
    info.size = size
    info.mtime = mtime
    info.mode = 0o644
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.type = tarfile.REGTYPE
    return info


_USTAR_MAX_NAME = 100
_USTAR_MAX_NUMBER = 8**11  # 11 octal digits and a NUL


def tar_header(name: str, size: int, mtime: int) -> bytes:
    """The header tarfile writes for normalised_tar_info(name, size, mtime), built directly.

    For a short ASCII name and sizes that fit the ustar fields (every member of a bundle in
    practice) tarfile adds no PAX record, and its header is this fixed layout; building it here
    costs a fraction of TarInfo.tobuf, which dominated writing 100,000 small predictions.
    Anything else falls back to tarfile itself, so the bytes are tarfile's either way.
    """
    encoded = name.encode("ascii", "replace")
    if (
        not (name.isascii() and name.isprintable())
        or len(encoded) > _USTAR_MAX_NAME
        or not 0 <= size < _USTAR_MAX_NUMBER
        or not 0 <= mtime < _USTAR_MAX_NUMBER
    ):
        info = normalised_tar_info(name, size, mtime)
        return info.tobuf(TAR_FORMAT, TAR_ENCODING, "surrogateescape")
    name_field = encoded.ljust(100, b"\0")
    size_field = b"%011o\0" % size
    mtime_field = b"%011o\0" % mtime
    # Only name, size and mtime vary; the sum of every other byte is a constant.
    checksum = _FIXED_FIELDS_SUM + sum(name_field) + sum(size_field) + sum(mtime_field)
    return b"".join(
        (name_field, _MODE_UID_GID, size_field, mtime_field, b"%06o\0 " % checksum, _TAIL)
    )


_MODE_UID_GID = b"0000644\0" + b"0000000\0" + b"0000000\0"
_TAIL = (
    tarfile.REGTYPE
    + b"\0" * 100  # linkname
    + tarfile.POSIX_MAGIC
    + b"\0" * 64  # uname, gname
    + b"\0" * 16  # devmajor, devminor: empty for a regular file
    + b"\0" * 155  # prefix
).ljust(tarfile.BLOCKSIZE - 156, b"\0")
_FIXED_FIELDS_SUM = sum(_MODE_UID_GID) + sum(b" " * 8) + sum(_TAIL)
"""The checksum counts its own field as eight spaces."""


def write_manifest(claim: BundleClaim, files: Iterable[ArchivedFile], out: BinaryIO) -> None:
    """Serialise the Manifest model (claim fields, then `files`) entry by entry.

    The claim is pydantic's own JSON; the file list is appended one line per file so that a
    100,000-file list is never one string in memory. Manifest.model_validate_json reads it back.
    """
    claim_json = claim.model_dump_json(indent=2)
    out.write(claim_json.removesuffix("\n}").encode("utf-8"))
    out.write(b',\n  "files": [')
    start = out.tell()
    lines = []
    for file in files:
        # FileEntry's fields, in its order, formatted as json.dumps would with ", " and ": ".
        # Archive paths are the bundler's own plain-ASCII names, so no escaping is needed.
        path, size, sha256 = file.archive_path, file.size, file.sha256
        lines.append(f'{{"path": "{path}", "size": {size}, "sha256": "{sha256}"}}')
        if len(lines) == MANIFEST_LINES_PER_WRITE:
            out.write(_manifest_lines(lines, first=out.tell() == start))
            lines.clear()
    out.write(_manifest_lines(lines, first=out.tell() == start))
    out.write(b"\n  ]\n}\n")


def make_compressor(level: int, threads: int | None) -> zstandard.ZstdCompressor:
    return zstandard.ZstdCompressor(
        level=level, write_checksum=True, threads=threads or default_threads()
    )


class BodyWriter:
    """Compresses the tar members that follow the manifest, as the run is validated.

    The compressed body goes to an anonymous temporary file (it vanishes with the process, even
    on a crash), so a refused run leaves nothing behind and a valid one is never read twice.
    """

    def __init__(self, mtime: int, *, level: int = DEFAULT_LEVEL, threads: int | None = None):
        self.mtime = mtime
        self._file = tempfile.TemporaryFile()  # noqa: SIM115 - closed by __exit__
        self._compressed = make_compressor(level, threads).stream_writer(self._file, closefd=False)
        self._tar = TarStream(self._compressed)

    def __enter__(self) -> BodyWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._file.close()

    def add(self, archive_path: str, data: bytes) -> None:
        """Append one member; `data` is exactly the bytes that were validated."""
        try:
            self._tar.add_member(archive_path, data, self.mtime)
        except OSError as error:
            raise WriteError(
                f"temporary bundle data: cannot write: {describe_os_error(error)}"
            ) from None

    @property
    def tar_size(self) -> int:
        """Uncompressed tar bytes in the body so far."""
        return self._tar.offset

    def copy_frame_to(self, out: BinaryIO) -> None:
        """End the body's zstd frame and copy it to `out`."""
        self._tar.flush()
        self._compressed.close()  # type: ignore[no-untyped-call]
        self._file.seek(0)
        shutil.copyfileobj(self._file, out, CHUNK_SIZE)


MANIFEST_LINES_PER_WRITE = 4096


def _manifest_lines(lines: list[str], *, first: bool) -> bytes:
    if not lines:
        return b""
    lead = "\n    " if first else ",\n    "
    return (lead + ",\n    ".join(lines)).encode("ascii")


def write_archive(
    claim: BundleClaim,
    files: Iterable[ArchivedFile],
    body: BodyWriter,
    out: BinaryIO,
    *,
    level: int = DEFAULT_LEVEL,
    threads: int | None = None,
) -> tuple[str, int]:
    """Write the archive to `out`: the manifest member, the body, and the tar's end, each as a
    checksummed zstd frame. Returns the archive's sha256 and size."""
    sink = HashingWriter(out)
    compressor = make_compressor(level, threads)
    with tempfile.SpooledTemporaryFile(max_size=MANIFEST_SPOOL_BYTES) as manifest:
        write_manifest(claim, files, manifest)  # type: ignore[arg-type]
        manifest_size = manifest.tell()
        manifest.seek(0)
        with compressor.stream_writer(sink, closefd=False) as compressed:  # type: ignore[arg-type]
            tar = TarStream(compressed)
            tar.add_header(MANIFEST_PATH, manifest_size, body.mtime)
            while chunk := manifest.read(CHUNK_SIZE):
                tar.write(chunk)
            tar.end_member(manifest_size)
            tar.flush()
            head_size = tar.offset
    body.copy_frame_to(sink)  # type: ignore[arg-type]
    with compressor.stream_writer(sink, closefd=False) as compressed:  # type: ignore[arg-type]
        end = TarStream(compressed, offset=head_size + body.tar_size)
        end.close()
    return sink.sha256, sink.size


class TarStream:
    """Writes exactly the bytes `tarfile.open(mode="w|", format=PAX_FORMAT)` would (same
    headers from TarInfo.tobuf, same padding, same end-of-archive and record padding), but
    without tarfile's per-member costs: it keeps no TarInfo per member (100,000 of them are
    tens of megabytes) and batches small writes into large ones for the compressor, which is
    what keeps collect near tar|zstd speed."""

    def __init__(self, out: Any, batch: int = CHUNK_SIZE, offset: int = 0) -> None:
        self._out = out
        self._batch = batch
        self._pending = bytearray()
        self.offset = offset
        """Bytes of the whole tar stream so far, including any written by an earlier writer."""

    def write(self, data: bytes) -> None:
        self._pending += data
        self.offset += len(data)
        if len(self._pending) >= self._batch:
            self._out.write(self._pending)
            self._pending.clear()

    def add_member(self, name: str, data: bytes, mtime: int) -> None:
        """Header, content and padding in one write: per-call overhead adds up per row."""
        padding = -len(data) % tarfile.BLOCKSIZE
        self.write(tar_header(name, len(data), mtime) + data + tarfile.NUL * padding)

    def add_header(self, name: str, size: int, mtime: int) -> None:
        self.write(tar_header(name, size, mtime))

    def end_member(self, size: int) -> None:
        remainder = size % tarfile.BLOCKSIZE
        if remainder:
            self.write(tarfile.NUL * (tarfile.BLOCKSIZE - remainder))

    def flush(self) -> None:
        if self._pending:
            self._out.write(self._pending)
            self._pending.clear()

    def close(self) -> None:
        """End the archive as tarfile does: two zero blocks, then zeros to a whole record."""
        self.write(tarfile.NUL * (tarfile.BLOCKSIZE * 2))
        remainder = self.offset % tarfile.RECORDSIZE
        if remainder:
            self.write(tarfile.NUL * (tarfile.RECORDSIZE - remainder))
        self.flush()
