"""Stage 3: write a bundle as a reproducible, streaming `.tar.zst`.

Reproducibility comes from controlling every byte: members in a fixed order, tar headers with
fixed owner, mode and an mtime taken from the run's own date, a manifest serialised the same way
every time, and zstd in multi-threaded mode, whose output does not depend on how many worker
threads there are (only single-threaded mode differs), so every machine makes the same bytes.
"""

from __future__ import annotations

import json
import os
import tarfile
import tempfile
from collections.abc import Callable, Iterable
from typing import BinaryIO

import zstandard

from bundler.errors import InputError
from bundler.fileio import HashingReader, HashingWriter, open_no_follow
from bundler.manifest import MANIFEST_PATH, BundleClaim, FileEntry
from bundler.runs import SourceFile

TAR_FORMAT = tarfile.PAX_FORMAT
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
        with (
            compressor.stream_writer(sink, closefd=False) as compressed,  # type: ignore[arg-type]
            tarfile.open(fileobj=compressed, mode="w|", format=TAR_FORMAT) as tar,
        ):
            tar.addfile(normalised_tar_info(MANIFEST_PATH, manifest_size, mtime), manifest)
            for file in files():
                _add_checked(tar, file, mtime)
                if on_file is not None:
                    on_file()
    return sink.sha256, sink.size


def _add_checked(tar: tarfile.TarFile, file: SourceFile, mtime: int) -> None:
    changed = InputError(file.source, "changed while being bundled; run collect again")
    with open_no_follow(file.source) as handle:
        reader = HashingReader(handle)
        try:
            tar.addfile(normalised_tar_info(file.archive_path, file.size, mtime), reader)
        except OSError as error:
            if error.errno is None and reader.size < file.size:  # tarfile: "unexpected end of data"
                raise changed from None
            raise
        if reader.sha256 != file.sha256 or handle.read(1):
            raise changed
