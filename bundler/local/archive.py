"""Stage 3: write a bundle as a reproducible, streaming `.tar.zst`, and read one back exactly.

Reproducibility comes from controlling every byte: members in a fixed order, tar headers with
fixed owner, mode and an mtime taken from the run's own date, a manifest serialised the same way
every time, and zstd in multi-threaded mode, whose output does not depend on how many worker
threads there are (only single-threaded mode differs), so every machine makes the same bytes.

Every source file is read once: the bytes that are validated are the bytes archived. The tar
members after the manifest are compressed into a temporary "body" frame while the run is being
validated; once the manifest is known, the archive is written as three checksummed zstd frames
that decompress to one tar stream: the manifest member, the body, and the end-of-archive blocks.

Reading is the mirror of writing (`FrameReader`, `TarReader`): it accepts exactly the frames and
headers written here and refuses anything else at once, so untrusted bytes never reach `tarfile`
or libzstd's permissive frame handling, in linear time and bounded memory.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sys
import tempfile
import threading
from collections.abc import Generator, Iterable, Iterator
from concurrent.futures import Future
from contextlib import AbstractContextManager
from dataclasses import dataclass
from queue import Empty, Queue
from typing import TYPE_CHECKING, Any, BinaryIO, Final, TypeVar

import zstandard

from bundler.core.errors import NotCanonicalError, WriteError
from bundler.core.limits import DEFAULT_LEVEL, MAX_LEVEL, TAR_NUMBER_LIMIT
from bundler.local.fileio import CHUNK_SIZE, HashingWriter, describe_os_error
from bundler.local.manifest import MANIFEST_PATH, BundleClaim

if TYPE_CHECKING:
    from bundler.local.runs import ArchivedFile

MANIFEST_SPOOL_BYTES = 4 << 20
BODY_SPOOL_BYTES = 8 << 20
"""A compressed body up to this size stays in memory."""
DEFERRED_BODY_BYTES = 16 << 20
"""A small run's tar body up to this size waits, uncompressed, for the background worker."""
TAR_BLOCK: Final = 512
TAR_RECORD: Final = 20 * TAR_BLOCK
"""tar's default record: the archive is padded with zeros to a whole number of records."""
_USTAR_MAX_NAME = 100


def default_threads() -> int:
    return max(1, os.cpu_count() or 1)


def tar_header(name: str, size: int, mtime: int) -> bytes:
    """The ustar header of one bundle member: the name, the size, the run's date as mtime, and
    nothing about the machine (mode 0644, uid and gid 0, no user or group name, a regular file).

    It is byte for byte what `tarfile` writes for the same TarInfo in PAX format (a test proves
    it), built directly because TarInfo.tobuf dominated writing 100,000 small predictions. Only
    plain ASCII names of up to 100 bytes and numbers that fit the header are accepted, where
    tarfile would add a PAX extension header: a bundle never has one, so a reader can refuse it.
    """
    encoded = name.encode("ascii", "replace")
    if (
        not (name.isascii() and name.isprintable())
        or len(encoded) > _USTAR_MAX_NAME
        or not 0 <= size < TAR_NUMBER_LIMIT
        or not 0 <= mtime < TAR_NUMBER_LIMIT
    ):
        raise ValueError(f"no plain ustar header for {name!r} ({size} bytes, mtime {mtime})")
    name_field = encoded.ljust(_USTAR_MAX_NAME, b"\0")
    size_field = b"%011o\0" % size
    mtime_field = b"%011o\0" % mtime
    # Only name, size and mtime vary; the sum of every other byte is a constant.
    checksum = _FIXED_FIELDS_SUM + sum(name_field) + sum(size_field) + sum(mtime_field)
    return b"".join(
        (name_field, _MODE_UID_GID, size_field, mtime_field, b"%06o\0 " % checksum, _TAIL)
    )


