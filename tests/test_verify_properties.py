"""verify, under attack by hypothesis: mutated bytes and consistently re-hashed forgeries.

For every example verify must return a verdict (never raise) within a time bound, and a bundle
it passes must be one that collect would write: the oracle unpacks it with tarfile, lays the
files out as a run directory, collects them with the inputs the manifest records, and requires
the same tar stream and the same sidecar. The oracle shares no reading code with verify.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from factory import RunSpec, write_tree
from helpers import (
    Member,
    decompress,
    forge,
    manifest_bytes,
    read_members,
    refresh_manifest,
    rewrite_sidecar,
    sidecar_path,
    with_data,
)
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from bundler.local.collect import CollectOptions, collect
from bundler.local.submitter import Submitter
from bundler.local.verify import read_bundle

TIME_BOUND_SECONDS = 10.0
SETTINGS = settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@pytest.fixture(scope="module")
def original(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small valid bundle (errors, exceptions, usage; a submitter), collected once."""
    root = tmp_path_factory.mktemp("property")
    write_tree(root / "out", [RunSpec(rows=4, thoughts_chars=60)], how_do_you=False)
    options = CollectOptions(
        expected_rows={"expert-vqa": 4}, submitter=Submitter(name="Ada", contact="ada@x.org")
    )
    report = collect(root / "out", root / "b", options)
    assert not report.refused
    return Path(report.bundles[0].archive)


@contextlib.contextmanager
def scratch() -> Iterator[Path]:
    """A fresh folder per example (a function-scoped fixture would be shared by them all)."""
    with tempfile.TemporaryDirectory(prefix="bundler-property-") as directory:
        yield Path(directory)


def copy_bundle(original: Path, into: Path) -> Path:
    """The bundle in a fresh bundles folder of its own, at the same player/target path."""
    target = into / "b" / original.parent.name / original.name
    target.parent.mkdir(parents=True)
    shutil.copyfile(original, target)
    shutil.copyfile(sidecar_path(original), sidecar_path(target))
    return target


def verdict(archive: Path) -> bool:
    """verify's verdict, which must come without an exception and in bounded time."""
    started = time.monotonic()
    reading = read_bundle(archive)
    event(f"verify passed: {reading.verification().ok}")
    assert time.monotonic() - started < TIME_BOUND_SECONDS
    return reading.verification().ok


def assert_collect_would_write(archive: Path, workdir: Path) -> None:
    """The oracle: collect, given these files and the inputs the manifest records, writes the
    same tar stream and the same sidecar (bar the compressed bytes' own digest)."""
    members = read_members(archive)
    manifest = json.loads(members[0].data)
    meta = json.loads(members[1].data)
    run = workdir / "oracle" / f"{meta['statics']['task_name']}_predictions" / "model"
    run.mkdir(parents=True)
    for member in members[1:]:
        (run / member.name.removeprefix("predictions/")).write_bytes(member.data)
    expected = manifest["coverage"]["expected_rows"]
    options = CollectOptions(
        submitter=Submitter(**manifest["submitter"]),
        expected_rows={meta["statics"]["task_name"]: expected} if expected else {},
        allow_partial=True,
        level=manifest["inputs"]["level"],
    )
    report = collect(workdir / "oracle", workdir / "oracle-bundles", options)
    assert not report.refused, report.refused
    (bundle,) = report.bundles
    again = read_members(Path(bundle.archive))
    wanted = json.loads(again[0].data)
    # Inputs that cannot be re-created here are recorded ones: they enter as documented.
    wanted["bundler_version"] = manifest["bundler_version"]
    left_out, note = manifest["inputs"]["left_out"], manifest["inputs"]["row_count_note"]
    wanted["inputs"]["left_out"], wanted["inputs"]["row_count_note"] = left_out, note
    if left_out["count"]:
        more = left_out["count"] - len(left_out["shown"])
        suffix = f" and {more} more" if more > 0 else ""
        shown = ", ".join(left_out["shown"])
        wanted["warnings"].insert(
            0, f"left out {left_out['count']} unknown file(s): {shown}{suffix}"
        )
    if note is not None:
        wanted["warnings"].insert(0, note)
    assert members[0].data == manifest_bytes(wanted)
    assert [(m.name, m.data) for m in members[1:]] == [(m.name, m.data) for m in again[1:]]
    assert tar_after_manifest(archive) == tar_after_manifest(Path(bundle.archive))
    sidecar = json.loads(sidecar_path(archive).read_bytes())
    assert sidecar["archive"]["name"] == archive.name
    claim = {key: value for key, value in wanted.items() if key != "files"}
    assert {key: value for key, value in sidecar.items() if key != "archive"} == {
        **claim,
        "files_count": len(wanted["files"]),
    }


def tar_after_manifest(archive: Path) -> bytes:
    """The tar stream after the manifest member: every other header and byte, and the end."""
    tar = decompress(archive)
    size = int(tar[124:135], 8)
    return tar[512 + size + -size % 512 :]


