"""A bundle's zstd frames read, hashed and decompressed ahead of verify, by a thread of its own.

Decompressing and hashing the archive's bytes is about a third of what verify does on its main
thread, and both let other threads run while they work (python-zstandard's decompressor and
hashlib release the GIL), so a thread that produces the next chunks while the caller parses,
hashes and validates the members of the last one puts a second core to work, as
`zstd -dc | sha256sum` does. The chunks are FrameReader's own, of about a megabyte: with larger
ones the caller, busy with a queue full of work, held the GIL for its whole switch interval
each time the producer wanted it back, where with these the producer seldom waits.

Memory grows by READ_AHEAD_DEPTH chunks at most. Leaving the block stops and joins the thread,
so nothing reads the source behind the caller's back, and whatever the producer raised is raised
in the caller's thread, after the chunks that came before it, as reading in line would. A small
archive is read in line, where starting a thread costs more than its overlap saves, and so is
any archive where the process has one core, on which a thread could only add its own cost.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from queue import Empty, Queue
from typing import BinaryIO, TypeVar

from bundler.core.forked import has_second_core, threads_that_end
from bundler.local.fileio import CHUNK_SIZE
from bundler.local.zstdframes import FrameReader

T = TypeVar("T")

READ_AHEAD_MIN_BYTES = CHUNK_SIZE // 4
"""A smaller archive is read in the caller's thread: realistic predictions compress about
fourfold, so it decompresses into about one chunk, which leaves a thread nothing to overlap.
The verify benchmark measures the thread forced on at bundles on both sides of this size
(`--read-ahead-rows`; docs/performance.md, "What each mechanism gains"): over several runs, it
saved time beyond the noise at every size measured above it."""
READ_AHEAD_DEPTH = 2
"""Chunks the producer may hold ready beyond the one the caller reads."""


@contextlib.contextmanager
def bundle_chunks(source: BinaryIO, size: int) -> Iterator[tuple[FrameReader, Iterator[bytes]]]:
    """The frame reader of an archive of `size` bytes and its decompressed chunks
    (`FrameReader.chunks()`), read ahead by a thread when the archive is large enough and a
    second core is there to run it."""
    frames = FrameReader(source)
    if size < READ_AHEAD_MIN_BYTES or not has_second_core():
        yield frames, frames.chunks()
        return
    with threads_that_end(), read_ahead(frames.chunks()) as chunks:
        yield frames, chunks


@contextlib.contextmanager
def read_ahead(items: Iterator[T], depth: int = READ_AHEAD_DEPTH) -> Iterator[Iterator[T]]:
    """`items`, produced up to `depth` ahead by a thread of their own; see the module's note."""
    queue: Queue[tuple[bool, T | BaseException | None]] = Queue(depth)
    stop = threading.Event()

    def produce() -> None:
        try:
            for item in items:
                queue.put((True, item))
                if stop.is_set():
                    return
            queue.put((False, None))
        except BaseException as error:  # handed to the caller, which raises it in its turn
            queue.put((False, error))

    def consume() -> Iterator[T]:
        while True:
            more, item = queue.get()
            if more:
                yield item  # type: ignore[misc]
            elif isinstance(item, BaseException):
                raise item
            else:
                return

    thread = threading.Thread(target=produce, name="bundler-read-ahead", daemon=True)
    thread.start()
    try:
        yield consume()
    finally:
        stop.set()
        while thread.is_alive():  # a producer waiting on a full queue takes one more put
            with contextlib.suppress(Empty):
                queue.get(timeout=0.05)
        thread.join()