_REGULAR_TYPE = b"0"
_USTAR_MAGIC = b"ustar\x0000"
_MODE_UID_GID = b"0000644\0" + b"0000000\0" + b"0000000\0"
_TAIL = (
    _REGULAR_TYPE
    + b"\0" * 100  # linkname
    + _USTAR_MAGIC
    + b"\0" * 64  # uname, gname
    + b"\0" * 16  # devmajor, devminor: empty for a regular file
    + b"\0" * 155  # prefix
).ljust(TAR_BLOCK - 156, b"\0")
_FIXED_FIELDS_SUM = sum(_MODE_UID_GID) + sum(b" " * 8) + sum(_TAIL)
"""The checksum counts its own field as eight spaces."""


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


class BackgroundCompressor:
    """One worker thread that compresses the bodies of small runs while the calling thread
    reads and validates the next run: on two cores the compression no longer adds to the
    reading (zstd releases the GIL). It compresses in line (single-threaded mode), with a
    compressor of its own made like `inline`, so a body's bytes are the ones `inline` would
    write: zstd's streaming output does not depend on how its input is cut into writes."""

    def __init__(self, level: int) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self._compressor = make_compressor(level, 0)  # used by the one worker only
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="bundler-body")

    def submit(self, raw: bytearray, out: BinaryIO) -> Future[None]:
        """Compress `raw` as one frame into `out`, in the worker."""
        return self._pool.submit(self._compress, raw, out)

    def _compress(self, raw: bytearray, out: BinaryIO) -> None:
        with self._compressor.stream_writer(out, closefd=False) as compressed:
            compressed.write(raw)

    def close(self) -> None:
        self._pool.shutdown(wait=True)


@dataclass(frozen=True)
class Compressors:
    """The compressors one collect uses for all its bundles (making a multi-threaded one
    starts its workers, so it is made once): `threaded` and `inline` for bodies, by size,
    `background` for the bodies of small runs (see BodyWriter), and `frames` for the small
    manifest and end frames, which are written while a body's frame is still open (a
    compressor does one thing at a time). `close` stops the background worker."""

    threaded: zstandard.ZstdCompressor
    inline: zstandard.ZstdCompressor
    frames: zstandard.ZstdCompressor
    background: BackgroundCompressor

    @classmethod
    def of(cls, level: int = DEFAULT_LEVEL, threads: int | None = None) -> Compressors:
        return cls(
            threaded=make_compressor(level, threads or default_threads()),
            inline=make_compressor(level, 0),
            frames=make_compressor(level, 0),
            background=BackgroundCompressor(level),
        )

    def for_body(self, predictions: int) -> zstandard.ZstdCompressor:
        return self.threaded if predictions >= THREADED_BODY_PREDICTIONS else self.inline

    def close(self) -> None:
        self.background.close()


class _BodySink:
    """Where a body's tar bytes go. A small run's are kept as they come, up to
    DEFERRED_BODY_BYTES, for the background worker to compress once the run is validated;
    past that (or for a large run) they go to the compressor as they come, so memory stays
    bounded."""

    def __init__(self, compressor: zstandard.ZstdCompressor, out: BinaryIO, defer: bool) -> None:
        self._compressor, self._out = compressor, out
        self.raw: bytearray | None = bytearray() if defer else None
        self._compressed: Any = None if defer else compressor.stream_writer(out, closefd=False)

    def write(self, data: bytes | bytearray) -> None:
        if self.raw is not None:
            self.raw += data
            if len(self.raw) <= DEFERRED_BODY_BYTES:
                return
            self._compressed = self._compressor.stream_writer(self._out, closefd=False)
            data, self.raw = self.raw, None
        self._compressed.write(data)

    def end(self, background: BackgroundCompressor) -> Future[None]:
        """End the frame: in the background for kept bytes, else here."""
        if self.raw is not None:
            raw, self.raw = self.raw, None
            return background.submit(raw, self._out)
        self._compressed.close()
        done: Future[None] = Future()
        done.set_result(None)
        return done


