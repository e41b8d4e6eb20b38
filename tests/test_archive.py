"""The archive itself: layout, normalised headers, unchanged bytes, no leaks, reproducibility."""

from __future__ import annotations

import getpass
import hashlib
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import zstandard
from factory import RunSpec, write_tree
from helpers import build, decompress, only_bundle, read_members, sidecar_path
from hypothesis import given, settings
from hypothesis import strategies as st

from bundler.core.errors import NotCanonicalError
from bundler.local.archive import THREADED_BODY_PREDICTIONS, BodyWriter, Compressors
from bundler.local.collect import CollectOptions, collect
from bundler.local.manifest import Manifest, Sidecar
from bundler.local.schema import StaticsRunMetadata
from bundler.local.tarformat import (
    TarReader,
    TarStream,
    end_of_archive_size,
    parse_header,
    tar_header,
)
from bundler.local.zstdframes import BUNDLE_FRAMES, FrameReader

SPEC = RunSpec(model="Qwen/Qwen3.5-27B", rows=12)


def test_layout_is_manifest_run_meta_metrics_then_predictions_in_numeric_order(
    tmp_path: Path,
) -> None:
    report, _ = build(tmp_path, [SPEC], CollectOptions(expected_rows={"expert-vqa": 12}))
    members = read_members(Path(only_bundle(report).archive))
    names = [member.name for member in members]
    assert names == [
        "manifest.json",
        "run_meta.json",
        "metrics.json",
        *(f"predictions/prediction_{index}.json" for index in range(12)),
    ]
    assert names.index("predictions/prediction_2.json") < names.index(
        "predictions/prediction_10.json"
    )


def test_member_bytes_are_the_source_bytes(tmp_path: Path) -> None:
    report, _ = build(tmp_path, [SPEC], CollectOptions(expected_rows={"expert-vqa": 12}))
    run_dir = tmp_path / "out" / "expert-vqa_predictions" / "Qwen" / "Qwen3.5-27B"
    members = {member.name: member.data for member in read_members(Path(report.bundles[0].archive))}
    assert members["run_meta.json"] == (run_dir / "run_meta.json").read_bytes()
    assert members["metrics.json"] == (run_dir / "metrics.json").read_bytes()
    for index in range(12):
        source = (run_dir / f"prediction_{index}.json").read_bytes()
        assert members[f"predictions/prediction_{index}.json"] == source


def test_headers_are_normalised(tmp_path: Path) -> None:
    report, _ = build(tmp_path, [SPEC])
    run_date_seconds = StaticsRunMetadata.model_validate(SPEC.run_meta()).run_timestamp
    assert run_date_seconds == 1781520142  # 2026-06-15T10:42:22Z
    for member in read_members(Path(report.bundles[0].archive)):
        info = member.info
        assert info.isreg()
        assert info.mtime == run_date_seconds
        assert (info.uid, info.gid, info.uname, info.gname) == (0, 0, "", "")
        assert info.mode == 0o644
        assert info.size == len(member.data)
        assert info.pax_headers == {}


def test_manifest_fields_and_file_list(tmp_path: Path) -> None:
    report, _ = build(tmp_path, [SPEC], CollectOptions(expected_rows={"expert-vqa": 12}))
    members = read_members(Path(report.bundles[0].archive))
    manifest = json.loads(members[0].data)
    assert set(manifest) == set(Manifest.model_fields)
    assert manifest["manifest_version"] == 2
    assert manifest["bundle_id"] == report.bundles[0].bundle_id
    assert manifest["target"] == "expert-vqa@a1b2c3d4"
    assert manifest["statics"]["resolved_revision"] == SPEC.resolved_revision
    assert manifest["run_date"] == SPEC.run_date
    assert manifest["coverage"] == {"status": "complete", "expected_rows": 12, "rows_present": 12}
    assert manifest["files"] == [
        {
            "path": member.name,
            "size": len(member.data),
            "sha256": hashlib.sha256(member.data).hexdigest(),
        }
        for member in members[1:]
    ]
    Manifest.model_validate_json(members[0].data)


def test_metrics_sha256_in_the_bundle_equals_the_source_file(tmp_path: Path) -> None:
    report, _ = build(tmp_path, [SPEC])
    source = tmp_path / "out" / "expert-vqa_predictions" / "Qwen" / "Qwen3.5-27B" / "metrics.json"
    manifest = json.loads(read_members(Path(report.bundles[0].archive))[0].data)
    (entry,) = [entry for entry in manifest["files"] if entry["path"] == "metrics.json"]
    assert entry["sha256"] == hashlib.sha256(source.read_bytes()).hexdigest()