# (a) Mutated bytes ------------------------------------------------------------------------------

byte_mutation = st.one_of(
    st.tuples(st.just("flip"), st.integers(min_value=0), st.integers(1, 255)),
    st.tuples(st.just("insert"), st.integers(min_value=0), st.binary(min_size=1, max_size=16)),
    st.tuples(st.just("delete"), st.integers(min_value=0), st.integers(1, 64)),
)


def mutate_bytes(data: bytes, mutations: list[tuple[str, int, Any]]) -> bytes:
    buffer = bytearray(data)
    for kind, position, argument in mutations:
        at = position % (len(buffer) + 1)
        if kind == "flip" and buffer:
            buffer[at % len(buffer)] ^= argument
        elif kind == "insert":
            buffer[at:at] = argument
        elif kind == "delete":
            del buffer[at : at + argument]
    return bytes(buffer)


@SETTINGS
@given(mutations=st.lists(byte_mutation, min_size=1, max_size=4), rehash=st.booleans())
def test_mutated_bytes_never_pass_as_something_collect_did_not_write(
    original: Path, mutations: list[tuple[str, int, Any]], rehash: bool
) -> None:
    with scratch() as workdir:
        archive = copy_bundle(original, workdir)
        archive.write_bytes(mutate_bytes(original.read_bytes(), mutations))
        if rehash:  # the sidecar follows the mutated bytes, so the deeper checks decide
            rewrite_sidecar(archive)
        if verdict(archive):
            assert_collect_would_write(archive, workdir)


# (b) Consistently re-hashed forgeries -------------------------------------------------------

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=6,
)


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every place in a parsed JSON value, the value itself first."""
    yield prefix
    if isinstance(value, dict):
        for key, child in value.items():
            yield from paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from paths(child, (*prefix, index))


def nudge(value: Any, draw: st.DrawFn) -> Any:
    """A plausible change, as a forger would make it, or any other JSON value."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + draw(st.sampled_from([-1, 1, 1000]))
    if isinstance(value, str) and value:
        return draw(st.sampled_from([value.upper(), value[:-1], value + " ", ""]))
    return draw(json_values)


def mutate_json(document: Any, draw: st.DrawFn) -> Any:
    """One edit somewhere in `document`: replace a value, drop a key or an item, add a key."""
    where = draw(st.sampled_from(list(paths(document))))
    if not where:
        return nudge(document, draw)
    parent = document
    for step in where[:-1]:
        parent = parent[step]
    key = where[-1]
    action = draw(st.sampled_from(["change", "change", "drop", "add"]))
    if action == "drop":
        del parent[key]
    elif action == "add" and isinstance(parent, dict):
        parent[draw(st.text(min_size=1, max_size=6))] = draw(json_values)
    else:
        parent[key] = nudge(parent[key], draw)
    return document


@st.composite
def forgeries(draw: st.DrawFn) -> tuple[str, int, Any]:
    """What to forge: the manifest, any member (1 to 6), or a prediction's text, which the
    claim does not depend on (so such forgeries pass, and the oracle has work); the edits
    themselves are drawn when applied."""
    target = draw(st.sampled_from(["manifest", "member", "text"]))
    return target, draw(st.integers(1 if target == "member" else 3, 6)), draw(st.data())


@SETTINGS
@given(edits=st.lists(forgeries(), min_size=1, max_size=3))
def test_forgeries_with_every_digest_right_never_pass_unless_collect_writes_them(
    original: Path, edits: list[tuple[str, int, Any]]
) -> None:

    def transform(members: list[Member]) -> list[Member]:
        for target, index, data in edits:
            if target == "text":
                member = members[index]
                record = json.loads(member.data)
                if isinstance(record, dict):  # unless an edit before made it something else
                    field = data.draw(st.sampled_from(["thoughts", "output", "raw_output"]))
                    record[field] = data.draw(st.text(max_size=40))
                    members[index] = with_data(member, json.dumps(record).encode())
            elif target == "member":
                member = members[index]
                document = mutate_json(json.loads(member.data), data.draw)
                text = json.dumps(document, indent=data.draw(st.sampled_from([None, 2])))
                members[index] = with_data(member, text.encode())
        members = refresh_manifest(members)
        manifest: Any = json.loads(members[0].data)
        for target, _, data in edits:
            if target == "manifest":
                manifest = mutate_json(manifest, data.draw)
        if not isinstance(manifest, dict):
            manifest = {"files": manifest}
        members[0] = with_data(members[0], manifest_bytes(manifest))
        return members

    with scratch() as workdir:
        archive = copy_bundle(original, workdir)
        forge(archive, transform, sidecar_from_claim=True)  # re-hashed before the manifest edits
        if verdict(archive):
            assert_collect_would_write(archive, workdir)
