"""Coverage from the Hub: how many rows a pinned dataset split has, for `collect --resolve-rows`.

Best effort by design: the row count comes from the dataset card's `dataset_info` splits at the
resolved revision. When the Hub is unreachable, the run is unpinned, or the card does not say,
the count stays unknown and the run's coverage is `unknown`, with a warning saying why; a run is
never called complete on a guess. Anyone can write a dataset's card: it is read by the JSON
parser alone (`HubSession.card_data`), and only `dataset_info`'s count is taken from it.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from bundler.core.errors import BundlerError, HubError
from bundler.core.limits import INT64_MAX, MAX_CARD_BYTES
from bundler.hub.client.session import REPO_TYPE, HubSession
from bundler.local.schema import StaticsIdentity


class RowCountResolver:
    """Looks up row counts, once per (dataset, revision, split, with the token or not)."""

    def __init__(self, token: str | None = None) -> None:
        self._token = token
        self._cache: dict[tuple[str, str, str | None, bool], tuple[int | None, str | None]] = {}

    def rows(
        self, identity: StaticsIdentity, *, authenticated: bool = True
    ) -> tuple[int | None, str | None]:
        """The split's row count, or None with the reason as a warning. Unless
        `authenticated`, the token is not sent: review asks a dataset a stranger named
        anonymously, so a maintainer's token only ever reaches the datasets the task
        definitions name."""
        if identity.resolved_revision is None:
            return None, "row count not resolved: the dataset revision is unpinned"
        key = (
            identity.hf_repo_id,
            identity.resolved_revision,
            identity.dataset_split,
            authenticated,
        )
        if key not in self._cache:
            self._cache[key] = self._lookup(identity, identity.resolved_revision, authenticated)
        return self._cache[key]

    def _lookup(
        self, identity: StaticsIdentity, revision: str, authenticated: bool
    ) -> tuple[int | None, str | None]:
        where = f"{identity.hf_repo_id}@{revision[:8]}"
        token: str | bool | None = self._token if authenticated else False
        try:
            session = HubSession(identity.hf_repo_id, token=token, owned=False)
            card = card_data(session, revision)
        except BundlerError as error:
            return None, f"row count not resolved: {error.message}"
        info = card.get("dataset_info") if isinstance(card, dict) else None
        count = split_rows(info, identity.dataset_split)
        if count is None:
            split = identity.dataset_split or "(no split named)"
            return None, f"row count not resolved: {where}'s card gives no row count for {split}"
        return count, None


def card_data(session: HubSession, revision: str) -> object:
    """The dataset card's metadata at `revision` (`cardData`; not every file's name), read by
    the JSON parser alone: the client's own card model raises on metadata anyone can write (a
    key named like one of its arguments), so a stranger's card never reaches it."""
    where = f"{session.repo_id}@{revision[:8]}"
    at = quote(revision, safe="")
    url = f"{session.api.endpoint}/api/{REPO_TYPE}s/{session.repo_id}/revision/{at}"
    data = session.read_url(f"reading {where}", f"{url}?expand=cardData", where, MAX_CARD_BYTES)
    try:
        info = json.loads(data)
    except (ValueError, RecursionError):
        raise HubError(f"{where}: the Hub's answer is not JSON") from None
    return info.get("cardData") if isinstance(info, dict) else None


def split_rows(dataset_info: Any, split: str | None) -> int | None:
    """`num_examples` of `split` in a card's dataset_info (one config, or a list of configs of
    which `default` or the only one is used)."""
    if isinstance(dataset_info, list):
        configs = [c for c in dataset_info if isinstance(c, dict)]
        chosen = [c for c in configs if c.get("config_name") == "default"] or configs
        if len(chosen) != 1:
            return None
        dataset_info = chosen[0]
    if not isinstance(dataset_info, dict):
        return None
    splits = [s for s in dataset_info.get("splits") or [] if isinstance(s, dict)]
    if split is None and len(splits) == 1:
        matches = splits
    else:
        matches = [s for s in splits if s.get("name") == split]
    if len(matches) != 1:
        return None
    count = matches[0].get("num_examples")
    # A count beyond int64 would make the whole viewer table unloadable (its column is int64).
    plausible = isinstance(count, int) and not isinstance(count, bool) and 0 <= count <= INT64_MAX
    return count if plausible else None