class BodyWriter:
    """Compresses the tar members that follow the manifest, as the run is validated (a large
    run), or after it (a small one, in the background: `start`).

    The compressed body goes to an anonymous temporary file (it vanishes with the process, even
    on a crash), so a refused run leaves nothing behind and a valid one is never read twice; a
    small run's stays in memory up to BODY_SPOOL_BYTES first: creating a file cost more than
    compressing a small run (0.4 ms a file here, for 500 runs of 40 predictions).
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
        self._sink = _BodySink(compressors.for_body(predictions), body, defer=small)
        self._tar = TarStream(self._sink)
        self._ended: Future[None] | None = None

    def __enter__(self) -> BodyWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Done with the body (the worker first, if it is still writing it)."""
        if self._ended is not None:
            with contextlib.suppress(BaseException):
                self._ended.result()
        self._file.close()

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

    def start(self) -> None:
        """No more members: end the body's frame (a small run's in the background)."""
        if self._ended is None:
            try:
                self._tar.flush()
                self._ended = self._sink.end(self.compressors.background)
            except OSError as error:
                raise _temporary_write_error(error) from None

    def copy_frame_to(self, out: BinaryIO) -> None:
        """End the body's zstd frame, if `start` did not, and copy it to `out`."""
        self.start()
        assert self._ended is not None
        try:
            self._ended.result()
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
        padding = -len(data) % TAR_BLOCK
        self.write(tar_header(name, len(data), mtime) + data + b"\0" * padding)

    def add_header(self, name: str, size: int, mtime: int) -> None:
        self.write(tar_header(name, size, mtime))

    def end_member(self, size: int) -> None:
        remainder = size % TAR_BLOCK
        if remainder:
            self.write(b"\0" * (TAR_BLOCK - remainder))

    def flush(self) -> None:
        if self._pending:
            self._out.write(self._pending)
            self._pending.clear()

    def close(self) -> None:
        """End the archive as tarfile does: two zero blocks, then zeros to a whole record."""
        self.write(b"\0" * end_of_archive_size(self.offset))
        self.flush()


def end_of_archive_size(offset: int) -> int:
    """Bytes that end a tar stream of `offset` bytes as tarfile ends it: two zero blocks, then
    zeros to a whole record."""
    return 2 * TAR_BLOCK + -(offset + 2 * TAR_BLOCK) % TAR_RECORD


# Reading ---------------------------------------------------------------------------------------

BUNDLE_FRAMES: Final = 3
"""The manifest member, the body, and the end of the archive: one zstd frame each."""
ZSTD_MAGIC: Final = b"\x28\xb5\x2f\xfd"
_SKIPPABLE_MAGIC = 0x184D2A5
"""Skippable frames start with 0x184D2A50 to 0x184D2A5F."""
FRAME_HEADER_DESCRIPTOR: Final = 0x04
"""What collect's streaming compressor writes: a content checksum, and no content size (unknown
when the frame starts), no dictionary id, not single-segment."""
_CHECKSUM_FLAG = 0x04
_MAX_BLOCK = 128 << 10
"""zstd's largest block, compressed or not."""
_FEED_OUTPUT_BYTES = 1 << 20
_MIN_BLOCK_OUTPUT = 1 << 10


def level_window(level: int) -> int:
    """The window of a frame that collect writes at zstd `level` (its size is never known in
    advance, so the level's default window is used)."""
    return 1 << zstandard.ZstdCompressionParameters.from_level(level).window_log


MAX_WINDOW_BYTES: Final = level_window(MAX_LEVEL)


def _window_size(descriptor: int) -> int:
    exponent, mantissa = descriptor >> 3, descriptor & 7
    base = 1 << (10 + exponent)
    return base + (base >> 3) * mantissa


