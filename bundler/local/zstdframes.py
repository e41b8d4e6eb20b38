"""The zstd side of a bundle: three checksummed frames (the manifest member, the body, the
end-of-archive blocks) that decompress to one tar stream, and `FrameReader`, which accepts
exactly the frames collect writes and refuses anything else at once (skippable frames, a
missing checksum, a window past the largest level's, a frame past the third), so untrusted
bytes never reach libzstd's permissive frame handling, in linear time and bounded memory.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from typing import BinaryIO, Final

import zstandard

from bundler.core.errors import NotCanonicalError
from bundler.core.limits import MAX_LEVEL
from bundler.local.fileio import CHUNK_SIZE

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
        # Room for a whole feed's output: python-zstandard takes the GIL again each time its
        # output buffer fills, and a thread reading ahead (local/readahead.py) may then wait.
        decompressor = zstandard.ZstdDecompressor(max_window_size=MAX_WINDOW_BYTES).decompressobj(
            write_size=_FEED_OUTPUT_BYTES + _MAX_BLOCK
        )
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