def test_zstd_frame_is_checksummed(tmp_path: Path) -> None:
    report, _ = build(tmp_path, [SPEC])
    data = Path(report.bundles[0].archive).read_bytes()
    assert zstandard.get_frame_parameters(data).has_checksum
    assert decompress(Path(report.bundles[0].archive))[257:262] == b"ustar"


def test_sidecar_is_the_manifest_without_files_plus_the_archive_digest(tmp_path: Path) -> None:
    report, _ = build(tmp_path, [SPEC])
    bundle = report.bundles[0]
    archive = Path(bundle.archive)
    assert Path(bundle.sidecar) == sidecar_path(archive)
    sidecar = json.loads(Path(bundle.sidecar).read_text())
    manifest = json.loads(read_members(archive)[0].data)
    files = manifest.pop("files")
    data = archive.read_bytes()
    assert sidecar.pop("archive") == {
        "name": archive.name,
        "size": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
    }
    assert sidecar.pop("files_count") == len(files)
    assert sidecar == manifest
    assert (bundle.sha256, bundle.size) == (hashlib.sha256(data).hexdigest(), len(data))
    Sidecar.model_validate_json(Path(bundle.sidecar).read_bytes())


def test_nothing_about_the_machine_leaks_into_the_bundle(tmp_path: Path) -> None:
    report, _ = build(tmp_path, [SPEC])
    bundle = report.bundles[0]
    tar = decompress(Path(bundle.archive))
    sidecar = Path(bundle.sidecar).read_bytes()
    user = getpass.getuser().encode()
    host = socket.gethostname().encode()
    for blob in (tar, sidecar):
        assert str(tmp_path).encode() not in blob
        assert b"/tmp" not in blob and os.getcwd().encode() not in blob
        assert b"\x00" + user + b"\x00" not in blob  # tar's uname field is NUL-padded
        assert b'"' + user + b'"' not in blob
        assert host not in blob
    members = read_members(Path(bundle.archive))
    assert all(member.info.uname == "" and member.info.gname == "" for member in members)
    # mtime comes from run_date, so the build time cannot be in any header
    assert {member.info.mtime for member in members} == {1781520142}


