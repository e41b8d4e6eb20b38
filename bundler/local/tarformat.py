"""The tar side of a bundle: the one ustar form collect writes (`tar_header`, `TarStream`),
and a reader that accepts exactly that form and refuses anything else at once (`TarReader`),
so untrusted bytes never reach `tarfile`: regular files only, names of printable ASCII, fixed
owner and mode, the run's date as every member's mtime, sizes checked at the header, padding
and the end-of-archive blocks as collect writes them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, Final

from bundler.core.errors import NotCanonicalError
from bundler.core.limits import TAR_NUMBER_LIMIT
from bundler.local.fileio import CHUNK_SIZE

TAR_BLOCK: Final = 512
TAR_RECORD: Final = 20 * TAR_BLOCK
"""tar's default record: the archive is padded with zeros to a whole number of records."""
_USTAR_MAX_NAME = 100


def tar_header(name: str, size: int, mtime: int) -> bytes:
    """The ustar header of one bundle member: the name, the size, the run's date as mtime, and
    nothing about the machine (mode 0644, uid and gid 0, no user or group name, a regular file).

    It is byte for byte what `tarfile` writes for the same TarInfo in PAX format (a test proves
    it), built directly because TarInfo.tobuf dominated writing 100,000 small predictions. Only
    plain ASCII names of up to 100 bytes and numbers that fit the header are accepted, where
    tarfile would add a PAX extension header: a bundle never has one, so a reader can refuse it.
    """
    return MemberHeaders(mtime).header(name, size)


class MemberHeaders:
    """`tar_header` for the members of one archive, which share one mtime: its field and its
    share of the checksum are computed once, not once per member, as this runs once per row."""

    __slots__ = ("_mtime_field", "_sum", "mtime")

    def __init__(self, mtime: int) -> None:
        self.mtime = mtime
        self._mtime_field = b"%011o\0" % mtime if 0 <= mtime < TAR_NUMBER_LIMIT else b""
        # Only name, size and mtime vary; the sum of every other byte is a constant.
        self._sum = _FIXED_FIELDS_SUM + sum(self._mtime_field)

    def header(self, name: str, size: int) -> bytes:
        encoded = name.encode("ascii", "replace")
        if (
            not (name.isascii() and name.isprintable())
            or len(encoded) > _USTAR_MAX_NAME
            or not 0 <= size < TAR_NUMBER_LIMIT
            or not self._mtime_field
        ):
            raise ValueError(
                f"no plain ustar header for {name!r} ({size} bytes, mtime {self.mtime})"
            )
        size_field = b"%011o\0" % size
        # The name's NUL padding adds nothing to the checksum.
        checksum = self._sum + sum(encoded) + sum(size_field)
        return b"".join(
            (
                encoded,
                _ZEROS[len(encoded) : _USTAR_MAX_NAME],
                _MODE_UID_GID,
                size_field,
                self._mtime_field,
                b"%06o\0 " % checksum,
                _TAIL,
            )
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
_ZEROS = bytes(TAR_BLOCK)


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
        self._headers = MemberHeaders(0)
        self.offset = offset
        """Bytes of the whole tar stream so far, including any written by an earlier writer."""

    def write(self, data: bytes) -> None:
        self._pending += data
        self.offset += len(data)
        if len(self._pending) >= self._batch:
            self._out.write(self._pending)
            self._pending.clear()

    def add_member(self, name: str, data: bytes, mtime: int) -> None:
        """Header, content and padding appended in place, with no copy of the content but the
        one into the batch: this runs once per row."""
        headers = self._headers
        if headers.mtime != mtime:
            headers = self._headers = MemberHeaders(mtime)
        size = len(data)
        padding = -size % TAR_BLOCK
        pending = self._pending
        pending += headers.header(name, size)
        pending += data
        pending += _ZEROS[:padding]
        self.offset += TAR_BLOCK + size + padding
        if len(pending) >= self._batch:
            self._out.write(pending)
            pending.clear()

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
        if mtime != self.mtime:
            self._take_mtime(name, mtime)
        return name, size

    def _take_mtime(self, name: str, mtime: int) -> None:
        """The first member's mtime becomes every member's; another one later is refused."""
        if self.mtime is not None:
            raise self._other_mtime(name, mtime)
        self.mtime = mtime

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
                name, size, mtime = parse_header(data[start:content_start])
                if mtime != self.mtime:  # as _parse_header does, without its call per member
                    self._take_mtime(name, mtime)
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