class FrameReader:
    """Decompresses a bundle's zstd frames one at a time, accepting only what collect writes:
    exactly BUNDLE_FRAMES frames with the header its compressor writes (a content checksum
    included), blocks within zstd's limits, and nothing after the last frame.

    libzstd's streaming reader passes over skippable frames, stops without a word inside a
    truncated frame and checks a checksum only where a frame has one, so the frame and block
    headers are walked here (three bytes per block of up to 128 KB) and each frame goes to its
    own decompressor, which must reach the frame's end, and so check its checksum, exactly where
    the last block ends. Blocks are fed a few at a time: however small the input, no call
    returns much more than a megabyte.
    """

    def __init__(self, source: BinaryIO, chunk_size: int = CHUNK_SIZE) -> None:
        self._source = source
        self._chunk_size = chunk_size
        self._data = b""
        self._pos = 0
        self._fed = 0
        """Where the bytes not yet given to the decompressor start, in `_data`."""
        self._offset = 0
        """The file offset of `_data[0]`."""
        self.windows: list[int] = []
        """The window size of every frame read so far, in order."""
        self._number = self._blocks = self._produced = 0
        """The current frame's number, blocks walked and bytes decompressed so far."""

    def frame(self) -> Iterator[bytes]:
        """The next frame's decompressed bytes, in chunks; read it to the end before the next."""
        number = len(self.windows) + 1
        window = self._frame_header(number)
        decompressor = zstandard.ZstdDecompressor(max_window_size=MAX_WINDOW_BYTES).decompressobj()
        block_limit = min(window, _MAX_BLOCK)
        self._number, self._blocks, self._produced = number, 0, 0
        bound = 0
        """Most bytes the blocks walked since the last feed can decompress to."""
        while True:
            if not (yield from self._need(3, decompressor)):
                raise self._truncated(number)
            header = int.from_bytes(self._data[self._pos : self._pos + 3], "little")
            last, kind, size = header & 1, (header >> 1) & 3, header >> 3
            if kind == 3 or size > block_limit:
                raise NotCanonicalError(
                    "zstd", f"zstd frame {number} has an invalid block at byte {self._where()}"
                )
            self._blocks += 1
            self._check_block_count(self._produced + bound)
            self._pos += 3
            remaining = 1 if kind == 1 else size  # an RLE block holds one byte, repeated
            while len(self._data) - self._pos < remaining:
                remaining -= len(self._data) - self._pos
                self._pos = len(self._data)
                if not (yield from self._need(1, decompressor)):
                    raise self._truncated(number)
            self._pos += remaining
            if last:
                break
            bound += block_limit if kind == 2 else size
            if bound >= _FEED_OUTPUT_BYTES:
                yield from self._feed(decompressor)
                bound = 0
        if not (yield from self._need(4, decompressor)):  # the content checksum
            raise self._truncated(number)
        self._pos += 4
        yield from self._feed(decompressor)
        if not decompressor.eof:
            raise NotCanonicalError("zstd", f"zstd frame {number} does not end with its last block")
        self.windows.append(window)

    def chunks(self) -> Iterator[bytes]:
        """Every frame's decompressed bytes, with an empty chunk after each frame (see
        `frame_chunks`), then the check that nothing follows the last frame."""
        for _ in range(BUNDLE_FRAMES):
            yield from self.frame()
            yield b""
        self.end()

    def end(self) -> None:
        """Refuse anything after the last frame; the source is read to its end."""
        if not self._fill(1):
            return
        start = self._where()
        self._fill(4)
        lead = self._data[self._pos : self._pos + 4]
        extra = len(self._data) - self._pos
        while chunk := self._source.read(self._chunk_size):
            extra += len(chunk)
        if lead == ZSTD_MAGIC:
            problem = f"a zstd frame after the {BUNDLE_FRAMES} that collect writes"
        elif len(lead) == 4 and int.from_bytes(lead, "little") >> 4 == _SKIPPABLE_MAGIC:
            problem = f"a skippable zstd frame at byte {start}"
        else:
            problem = f"{extra} byte(s) after the last zstd frame"
        raise NotCanonicalError("zstd", problem)

    def _frame_header(self, number: int) -> int:
        """Check the next frame's header, step over it, and return its window size."""
        if not self._fill(4):
            if self._pos == len(self._data):
                raise NotCanonicalError(
                    "zstd",
                    f"the archive ends after {number - 1} zstd frame(s); "
                    f"collect writes {BUNDLE_FRAMES}",
                )
            raise self._truncated(number)
        magic = self._data[self._pos : self._pos + 4]
        if magic != ZSTD_MAGIC:
            if int.from_bytes(magic, "little") >> 4 == _SKIPPABLE_MAGIC:
                raise NotCanonicalError("zstd", f"a skippable zstd frame at byte {self._where()}")
            if number == 1:
                raise NotCanonicalError("zstd", "not a zstd stream (no zstd magic number)")
            raise NotCanonicalError(
                "zstd", f"no zstd frame {number} at byte {self._where()} (no magic number)"
            )
        if not self._fill(6):
            raise self._truncated(number)
        descriptor = self._data[self._pos + 4]
        if not descriptor & _CHECKSUM_FLAG:
            raise NotCanonicalError("zstd", f"zstd frame {number} carries no checksum")
        if descriptor != FRAME_HEADER_DESCRIPTOR:
            raise NotCanonicalError(
                "zstd",
                f"zstd frame {number} has header flags {descriptor:#04x}; collect writes "
                f"{FRAME_HEADER_DESCRIPTOR:#04x} (a checksum, no content size, no dictionary)",
            )
        window = _window_size(self._data[self._pos + 5])
        if window > MAX_WINDOW_BYTES:
            raise NotCanonicalError(
                "zstd",
                f"zstd frame {number} needs a {window}-byte window; collect's levels use at "
                f"most {MAX_WINDOW_BYTES}",
            )
        self._fed = self._pos  # the header goes to the decompressor with the first blocks
        self._pos += 6
        return window

    def _need(
        self, wanted: int, decompressor: zstandard.ZstdDecompressionObj
    ) -> Generator[bytes, None, bool]:
        """Make `wanted` unread bytes available; everything walked so far is decompressed first,
        so that only unread bytes are kept. Returns False at the end of the file."""
        if len(self._data) - self._pos >= wanted:
            return True
        yield from self._feed(decompressor)
        return self._fill(wanted)

    def _feed(self, decompressor: zstandard.ZstdDecompressionObj) -> Iterator[bytes]:
        if self._fed < self._pos:
            output = decompressor.decompress(memoryview(self._data)[self._fed : self._pos])
            self._fed = self._pos
            self._produced += len(output)
            self._check_block_count(self._produced)
            if output:
                yield output

    def _check_block_count(self, output: int) -> None:
        """zstd writes blocks of up to 128 KiB, fewer only where a frame or a worker's job ends;
        a frame of many tiny or empty blocks is a forgery, and walking it would be slow, so at
        most one block per _MIN_BLOCK_OUTPUT bytes of output (which may still be to come)."""
        if self._blocks > 1 + output // _MIN_BLOCK_OUTPUT:
            raise NotCanonicalError(
                "zstd",
                f"zstd frame {self._number} has {self._blocks} blocks for {output} bytes; "
                "collect's compressor writes blocks of up to 128 KiB",
            )

    def _fill(self, wanted: int) -> bool:
        while len(self._data) - self._pos < wanted:
            chunk = self._source.read(self._chunk_size)
            if not chunk:
                return False
            keep = min(self._fed, self._pos)
            self._data = self._data[keep:] + chunk
            self._offset += keep
            self._pos -= keep
            self._fed -= keep
        return True

    def _where(self) -> int:
        return self._offset + self._pos

    def _truncated(self, number: int) -> NotCanonicalError:
        return NotCanonicalError("zstd", f"the archive ends inside zstd frame {number}")


