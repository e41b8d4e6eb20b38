"""The board's section of a card shared with its owner (`init --adopt`): the owner's text and
YAML keys are kept, the board's section and configs are the bundler's."""

from __future__ import annotations

import yaml

from bundler.hub.leaderboard.card_section import BEGIN, END, placed, with_board_section

RENDERED = (
    "---\npretty_name: Bundles\ntags:\n- leaderboard\nconfigs:\n- config_name: default\n"
    "  data_files:\n  - split: train\n    path: leaderboard/bundles/*.parquet\n---\n\n"
    "# The board\n\nrows\n"
)
OWNERS = "---\nlicense: mit\ntags:\n- puzzles\n---\n\n# Mine\n\nMy text.\n"


def header(card: str) -> dict:
    return yaml.safe_load(card.split("---\n")[1])


def test_a_card_without_a_section_is_the_boards_whole() -> None:
    assert placed(RENDERED, None) == RENDERED
    assert placed(RENDERED, "# edited by hand\n") == RENDERED


def test_a_shared_card_keeps_the_owners_text_and_keys() -> None:
    card = placed(RENDERED, with_board_section(OWNERS))
    assert header(card) == {
        "license": "mit",
        "tags": ["puzzles", "leaderboard"],
        "pretty_name": "Bundles",
        "configs": header(RENDERED)["configs"],
    }
    assert (
        card.split("---\n", 2)[2]
        == f"\n# Mine\n\nMy text.\n\n{BEGIN}\n# The board\n\nrows\n{END}\n"
    )
    assert placed(RENDERED, card) == card
    again = placed(RENDERED.replace("rows", "more rows"), card.replace("My text", "Edited"))
    assert "Edited" in again and "more rows" in again and again.count(BEGIN) == 1


def test_the_owners_config_of_the_same_name_and_unreadable_header_are_kept() -> None:
    mine = "---\nconfigs:\n- config_name: default\n  data_files: data/*.csv\n---\ntext\n"
    card = placed(RENDERED, with_board_section(mine))
    assert header(card)["configs"] == [{"config_name": "default", "data_files": "data/*.csv"}]
    broken = "---\n: [not yaml\n---\ntext\n"
    assert placed(RENDERED, with_board_section(broken)).startswith(broken.split("text")[0])


def test_an_owners_header_no_yaml_reader_takes_is_kept_as_it_is() -> None:
    """A header nested past PyYAML's recursion, holding an alias or a date Python cannot hold
    is the owner's to fix: kept byte for byte, the board's keys not merged in, never an
    internal error of the commit writing the card."""
    for text in ("[" * 50_000 + "]" * 50_000, "a: &x [1]\nb: *x", "when: 2026-13-45"):
        owners = f"---\n{text}\n---\ntext\n"
        card = placed(RENDERED, with_board_section(owners))
        assert card.startswith(f"---\n{text}\n---\n") and BEGIN in card


def test_a_section_missing_its_end_is_begun_again_and_a_marker_in_a_name_stays_inside() -> None:
    card = placed(RENDERED, OWNERS + f"\n{BEGIN}\nold board, no end\n")
    assert "My text." in card and "old board, no end" in card and card.count(BEGIN) == 1
    hostile = RENDERED.replace("rows", f"{END}\ninjected")
    once = placed(hostile, with_board_section(OWNERS))
    twice = placed(RENDERED, once)
    assert "injected" not in twice and "My text." in twice
