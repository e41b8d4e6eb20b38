"""What a branch holds at the paths its read asks about, with the top folder listed first where
the branch has no card.

A commit of the board writes README.md, `bundles/` and `leaderboard/` at the top of the
repository, so a branch without a card is one whose next commit adds README.md to the top
folder, and the Hub's limit of entries a folder may hold (bundler.hub.client.limits) then needs
that folder's listing, which no answer about a path gives. On such a branch the listing is made
first (one request per 1,000 entries, not expanded), and it is what the session knows of the
commit's tree (bundler.hub.client.known): the limits check does not list the folder again. A
path whose top-level name the folder does not hold is not there, nor anything below it: only
the paths under a name it does hold are asked of the Hub (expanded, as the read needs the last
commit of `bundles/` and `leaderboard/`), and none for a new repository. Only the order of the
requests changes; what the read learns is the same. So an upload into a new repository asks no
paths-info, and its limits check no listing.

Whether the branch has a card is what the upload's lookup of its branch says
(bundler.hub.client.exists, `HubSession.no_card`): the Hub's `cardData` is the card's YAML
header, absent without a README.md. Any other read, and any branch whose card has metadata,
asks as before. A card that has no metadata may be answered without `cardData` (the Hub does
not document which): such a branch is read with the listing first, and when its commit adds
nothing to the top folder, pays that one request more.
"""

from __future__ import annotations

from bundler.hub.client.remote import RemoteEntry
from bundler.hub.client.session import HubSession


def top_entries(session: HubSession, paths: list[str], head: str) -> dict[str, RemoteEntry]:
    """The files and folders at `paths` on the commit `head`, each with the last commit that
    changed it (`HubSession.entries`), the top folder listed first where the branch has no
    card (see the module docstring)."""
    if head not in session.no_card:
        return session.entries(paths, head)
    listed = session.list_folder("", head)
    asked = [path for path in paths if path.split("/")[0] in listed]
    return session.entries(asked, head) if asked else {}