def frame_chunks(chunks: Iterator[bytes]) -> Iterator[bytes]:
    """The chunks of the next frame from `FrameReader.chunks()`, up to its end marker."""
    for chunk in chunks:
        if not chunk:
            return
        yield chunk


T = TypeVar("T")


PREFETCH_SWITCH_INTERVAL = 0.0005
"""Seconds the consumer may hold the GIL while the producer waits for it, during a prefetch.
The consumer (parsing members) rarely blocks, so with Python's default of 5 ms the producer,
which needs the GIL only briefly between chunks, often waits and leaves the queue empty; a
shorter interval kept verify 5-8% faster, measured on a 20,000-prediction bundle."""


READ_AHEAD_MIN_BYTES = 8 << 20
"""A source smaller than this is read in the consumer's own thread, as it is consumed: for a
small archive, a thread of its own (its start, and the GIL passing to and fro) costs more than
the overlap saves. Measured on verify: 20% slower with the thread at 0.4 MB, even at 5 MB,
14% faster at 18 MB."""


def read_ahead(items: Iterator[T], source_size: int) -> AbstractContextManager[Iterator[T]]:
    """`items` from a source of `source_size` bytes: `prefetched` when the source is large
    enough to be worth a thread, as they come otherwise."""
    if source_size < READ_AHEAD_MIN_BYTES:
        return contextlib.nullcontext(items)
    return prefetched(items)


