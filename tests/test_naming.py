"""Slugs, targets, fingerprints and bundle ids: the names that place a bundle on the board."""

from __future__ import annotations

import hashlib
import json
import os
import re
import string
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bundler.core.naming import SAFE_TASK_NAME, capability_fingerprint, slugify
from bundler.hub.repo.paths import bundle_of_path, repo_archive, repo_sidecar
from bundler.local.layout import BundleId, LayoutError
from bundler.local.schema import StaticsIdentity

PUBLISHED_CAPABILITIES = Path(
    os.environ.get("BUNDLER_PUBLISHED_CAPABILITIES", "gptnt-published-capabilities.json")
)
"""The harness's published capabilities and fingerprints, when given (else the test is skipped)."""

task_names = st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9._-]{0,40}\Z")
shas = st.text(alphabet="0123456789abcdef", min_size=40, max_size=40)
json_scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=10)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=8,
)


def reference_slug(name: str) -> str:
    """The harness's rule, written out character by character as an independent oracle."""
    out: list[str] = []
    for char in name.lower():
        if char in string.ascii_lowercase or char in string.digits:
            out.append(char)
        elif not out or out[-1] != "-":
            out.append("-")
    return "".join(out).strip("-")


def reference_fingerprint(capabilities: dict[str, Any]) -> str:
    kept = {key: value for key, value in capabilities.items() if key != "usage_limits"}
    encoded = json.dumps(kept, sort_keys=True).encode()
    return hashlib.blake2b(encoded, digest_size=16).hexdigest()


def identity(task: str = "expert-vqa", resolved: str | None = "a" * 40, **extra: Any) -> Any:
    return StaticsIdentity(
        task_name=task,
        hf_repo_id="GPTNT/expert-VQA",
        dataset_split="test",
        requested_revision=extra.get("requested", "v1.0"),
        resolved_revision=resolved,
    )


@pytest.mark.parametrize(
    ("name", "slug"),
    [
        ("gpt-5.2", "gpt-5-2"),
        ("Qwen/Qwen3.5-27B", "qwen-qwen3-5-27b"),
        ("--Claude  Sonnet__4.6--", "claude-sonnet-4-6"),
        ("internvl3-5-38b", "internvl3-5-38b"),
        ("Ünïcode model", "n-code-model"),
        ("...", ""),
    ],
)
def test_slugify_examples(name: str, slug: str) -> None:
    assert slugify(name) == slug


@settings(deadline=None)
@given(st.text(max_size=60))
def test_slugify_matches_the_harness_rule_and_is_path_safe(name: str) -> None:
    slug = slugify(name)
    assert slug == reference_slug(name)
    assert slug == "" or re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", slug)
    assert slugify(slug) == slug


@settings(deadline=None)
@given(st.dictionaries(st.text(max_size=8), json_values, max_size=6), json_values)
def test_fingerprint_is_blake2b_of_sorted_json_without_usage_limits(
    capabilities: dict[str, Any], limits: Any
) -> None:
    fingerprint = capability_fingerprint(capabilities)
    assert fingerprint == reference_fingerprint(capabilities)
    assert re.fullmatch(r"[0-9a-f]{32}", fingerprint)
    assert capability_fingerprint({**capabilities, "usage_limits": limits}) == (
        reference_fingerprint({key: v for key, v in capabilities.items() if key != "usage_limits"})
    )


def test_fingerprint_ignores_key_order_but_not_values() -> None:
    base = {"player_name": "gpt-5.2", "player_type": "ai", "vision": True}
    reordered = dict(reversed(list(base.items())))
    assert capability_fingerprint(base) == capability_fingerprint(reordered)
    assert capability_fingerprint(base) != capability_fingerprint({**base, "vision": False})
    # 1 and 1.0 serialise differently, so the harness gives them different fingerprints.
    assert capability_fingerprint({**base, "n": 1}) != capability_fingerprint({**base, "n": 1.0})


NO_PUBLISHED = "set BUNDLER_PUBLISHED_CAPABILITIES to the published capabilities file"


@pytest.mark.skipif(not PUBLISHED_CAPABILITIES.exists(), reason=NO_PUBLISHED)
def test_fingerprints_reproduce_published_submissions() -> None:
    setups = json.loads(PUBLISHED_CAPABILITIES.read_text())
    assert setups
    for setup in setups:
        assert capability_fingerprint(setup["capabilities"]) == setup["fingerprint"]


