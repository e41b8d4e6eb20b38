"""Stage 3: write a bundle as a reproducible, streaming `.tar.zst`.

Reproducibility comes from controlling every byte: members in a fixed order, tar headers with
fixed owner, mode and an mtime taken from the run's own date (bundler.local.tarformat), a
manifest serialised the same way every time, and zstd in multi-threaded mode, whose output does
not depend on how many worker threads there are (only single-threaded mode differs), so every
machine makes the same bytes.

Every source file is read once: the bytes that are validated are the bytes archived. The tar
members after the manifest are compressed into a temporary "body" frame while the run is being
validated; once the manifest is known, the archive is written as three checksummed zstd frames
that decompress to one tar stream (bundler.local.zstdframes): the manifest member, the body,
and the end-of-archive blocks. Reading one back is verify's, through the canonical readers of
those two modules.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, BinaryIO

import zstandard

from bundler.core.errors import WriteError
from bundler.core.limits import DEFAULT_LEVEL
from bundler.local.fileio import CHUNK_SIZE, HashingWriter, describe_os_error
from bundler.local.manifest import MANIFEST_PATH, BundleClaim
from bundler.local.tarformat import TarStream

if TYPE_CHECKING:
    from bundler.local.runs import ArchivedFile

MANIFEST_SPOOL_BYTES = 4 << 20
BODY_SPOOL_BYTES = 8 << 20
"""A compressed body up to this size stays in memory."""


def default_threads() -> int:
    return max(1, os.cpu_count() or 1)


def manifest_head(claim: BundleClaim) -> bytes:
    """The manifest up to its file list: the claim as pydantic serialises it, left open. Collect
    writes it, and verify compares a bundle's with the one it derives."""
    return claim.model_dump_json(indent=2).removesuffix("\n}").encode("utf-8")


MANIFEST_FILES_OPENING = b',\n  "files": ['
"""What follows the claim in manifest.json. Nested keys are indented deeper and strings never
hold a raw newline, so in a manifest collect wrote this occurs exactly once."""
MANIFEST_CLOSING = b"\n  ]\n}\n"


def manifest_entry(path: str, size: int, sha256: str, *, first: bool) -> bytes:
    """One file list entry as written: FileEntry's fields in order, formatted as json.dumps
    would with ", " and ": ". Paths are the bundler's own plain-ASCII names: nothing to escape."""
    lead = "\n    " if first else ",\n    "
    return f'{lead}{{"path": "{path}", "size": {size}, "sha256": "{sha256}"}}'.encode("ascii")


def write_manifest(claim: BundleClaim, files: Iterable[ArchivedFile], out: BinaryIO) -> None:
    """Serialise the Manifest model (claim fields, then `files`) entry by entry, so that a
    100,000-file list is never one string in memory. Manifest.model_validate_json reads it back."""
    out.write(manifest_head(claim))
    out.write(MANIFEST_FILES_OPENING)
    batch = bytearray()
    for number, file in enumerate(files):
        batch += manifest_entry(file.archive_path, file.size, file.sha256, first=number == 0)
        if len(batch) >= CHUNK_SIZE:
            out.write(batch)
            batch.clear()
    out.write(batch)
    out.write(MANIFEST_CLOSING)


def make_compressor(level: int, threads: int) -> zstandard.ZstdCompressor:
    """threads 0: compress in line, on the calling thread; more: that many worker threads,
    whose output does not depend on how many there are."""
    return zstandard.ZstdCompressor(level=level, write_checksum=True, threads=threads)


THREADED_BODY_PREDICTIONS = 1000
"""A run of this many predictions or more has its body compressed by worker threads, beside
the validation; a smaller one in line, since ending a multi-threaded frame costs about a
millisecond, more than compressing a small run. The choice depends on the run alone, so the
same run always gives the same bytes."""