def copy_tree_reversed(source: Path, destination: Path) -> None:
    """The same files, created in the opposite order (so listing order can differ), with other
    mtimes and, where we can, another owner."""
    files = sorted(path for path in source.rglob("*") if path.is_file())
    for number, path in enumerate(reversed(files)):
        target = destination / path.relative_to(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
        os.utime(target, (1_000_000 + number, 2_000_000 + number * 7))
        if os.geteuid() == 0:
            os.chown(target, 1234, 4321)
    (destination / "noise.txt").write_text("an unrelated file at the root")


def test_same_inputs_give_identical_bytes_across_threads_mtimes_order_owner_umask(
    tmp_path: Path,
) -> None:
    # Large enough (about 10 MB of predictions) for zstd to split the input into several
    # multi-threaded jobs, so the thread count really could change the output.
    specs = [
        RunSpec(model="Qwen/Qwen3.5-27B", rows=500, thoughts_chars=20_000),
        RunSpec(task="maze", model="gpt-5.2", rows=3, resolved_revision=None),
    ]
    first_root, second_root = tmp_path / "one" / "out", tmp_path / "two" / "deeper" / "out"
    write_tree(first_root, specs)
    copy_tree_reversed(first_root, second_root)
    expected = {"expert-vqa": 500}

    first = collect(first_root, tmp_path / "b1", CollectOptions(threads=1, expected_rows=expected))
    previous = os.umask(0o077)
    try:
        second = collect(
            second_root, tmp_path / "b4", CollectOptions(threads=4, expected_rows=expected)
        )
    finally:
        os.umask(previous)

    assert not first.refused and not second.refused
    assert len(first.bundles) == len(second.bundles) == 2
    assert max(bundle.size for bundle in first.bundles) > 1 << 20
    for one, two in zip(first.bundles, second.bundles, strict=True):
        assert one.bundle_id == two.bundle_id
        assert Path(one.archive).read_bytes() == Path(two.archive).read_bytes()
        assert Path(one.sidecar).read_bytes() == Path(two.sidecar).read_bytes()
        assert (os.stat(two.archive).st_mode & 0o777) == 0o644


@pytest.mark.parametrize("body_bytes", [200_000, 16_300_000])
def test_a_small_runs_body_is_the_frame_an_in_line_compressor_writes(body_bytes: int) -> None:
    # Its frame must be the one an in-line compressor writes member by member, whatever its
    # size (earlier releases kept small bodies aside up to 16 MiB for a background thread), or
    # every bundle written before would now read as replaced.
    seed, count = hashlib.sha256(b"body").digest(), 900  # a small run: under 1,000 predictions
    members = [
        (f"predictions/prediction_{index}.json", seed * (1 + index % 7) + os.urandom(size))
        for index, size in enumerate([body_bytes // count] * count)
    ]
    compressors = Compressors.of(level=3, threads=2)
    with BodyWriter(1_760_000_000, compressors, len(members)) as body:
        for name, data in members:
            body.add(name, data)
        written = io.BytesIO()
        body.copy_frame_to(written)
    reference = io.BytesIO()
    with compressors.inline.stream_writer(reference, closefd=False) as compressed:
        tar = TarStream(compressed)
        for name, data in members:
            tar.add_member(name, data, 1_760_000_000)
        tar.flush()
    assert len(members) < THREADED_BODY_PREDICTIONS
    assert written.getvalue() == reference.getvalue()


def test_a_large_runs_body_ended_aside_is_the_frame_ended_in_line() -> None:
    """end_frame_aside ends a large run's frame on a thread of its own while the manifest is
    written: the frame is the same, and a body dropped before it is copied waits for that
    thread before its file goes."""
    seed = hashlib.sha256(b"aside").digest()
    members = [
        (f"predictions/prediction_{index}.json", seed * (1 + index % 5) + os.urandom(index % 900))
        for index in range(THREADED_BODY_PREDICTIONS)
    ]
    compressors = Compressors.of(level=3, threads=2)
    frames = []
    for aside in (False, True, True):
        with BodyWriter(1_760_000_000, compressors, len(members)) as body:
            for name, data in members:
                body.add(name, data)
            if aside:
                body.end_frame_aside()
                body.end_frame_aside()  # once is enough
            written = io.BytesIO()
            body.copy_frame_to(written)
            frames.append(written.getvalue())
    assert frames[0] == frames[1] == frames[2]
    with BodyWriter(1_760_000_000, compressors, len(members)) as body:
        for name, data in members:
            body.add(name, data)
        body.end_frame_aside()
    assert zstandard.ZstdDecompressor().decompressobj().decompress(frames[0])[:11] == b"predictions"


_FULL_DISK_AT_THE_END = """
import os, resource, signal, sys
from bundler.core.errors import WriteError
from bundler.local.archive import THREADED_BODY_PREDICTIONS, BodyWriter, Compressors

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
names = [f"predictions/prediction_{i}.json" for i in range(THREADED_BODY_PREDICTIONS)]
members = [(name, os.urandom(600)) for name in names]
with BodyWriter(1_760_000_000, Compressors.of(level=3, threads=2), len(members)) as body:
    for name, data in members:
        body.add(name, data)  # one zstd job, written out only once the frame is ended
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.RLIM_INFINITY))
    body.end_frame_aside()
    try:
        body.copy_frame_to(open(os.devnull, "wb"))
    except WriteError as error:
        print(error)
"""


def test_a_write_error_ending_the_frame_aside_is_the_run_s_refusal(tmp_path: Path) -> None:
    """The temporary body cannot be written as its frame is ended on a thread of its own (a
    file size limit stands for a full disk): the error comes out where the frame is waited
    for, worded as in line, not as a thread's traceback."""
    result = subprocess.run(
        [sys.executable, "-c", _FULL_DISK_AT_THE_END],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("temporary bundle data: cannot write: "), result.stdout
    assert result.stderr == ""


def normalised_tar_info(name: str, size: int, mtime: int) -> tarfile.TarInfo:
    """The TarInfo a bundle member would have if tarfile wrote it: the reference for
    tar_header, which builds the same bytes directly."""
    info = tarfile.TarInfo(name)
    info.size = size
    info.mtime = mtime
    info.mode = 0o644
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.type = tarfile.REGTYPE
    return info


@settings(max_examples=300, deadline=None)
@given(
    st.text(min_size=1, max_size=120),
    st.integers(min_value=0, max_value=1 << 40),
    st.integers(min_value=0, max_value=1 << 36),
)
def test_fast_tar_header_is_byte_for_byte_what_tarfile_writes(
    name: str, size: int, mtime: int
) -> None:
    """Where tarfile writes a plain ustar header, tar_header writes the same bytes; where it
    would add a PAX extension header (long or non-ASCII names, large numbers), tar_header
    refuses, so no bundle ever holds one."""
    expected = normalised_tar_info(name, size, mtime).tobuf(
        tarfile.PAX_FORMAT, "utf-8", "surrogateescape"
    )
    plain = len(expected) == tarfile.BLOCKSIZE
    if plain and name.isprintable():
        assert tar_header(name, size, mtime) == expected
    else:
        with pytest.raises(ValueError, match="no plain ustar header"):
            tar_header(name, size, mtime)


def test_tar_stream_matches_tarfile_stream_mode(tmp_path: Path) -> None:
    """The hand-written stream (headers, padding, end blocks, record padding) is exactly what
    tarfile's own "w|" mode writes for the same members."""
    members = [("manifest.json", b"{}"), ("run_meta.json", b"x" * 513), ("metrics.json", b"")]
    reference = io.BytesIO()
    with tarfile.open(fileobj=reference, mode="w|", format=tarfile.PAX_FORMAT) as tar:
        for name, data in members:
            tar.addfile(normalised_tar_info(name, len(data), 7), io.BytesIO(data))
    ours = io.BytesIO()
    stream = TarStream(ours, batch=100)
    for name, data in members:
        stream.add_header(name, len(data), 7)
        stream.write(data)
        stream.end_member(len(data))
    stream.close()
    assert ours.getvalue() == reference.getvalue()


# Reading back: the mirror of the writer ------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(
    st.text(st.characters(min_codepoint=32, max_codepoint=126), min_size=1, max_size=100),
    st.integers(min_value=0, max_value=8**11 - 1),
    st.integers(min_value=0, max_value=8**11 - 1),
    st.lists(st.tuples(st.integers(0, 511), st.integers(1, 255)), max_size=3),
)
def test_parse_header_accepts_exactly_what_tar_header_writes(
    name: str, size: int, mtime: int, flips: list[tuple[int, int]]
) -> None:
    """Any block parses only if it is tar_header's own output for what it parses to."""
    block = bytearray(tar_header(name, size, mtime))
    for position, mask in flips:
        block[position] ^= mask
    try:
        parsed = parse_header(bytes(block))
    except NotCanonicalError as error:
        assert flips and error.part == "members"
        return
    assert tar_header(*parsed) == bytes(block)
    if not flips:
        assert parsed == (name, size, mtime)


def written_bundle(tmp_path: Path) -> Path:
    report, _ = build(tmp_path, [SPEC], CollectOptions(expected_rows={"expert-vqa": 12}))
    return Path(only_bundle(report).archive)


@pytest.mark.parametrize("chunk_size", [1, 7, 4096, 1 << 20])
def test_frame_reader_gives_back_the_tar_stream_whatever_the_read_size(
    tmp_path: Path, chunk_size: int
) -> None:
    archive = written_bundle(tmp_path)
    with archive.open("rb") as raw:
        frames = FrameReader(raw, chunk_size=chunk_size)
        data = b"".join(chunk for chunk in frames.chunks())
    assert data == decompress(archive)
    assert frames.windows == [2 << 20] * BUNDLE_FRAMES


def _tar_cut_in_pieces(
    members: list[tuple[str, bytes]], cuts: list[int], *, end_archive: bool
) -> tuple[bytes, list[bytes]]:
    """The tar stream TarStream writes for `members` (ended as an archive or not), and the same
    stream cut into pieces of the given sizes, the rest in a last piece."""
    stream = io.BytesIO()
    writer = TarStream(stream)
    for name, content in members:
        writer.add_member(name, content, 1781520142)
    if end_archive:
        writer.close()
    else:
        writer.flush()
    data, pieces, start = stream.getvalue(), [], 0
    for cut in [*cuts, len(data)]:
        if start < len(data):
            pieces.append(data[start : start + cut])
            start += cut
    return data, pieces


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=4000), min_size=1, max_size=30))
def test_tar_reader_reads_members_back_however_the_stream_is_cut(cuts: list[int]) -> None:
    members = [("run_meta.json", b"x" * 513), ("metrics.json", b""), ("p.json", b"{}" * 700)]
    data, pieces = _tar_cut_in_pieces(members, cuts, end_archive=True)
    body_size = sum(512 + len(data) + -len(data) % 512 for _, data in members)
    assert len(data) == body_size + end_of_archive_size(body_size)
    reader = TarReader(iter(pieces))
    read = []
    while reader.offset < body_size and (member := reader.next_member(1 << 20)) is not None:
        read.append(member)
    assert read == members and reader.mtime == 1781520142
    reader.expect_end_of_archive()


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.integers(min_value=1, max_value=5000), min_size=1, max_size=30),
    st.integers(min_value=0, max_value=2),
)
def test_tar_reader_members_read_a_frame_share_however_it_is_cut(
    cuts: list[int], oversized: int
) -> None:
    """The loop over members within a chunk and the way across chunk ends give the same
    members, and refuse a member over the limit the same way, wherever the stream is cut."""
    members = [(f"predictions/prediction_{n}.json", b"%d" % n * (300 + 400 * n)) for n in range(3)]
    data, pieces = _tar_cut_in_pieces(members, cuts, end_archive=False)
    limit = len(members[oversized][1]) - 1
    reader = TarReader(iter(pieces))
    assert list(reader.members(1 << 20)) == members
    assert reader.offset == len(data) and reader.mtime == 1781520142
    refusing = TarReader(iter(pieces))
    with pytest.raises(NotCanonicalError, match=f"more than the {limit} collect accepts"):
        for name, _ in refusing.members(limit):
            assert name != members[oversized][0]
