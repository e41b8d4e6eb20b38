"""Stage 3: write a bundle as a reproducible, streaming `.tar.zst`.

Reproducibility comes from controlling every byte: members in a fixed order, tar headers with
fixed owner, mode and an mtime taken from the run's own date, a manifest serialised the same way
every time, and zstd in multi-threaded mode, whose output does not depend on how many worker
threads there are (only single-threaded mode differs), so every machine makes the same bytes.
"""

from __future__ import annotations

import hashlib
import json
import os
import tarfile
import tempfile
from collections.abc import Callable, Iterable
from typing import Any, BinaryIO, Final

import zstandard

from bundler.errors import InputError
from bundler.fileio import CHUNK_SIZE, HashingWriter, open_no_follow
from bundler.manifest import MANIFEST_PATH, BundleClaim, FileEntry
from bundler.runs import SourceFile

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
    header = bytearray(
        encoded.ljust(100, b"\0")
        + b"0000644\0"  # mode
        + b"0000000\0"  # uid
        + b"0000000\0"  # gid
        + b"%011o\0" % size
        + b"%011o\0" % mtime
        + b"        "  # checksum, computed over the header with this field as spaces
        + tarfile.REGTYPE
        + b"\0" * 100  # linkname
        + tarfile.POSIX_MAGIC
        + b"\0" * 64  # uname, gname
        + b"\0" * 16  # devmajor, devminor: empty for a regular file
        + b"\0" * 155  # prefix
    )
    header += b"\0" * (tarfile.BLOCKSIZE - len(header))
    header[148:156] = b"%06o\0 " % sum(header)
    return bytes(header)


def write_manifest(claim: BundleClaim, files: Iterable[SourceFile], out: BinaryIO) -> None:
    """Serialise the Manifest model (claim fields, then `files`) entry by entry.

    The claim is pydantic's own JSON; the file list is appended one line per file so that a
    100,000-file list is never one string in memory. Manifest.model_validate_json reads it back.
    """
    claim_json = claim.model_dump_json(indent=2)
    out.write(claim_json.removesuffix("\n}").encode("utf-8"))
    out.write(b',\n  "files": [')
    separator = b"\n    "
    for file in files:
        entry = FileEntry(path=file.archive_path, size=file.size, sha256=file.sha256)
        out.write(separator + json.dumps(entry.model_dump(), separators=(", ", ": ")).encode())
        separator = b",\n    "
    out.write(b"\n  ]\n}\n")


def write_archive(
    claim: BundleClaim,
    files: Callable[[], Iterable[SourceFile]],
    mtime: int,
    out: BinaryIO,
    *,
    level: int = DEFAULT_LEVEL,
    threads: int | None = None,
    on_file: Callable[[], None] | None = None,
) -> tuple[str, int]:
    """Stream manifest and files into `out` as tar inside one checksummed zstd frame.

    `files` is called twice (manifest, then content), and every file is hashed again while
    it is archived: a file that changed since it was validated is refused, so the manifest can
    never disagree with the archive. Returns the archive's sha256 and size.
    """
    sink = HashingWriter(out)
    compressor = zstandard.ZstdCompressor(
        level=level, write_checksum=True, threads=threads or default_threads()
    )
    with tempfile.SpooledTemporaryFile(max_size=MANIFEST_SPOOL_BYTES) as manifest:
        write_manifest(claim, files(), manifest)  # type: ignore[arg-type]
        manifest_size = manifest.tell()
        manifest.seek(0)
        with compressor.stream_writer(sink, closefd=False) as compressed:  # type: ignore[arg-type]
            tar = TarStream(compressed)
            tar.add_header(MANIFEST_PATH, manifest_size, mtime)
            while chunk := manifest.read(CHUNK_SIZE):
                tar.write(chunk)
            tar.end_member(manifest_size)
            for file in files():
                _add_checked(tar, file, mtime)
                if on_file is not None:
                    on_file()
            tar.close()
    return sink.sha256, sink.size


class TarStream:
    """Writes exactly the bytes `tarfile.open(mode="w|", format=PAX_FORMAT)` would (same
    headers from TarInfo.tobuf, same padding, same end-of-archive and record padding), but
    without tarfile's per-member costs: it keeps no TarInfo per member (100,000 of them are
    tens of megabytes) and batches small writes into large ones for the compressor, which is
    what keeps collect near tar|zstd speed."""

    def __init__(self, out: Any, batch: int = CHUNK_SIZE) -> None:
        self._out = out
        self._batch = batch
        self._pending = bytearray()
        self.offset = 0

    def write(self, data: bytes) -> None:
        self._pending += data
        self.offset += len(data)
        if len(self._pending) >= self._batch:
            self._out.write(self._pending)
            self._pending.clear()

    def add_header(self, name: str, size: int, mtime: int) -> None:
        self.write(tar_header(name, size, mtime))

    def end_member(self, size: int) -> None:
        remainder = size % tarfile.BLOCKSIZE
        if remainder:
            self.write(tarfile.NUL * (tarfile.BLOCKSIZE - remainder))

    def close(self) -> None:
        self.write(tarfile.NUL * (tarfile.BLOCKSIZE * 2))
        remainder = self.offset % tarfile.RECORDSIZE
        if remainder:
            self.write(tarfile.NUL * (tarfile.RECORDSIZE - remainder))
        self._out.write(self._pending)
        self._pending.clear()


def _add_checked(tar: TarStream, file: SourceFile, mtime: int) -> None:
    """Archive one file, refusing it if its bytes are no longer the ones validated."""
    changed = InputError(file.source, "changed while being bundled; run collect again")
    tar.add_header(file.archive_path, file.size, mtime)
    digest = hashlib.sha256()
    copied = 0
    with open_no_follow(file.source) as handle:
        while True:
            try:
                chunk = handle.read(min(CHUNK_SIZE, file.size - copied + 1))
            except OSError as error:
                raise InputError(file.source, f"cannot read: {error.strerror}") from None
            if not chunk:
                break
            copied += len(chunk)
            if copied > file.size:
                raise changed
            digest.update(chunk)
            tar.write(chunk)
    if copied != file.size or digest.hexdigest() != file.sha256:
        raise changed
    tar.end_member(file.size)