@dataclass(frozen=True)
class Compressors:
    """The compressors one collect uses for all its bundles (making a multi-threaded one
    starts its workers, so it is made once): `threaded` and `inline` for bodies, by size, and
    `frames` for the small manifest and end frames, which are written while a body's frame is
    still open (a compressor does one thing at a time)."""

    threaded: zstandard.ZstdCompressor
    inline: zstandard.ZstdCompressor
    frames: zstandard.ZstdCompressor

    @classmethod
    def of(cls, level: int = DEFAULT_LEVEL, threads: int | None = None) -> Compressors:
        return cls(
            threaded=make_compressor(level, threads or default_threads()),
            inline=make_compressor(level, 0),
            frames=make_compressor(level, 0),
        )

    def for_body(self, predictions: int) -> zstandard.ZstdCompressor:
        return self.threaded if predictions >= THREADED_BODY_PREDICTIONS else self.inline


class BodyWriter:
    """Compresses the tar members that follow the manifest as the run is validated.

    The compressed body goes to an anonymous temporary file (it vanishes with the process, even
    on a crash), so a refused run leaves nothing behind and a valid one is never read twice; a
    small run's stays in memory up to BODY_SPOOL_BYTES first: creating a file cost more than
    compressing a small run, which shows in collect of many runs (docs/performance.md).
    """

    def __init__(self, mtime: int, compressors: Compressors, predictions: int) -> None:
        self.mtime = mtime
        self.compressors = compressors
        small = predictions < THREADED_BODY_PREDICTIONS
        # A small run's body in memory first; a large one's straight to the file (one file
        # for a whole run costs nothing worth saving, and the memory would stay held).
        self._file = (
            tempfile.SpooledTemporaryFile(max_size=BODY_SPOOL_BYTES)  # noqa: SIM115
            if small
            else tempfile.TemporaryFile()  # noqa: SIM115
        )
        body: Any = self._file  # a SpooledTemporaryFile, which typeshed does not call BinaryIO
        self._compressed = compressors.for_body(predictions).stream_writer(body, closefd=False)
        self._tar = TarStream(self._compressed)
        self._ended = False
        self._threaded = not small
        self._ending: threading.Thread | None = None
        self._ending_error: BaseException | None = None

    def __enter__(self) -> BodyWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Done with the body."""
        if self._ending is not None:
            self._ending.join()
        self._file.close()

    def end_frame_aside(self) -> None:
        """Start ending a large run's body frame on a thread of its own, while this one writes
        the claim and the manifest: zstd compresses the frame's last job only once the frame
        is ended, on one worker, and `copy_frame_to` would otherwise wait for it. The thread
        holds the GIL only to write out what zstd compressed, without it."""
        if self._threaded and self._ending is None and not self._ended:
            self._ending = threading.Thread(target=self._end_aside, name="body frame end")
            self._ending.start()

    def _end_aside(self) -> None:
        try:
            self._end_frame()
        except BaseException as error:  # raised where the frame is waited for, as in line
            self._ending_error = error

    def _end_frame(self) -> None:
        self._tar.flush()
        self._compressed.close()  # type: ignore[no-untyped-call]
        self._ended = True

    def add(self, archive_path: str, data: bytes) -> None:
        """Append one member; `data` is exactly the bytes that were validated."""
        try:
            self._tar.add_member(archive_path, data, self.mtime)
        except OSError as error:
            raise _temporary_write_error(error) from None

    @property
    def tar_size(self) -> int:
        """Uncompressed tar bytes in the body so far."""
        return self._tar.offset

    def copy_frame_to(self, out: BinaryIO) -> None:
        """End the body's zstd frame (or wait for `end_frame_aside` to) and copy it to `out`."""
        if self._ending is not None:
            self._ending.join()
            self._ending = None
        try:
            if self._ending_error is not None:
                raise self._ending_error
            if not self._ended:
                self._end_frame()
        except OSError as error:
            raise _temporary_write_error(error) from None
        self._file.seek(0)
        shutil.copyfileobj(self._file, out, CHUNK_SIZE)


def _temporary_write_error(error: OSError) -> WriteError:
    return WriteError(f"temporary bundle data: cannot write: {describe_os_error(error)}")


def write_archive(
    claim: BundleClaim,
    files: Iterable[ArchivedFile],
    body: BodyWriter,
    out: BinaryIO,
) -> tuple[str, int]:
    """Write the archive to `out`: the manifest member, the body, and the tar's end, each as a
    checksummed zstd frame (with the body's compressors). Returns the archive's sha256 and
    size."""
    sink = HashingWriter(out)
    compressor = body.compressors.frames
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
