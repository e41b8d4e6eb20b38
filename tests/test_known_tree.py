"""What a session learns of a commit's tree from the Hub's answers (bundler.hub.client.known):
only what an answer said is known, and our own commit's tree is its parent's with what it
added."""

from __future__ import annotations

from bundler.hub.client.known import KEPT_COMMITS, MAX_LEARNED_ENTRIES, KnownTree, KnownTrees

SHA = "a" * 40


def test_a_paths_info_answer_says_which_paths_exist_and_nothing_of_others() -> None:
    tree = KnownTree(SHA)
    tree.learn_paths(["README.md", "bundles", "leaderboard/derived.json"], ["README.md"])
    assert tree.exists("README.md") is True
    assert tree.exists("bundles") is False
    assert tree.exists("bundles/ab/player/x.tar.zst") is False  # nothing in a missing folder
    assert tree.exists("leaderboard") is None  # its file is missing: the folder may be there
    assert tree.exists("other.txt") is None
    assert tree.entries("bundles") == 0
    assert tree.entries("") is None


def test_a_listing_names_every_entry_of_its_folder_and_recursively_of_those_below() -> None:
    tree = KnownTree(SHA)
    tree.learn_listing("", ["README.md", ".gitattributes", "bundles"])
    assert tree.entries("") == 3
    assert tree.exists("leaderboard") is False
    assert tree.exists("bundles") is True
    assert tree.exists("bundles/ab") is None  # not listed: nothing said
    tree.learn_listing("bundles", ["bundles/ab", "bundles/ab/p", "bundles/ab/p/x.tar.zst"])
    assert tree.entries("bundles") == 1 and tree.entries("bundles/ab/p") == 1
    assert tree.exists("bundles/ab/q") is False
    assert tree.exists("bundles/cd/p/y.tar.zst") is False


def test_what_is_learned_of_a_commit_is_bounded() -> None:
    tree = KnownTree(SHA)
    tree.learn_listing("big", [f"big/{n}" for n in range(MAX_LEARNED_ENTRIES + 1)])
    assert tree.entries("big") is None
    tree.learn_listing("a", [f"a/{n}" for n in range(MAX_LEARNED_ENTRIES - 1)])
    assert tree.entries("a") == MAX_LEARNED_ENTRIES - 1
    tree.learn_paths(["b", "c"], ["b"])  # no room left for both: neither is learned
    assert tree.exists("b") is None and tree.exists("c") is None
    tree.learn_listing("d", ["d/1", "d/2"])
    assert tree.entries("d") is None


def test_our_commit_adds_its_paths_and_a_new_folder_holds_exactly_them() -> None:
    tree = KnownTree(SHA)
    tree.learn_paths(["bundles", "README.md"], [])
    tree.learn_listing("", [".gitattributes"])
    after = tree.after("b" * 40, ["bundles/ab/p/x.tar.zst", "bundles/ab/p/x.json", "README.md"])
    assert after.commit == "b" * 40
    assert after.entries("") == 3  # .gitattributes, bundles, README.md
    assert after.entries("bundles") == 1 and after.entries("bundles/ab/p") == 2
    assert after.exists("bundles/ab/p/x.json") is True
    assert after.exists("bundles/cd") is False
    assert tree.exists("bundles") is False  # the parent's tree is unchanged


def test_a_folder_nothing_said_of_stays_unknown_after_our_commit() -> None:
    tree = KnownTree(SHA)
    after = tree.after("b" * 40, ["bundles/ab/p/x.tar.zst"])
    assert after.exists("bundles/ab/p/x.tar.zst") is True
    assert after.entries("bundles") is None  # it may have held other entries already
    assert after.exists("bundles/ab/p/other") is None


def test_only_commits_are_known_and_few_of_them() -> None:
    trees = KnownTrees()
    assert trees.of("main") is None
    shas = [f"{n:040x}" for n in range(KEPT_COMMITS + 1)]
    for sha in shas:
        tree = trees.of(sha)
        assert tree is not None
        tree.learn_paths(["x"], ["x"])
    first = trees.of(shas[0])
    assert first is not None and first.exists("x") is None  # forgotten
    last = trees.of(shas[-1])
    assert last is not None and last.exists("x") is True


def test_a_commit_that_deletes_or_copies_is_not_followed() -> None:
    trees = KnownTrees()
    parent = trees.of(SHA)
    assert parent is not None
    parent.learn_listing("", ["bundles"])
    trees.committed(SHA, "b" * 40, None)
    after = trees.of("b" * 40)
    assert after is not None and after.entries("") is None
    trees.committed(SHA, "c" * 40, ["README.md"])
    added = trees.of("c" * 40)
    assert added is not None and added.entries("") == 2