def test_identity_derived_values() -> None:
    pinned = identity(resolved="a1b2c3d4e5f60718293a4b5c6d7e8f9012345678")
    assert pinned.is_pinned
    assert pinned.revision_label == "a1b2c3d4"
    assert pinned.target == "expert-vqa@a1b2c3d4"
    unpinned = identity(resolved=None, requested="main")
    assert not unpinned.is_pinned
    assert unpinned.revision_label == "unpinned"
    assert unpinned.target == "expert-vqa@unpinned"


def test_requested_tag_never_forms_the_label() -> None:
    first = identity(resolved="1111111122222222", requested="v1.0")
    second = identity(resolved="3333333344444444", requested="v1.0-rc")
    assert "v1" not in first.target + second.target
    assert first.target != second.target


@settings(deadline=None)
@given(task_names, shas, shas)
def test_targets_are_path_safe_and_distinct_for_distinct_shas(task: str, a: str, b: str) -> None:
    first, second = identity(task, a), identity(task, b)
    for value in (first, second):
        target = value.target
        assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*@[0-9a-f]{8}", target)
        assert "/" not in target and "\0" not in target and target not in (".", "..")
        assert Path(target).name == target
    # The label is exactly the first 8 characters of the sha, so targets differ exactly when
    # those do.
    assert (first.target == second.target) == (a[:8] == b[:8])


@settings(deadline=None)
@given(task_names, st.text(min_size=1, max_size=30).filter(slugify), shas)
def test_bundle_id_shape(task: str, player: str, sha: str) -> None:
    target = identity(task, sha).target
    fingerprint = "0123456789abcdef0123456789abcdef"
    bid = BundleId.of(player, fingerprint, target)
    assert str(bid) == f"{slugify(player)}_01234567/{target}"
    assert BundleId.parse(str(bid)) == bid
    assert bid.archive_name == f"{target}.tar.zst"
    assert bid.sidecar_name == f"{target}.json"


OLD_PLAYER_DIR = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*_[0-9a-f]{8}")
"""The player folders accepted before a name without ASCII letters or digits was welcome."""
fingerprints = st.text(alphabet="0123456789abcdef", min_size=32, max_size=32)


@settings(deadline=None)
@given(st.text(max_size=40), fingerprints, task_names, shas)
def test_every_name_names_a_folder_and_names_accepted_before_keep_theirs(
    player: str, fingerprint: str, task: str, sha: str
) -> None:
    bid = BundleId.of(player, fingerprint, identity(task, sha).target)
    old = f"{reference_slug(player)}_{fingerprint[:8]}"
    if OLD_PLAYER_DIR.fullmatch(old):
        assert bid.player_dir == old  # the folder it always had
    else:  # no ASCII letter or digit: the fingerprint alone, as GPTNT's empty slug leaves it
        assert bid.player_dir == f"_{fingerprint[:8]}"
    assert BundleId.parse(str(bid)) == bid
    assert bundle_of_path(repo_archive(bid)) == bid
    assert bundle_of_path(repo_sidecar(bid)) == bid


@pytest.mark.parametrize(
    ("player", "folder"),
    [
        ("模型-β", "_0123abcd"),
        ("Größe-7B-模型", "gr-e-7b_0123abcd"),
        ("Straße-AI/Größe-7B-模型", "stra-e-ai-gr-e-7b_0123abcd"),
    ],
)
def test_unicode_player_names(player: str, folder: str) -> None:
    assert BundleId.of(player, "0123abcd" + "0" * 24, "expert-vqa@unpinned").player_dir == folder


@pytest.mark.parametrize(
    "text",
    ["__01234567/t@unpinned", "-_01234567/t@unpinned", "_0123456/t@unpinned", "_/t@unpinned"],
)
def test_an_empty_slug_opens_no_other_shape(text: str) -> None:
    with pytest.raises(LayoutError):
        BundleId.parse(text)


@settings(deadline=None)
@given(st.text(max_size=20) | st.from_regex(SAFE_TASK_NAME).map(lambda name: name + "\n"))
def test_the_schema_accepts_only_task_names_that_cannot_escape_a_path(name: str) -> None:
    try:
        accepted = identity(task=name).task_name
    except ValueError:
        return
    assert accepted == name
    assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name)
    assert not name.startswith((".", "-")) and name not in ("", ".", "..")


@settings(max_examples=50, deadline=None)
@given(
    st.sampled_from(["../x", "/etc", "a/b", ".hidden", "-flag", "", "a b", "x\n", "..", "é", "a\0"])
)
def test_unsafe_task_names_are_refused_by_the_schema(name: str) -> None:
    with pytest.raises(ValueError, match="not safe in a path"):
        identity(task=name)
