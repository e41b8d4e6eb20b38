"""The board's section of a dataset card that is its owner's too (`bundler init --adopt`).

A leaderboard started on an empty repository owns its whole card: every commit writes it again
from the bundles, and edits are replaced. A leaderboard started on a repository that already
had a card (`init --adopt`) owns only the part between two marker comments, which init appends
to the card it found; the rest of the card (the owner's text, licence and YAML keys) is theirs,
and no commit writes over it. Which kind a card is, is read from the card itself: its markers.

The YAML header is shared: the owner's keys are kept as they are, the bundler's configs (those
whose files are all the bundler's, under `leaderboard/`) are replaced by the ones it writes now
(but for a name the owner's configs take), its tags are added to the owner's, and a key the
owner's header lacks is added. Where the owner's header is not a YAML mapping, it is kept as it
is (the Hub may then refuse the card, which the commit reports; the bundles are committed
without it).

The section is found by the first begin marker and the last end marker, so that a name in a
board that spells a marker stays inside the section.
"""

from __future__ import annotations

from typing import Any

import yaml
from huggingface_hub.repocard import REGEX_YAML_BLOCK

from bundler.core.yamltext import UnreadableYaml, load_untrusted_yaml
from bundler.hub.repo.paths import TABLES_DIR

BEGIN = "<!-- statics-bundler board: begin (written from the bundles; edits here are replaced) -->"
END = "<!-- statics-bundler board: end -->"
BUNDLER_CONFIG_PREFIX = f"{TABLES_DIR}/"


def has_section(card: str) -> bool:
    """Whether `card` is shared: it holds the board's begin marker."""
    return BEGIN in card


def with_board_section(card: str) -> str:
    """`card` with an empty board section appended, for the next rendering to fill."""
    return f"{card.rstrip()}\n\n{BEGIN}\n{END}\n"


def placed(rendered: str, existing: str | None) -> str:
    """The card to commit: `rendered` whole where the branch's card has no board section
    (the board owns it), else the branch's card with its section holding `rendered`'s body and
    its header merged with `rendered`'s. A section whose end marker was removed is begun
    again at the end, the lone marker taken out, so that no text of the owner's is in it."""
    if existing is None or not has_section(existing):
        return rendered
    header, body = _split(existing)
    start, end = body.find(BEGIN), body.rfind(END)
    if end < start:
        body = with_board_section(body.replace(BEGIN, "").replace(END, ""))
        start, end = body.rfind(BEGIN), body.rfind(END)
    ours, board = _split(rendered)
    section = f"{BEGIN}\n{board.strip()}\n"
    return _merged_header(header, ours[1] if ours else None) + body[:start] + section + body[end:]


def _split(card: str) -> tuple[tuple[str, str] | None, str]:
    """A card's YAML header (the whole `---` block, and the YAML in it; None: it has none)
    and the rest."""
    found = REGEX_YAML_BLOCK.search(card)
    if found is None:
        return None, card
    return (found.group(0), found.group(2)), card[found.end() :]


def _merged_header(theirs: tuple[str, str] | None, ours: str | None) -> str:
    """The `---` header block of a shared card (see the module docstring): the owner's bytes
    where the merge changes nothing in it."""
    if theirs is None:
        return f"---\n{ours or ''}\n---\n"
    block, text = theirs
    try:
        kept = load_untrusted_yaml(text)
    except UnreadableYaml:
        kept = None
    if ours is None or not isinstance(kept, dict):
        return block
    merged: dict[str, Any] = dict(kept)
    for key, value in (yaml.safe_load(ours) or {}).items():
        if key == "configs":
            owners = [c for c in merged.get("configs") or [] if not _bundlers(c)]
            taken = {c.get("config_name") for c in owners if isinstance(c, dict)}
            merged["configs"] = owners + [c for c in value if c["config_name"] not in taken]
        elif key == "tags" and isinstance(merged.get("tags"), list):
            merged["tags"] = list(dict.fromkeys([*merged["tags"], *value]))
        else:
            merged.setdefault(key, value)
    if merged == kept:
        return block
    dumped = yaml.safe_dump(merged, sort_keys=False, allow_unicode=True).rstrip()
    return f"---\n{dumped}\n---\n"


def _bundlers(config: object) -> bool:
    """Whether a config of the header is the bundler's: all its files under `leaderboard/`."""
    if not isinstance(config, dict):
        return False
    files = config.get("data_files")
    entries = files if isinstance(files, list) else [files]
    paths = [e.get("path") if isinstance(e, dict) else e for e in entries]
    flat = [p for path in paths for p in (path if isinstance(path, list) else [path])]
    return bool(flat) and all(
        isinstance(p, str) and p.startswith(BUNDLER_CONFIG_PREFIX) for p in flat
    )