@contextlib.contextmanager
def prefetched(items: Iterator[T], depth: int = 4) -> Iterator[Iterator[T]]:
    """`items`, produced up to `depth` ahead by a thread of their own. zstd and hashlib let
    other threads run while they work, so reading and decompressing the archive overlaps with
    parsing what it holds; memory grows by `depth` items at most. On leaving the block the
    producer is stopped and joined, so nothing reads the source behind the caller's back, and
    whatever it raised is raised in the caller's thread."""
    queue: Queue[tuple[T | BaseException | None, bool]] = Queue(depth)
    stop = threading.Event()

    def produce() -> None:
        try:
            for item in items:
                queue.put((item, True))
                if stop.is_set():
                    return
            queue.put((None, False))
        except BaseException as error:  # handed to the consumer, which raises it
            queue.put((error, False))

    def consume() -> Iterator[T]:
        while True:
            item, more = queue.get()
            if more:
                yield item  # type: ignore[misc]
            elif isinstance(item, BaseException):
                raise item
            else:
                return

    thread = threading.Thread(target=produce, name="bundler-read", daemon=True)
    with _short_switch_interval():
        thread.start()
        try:
            yield consume()
        finally:
            stop.set()
            while thread.is_alive():
                with contextlib.suppress(Empty):
                    queue.get(timeout=0.05)  # a producer waiting on a full queue
            thread.join()


_switch_lock = threading.Lock()
_switch_users = 0
_switch_saved = 0.0


@contextlib.contextmanager
def _short_switch_interval() -> Iterator[None]:
    """PREFETCH_SWITCH_INTERVAL while any prefetch runs (prefetches in several threads of a
    library user's process included); the interval the process had, once the last one ends."""
    global _switch_users, _switch_saved
    with _switch_lock:
        if _switch_users == 0:
            _switch_saved = sys.getswitchinterval()
            sys.setswitchinterval(min(_switch_saved, PREFETCH_SWITCH_INTERVAL))
        _switch_users += 1
    try:
        yield
    finally:
        with _switch_lock:
            _switch_users -= 1
            if _switch_users == 0:
                sys.setswitchinterval(_switch_saved)


class TarReader:
    """Reads members from one zstd frame's share of the tar stream, accepting only the headers
    `tar_header` writes, one mtime for every member, and zeros as padding. Chunks are sliced, not
    re-read through file objects, which is what keeps reading near the speed of decompression."""

    def __init__(self, chunks: Iterator[bytes], *, offset: int = 0, mtime: int | None = None):
        self._chunks = chunks
        self._data = b""
        self._pos = 0
        self.offset = offset
        """Bytes of the whole tar stream before the next unread one."""
        self.mtime = mtime
        """Every member's mtime; taken from the first header when not given."""

    def next_header(self) -> tuple[str, int] | None:
        """The next member's name and size; None where this frame's share ends."""
        block = self._take(TAR_BLOCK)
        if block is None:
            return None
        return self._parse_header(block)

    def _parse_header(self, block: bytes) -> tuple[str, int]:
        """A member's name and size from its header, whose mtime must be every member's."""
        name, size, mtime = parse_header(block)
        if mtime != self.mtime and self.mtime is not None:
            raise self._other_mtime(name, mtime)
        self.mtime = mtime
        return name, size

    def next_member(self, max_size: int) -> tuple[str, bytes] | None:
        """The next member's name and content, refused if it declares more than `max_size`
        bytes; None where this frame's share ends."""
        return next(self.members(max_size), None)

    def members(self, max_size: int) -> Iterator[tuple[str, bytes]]:
        """Every remaining member of this frame's share, each as `next_member` gives it. The
        members lying whole in the current chunk are sliced out in one tight loop, without a
        generator or a slice of the stream per member (this runs once per prediction); only a
        member across chunks takes the slow path."""
        while True:
            data, start = self._data, self._pos
            chunk_end = len(data)
            while start + TAR_BLOCK <= chunk_end:
                content_start = start + TAR_BLOCK
                name, size = self._parse_header(data[start:content_start])
                end = content_start + size
                padded = end + -size % TAR_BLOCK
                if size > max_size or padded > chunk_end:
                    break  # refused, or read across chunks, by the slow path
                if data.count(0, end, padded) != padded - end:
                    raise NotCanonicalError("members", f"padding after {name!r} is not zeros")
                self._pos = padded
                self.offset += padded - start
                yield name, data[content_start:end]
                start = padded
            member = self._member_across_chunks(max_size)
            if member is None:
                return
            yield member

    def _member_across_chunks(self, max_size: int) -> tuple[str, bytes] | None:
        header = self.next_header()
        if header is None:
            return None
        name, size = header
        if size > max_size:
            raise NotCanonicalError(
                "members",
                f"member {name!r} is {size} bytes, more than the {max_size} collect accepts",
            )
        return name, self.read(size)

    def read(self, size: int) -> bytes:
        """A member's content (after its header), whole; its padding is checked."""
        data = self._take(size) if size else b""
        if data is None:
            raise self._truncated()
        self._skip_padding(size)
        return data

    def read_chunks(self, size: int) -> Iterator[bytes]:
        """A member's content in pieces, for one too large to hold whole."""
        left = size
        while left:
            if self._pos == len(self._data):
                chunk = next(self._chunks, None)
                if chunk is None:
                    raise self._truncated()
                self._data, self._pos = chunk, 0
            piece = self._data[self._pos : self._pos + left]
            self._pos += len(piece)
            self.offset += len(piece)
            left -= len(piece)
            yield piece
        self._skip_padding(size)

    def expect_end(self, what: str) -> None:
        """Nothing more may follow in this frame."""
        if self._take(1) is not None:
            raise NotCanonicalError("members", f"more than {what} in its zstd frame")

    def expect_end_of_archive(self) -> None:
        """Exactly the zero blocks and record padding that end every bundle, and nothing else."""
        size = end_of_archive_size(self.offset)
        data = self._take(size)
        if data is None or data.count(0) != size:
            raise NotCanonicalError(
                "members", f"the archive does not end with the {size} zero bytes collect writes"
            )
        self.expect_end("the end-of-archive blocks")

    def _skip_padding(self, size: int) -> None:
        padding = -size % TAR_BLOCK
        if padding:
            zeros = self._take(padding)
            if zeros is None:
                raise self._truncated()
            if zeros.count(0) != padding:
                raise NotCanonicalError(
                    "members", f"padding before byte {self.offset} is not zeros"
                )

    def _take(self, size: int) -> bytes | None:
        """The next `size` bytes; None if the stream ends exactly here."""
        end = self._pos + size
        if end <= len(self._data):
            piece = self._data[self._pos : end]
            self._pos = end
            self.offset += size
            return piece
        parts = [self._data[self._pos :]]
        have = len(parts[0])
        for chunk in self._chunks:
            if have + len(chunk) >= size:
                cut = size - have
                parts.append(chunk[:cut])
                self._data, self._pos = chunk, cut
                self.offset += size
                return b"".join(parts)
            parts.append(chunk)
            have += len(chunk)
        self._data, self._pos = b"", 0
        if have:
            self.offset += have
            raise self._truncated()
        return None

    def _other_mtime(self, name: str, mtime: int) -> NotCanonicalError:
        return NotCanonicalError(
            "members", f"member {name!r} has mtime {mtime}, the first member {self.mtime}"
        )

    def _truncated(self) -> NotCanonicalError:
        return NotCanonicalError(
            "members", f"a zstd frame ends inside a member, at byte {self.offset} of the tar"
        )


_PLAIN_NAME = re.compile(rb"[\x20-\x7e]{1,100}")
_SIZE_AND_MTIME = re.compile(rb"([0-7]{11})\0([0-7]{11})\0")


def parse_header(block: bytes) -> tuple[str, int, int]:
    """Name, size and mtime of a header that is exactly what `tar_header` writes for them;
    NotCanonicalError, naming what differs, for any other.

    The same bytes `tar_header` would build are checked field by field rather than rebuilt:
    this runs once per member, and rebuilding cost twice as much."""
    name = block[:_USTAR_MAX_NAME].rstrip(b"\0")
    numbers = _SIZE_AND_MTIME.fullmatch(block, 124, 148)
    if (
        numbers is not None
        and block[156:] == _TAIL
        and block[100:124] == _MODE_UID_GID
        and _PLAIN_NAME.fullmatch(name) is not None
    ):
        checksum = _FIXED_FIELDS_SUM + sum(name) + sum(block[124:148])
        if block[148:156] == b"%06o\0 " % checksum:
            return name.decode("ascii"), int(numbers[1], 8), int(numbers[2], 8)
    raise NotCanonicalError("members", describe_header(block))


_HEADER_FIELDS = (
    ("name", 0, 100),
    ("mode", 100, 8),
    ("uid", 108, 8),
    ("gid", 116, 8),
    ("size", 124, 12),
    ("mtime", 136, 12),
    ("type", 156, 1),
    ("linkname", 157, 100),
    ("magic", 257, 8),
    ("uname", 265, 32),
    ("gname", 297, 32),
    ("devmajor", 329, 8),
    ("devminor", 337, 8),
    ("prefix", 345, 155),
    ("padding", 500, 12),
    ("checksum", 148, 8),
)
_EXTENSION_HEADERS = {
    b"x": "a PAX extended header",
    b"g": "a PAX global header",
    b"L": "a GNU long-name header",
    b"K": "a GNU long-link header",
}


def describe_header(block: bytes) -> str:
    """What makes `block` other than a header collect writes, most telling difference first."""
    if block.count(0) == len(block):
        return "an end-of-archive block where collect writes a member"
    kind = block[156:157]
    raw_name = block[:_USTAR_MAX_NAME].rstrip(b"\0")
    shown = raw_name.decode("ascii", "backslashreplace")
    if kind in _EXTENSION_HEADERS:
        return f"{_EXTENSION_HEADERS[kind]} ({shown!r}); collect writes plain ustar headers only"
    if kind != _REGULAR_TYPE:
        return f"member {shown!r} is not a regular file (tar type {kind!r})"
    if block[257:265] != _USTAR_MAGIC:
        return f"member {shown!r} has no ustar magic"
    try:
        name = raw_name.decode("ascii")
        expected = tar_header(name, int(block[124:135], 8), int(block[136:147], 8))
    except ValueError:
        return f"member {shown!r}: name, size or mtime is not what collect writes"
    for field, start, length in _HEADER_FIELDS:  # the checksum last: it sums the others
        actual, wanted = block[start : start + length], expected[start : start + length]
        if actual != wanted:
            return f"member {shown!r}: {field} is {actual!r}, collect writes {wanted!r}"
    return f"member {shown!r}: the header is not what collect writes"
