"""The one shape of a report's error: `error` (what went wrong), `hint` (what to do) and
`error_kind` (what a `--json` reader acts on rather than the words), always set together.

Three reports carry it (collect's, upload's and sync's), each from an error that ended the
command, from the causes that make it exit 1 (bundler.core.causes), or, for a sync, from its
upload's report. Set field by field in each place, the three could drift apart; here they are
taken from what said them in one place. The fields stay declared on each report, where its
JSON places them and with its own words on when they are set: a base model's fields would come
first in every report.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bundler.core.causes import Cause
from bundler.core.errors import BundlerError


class ErrorShape:
    """Mixed into a report model that declares `error`, `hint` and `error_kind`."""

    if TYPE_CHECKING:
        error: str | None
        hint: str | None
        error_kind: str | None

    def say(self, said: BundlerError | Cause | ErrorShape) -> None:
        """Take the three from `said`: an error's message, hint and kind; a cause's line, hint
        and kind; or another report's three as they stand."""
        if isinstance(said, BundlerError):
            self.error, self.hint, self.error_kind = said.message, said.hint, said.kind
        elif isinstance(said, Cause):
            self.error, self.hint, self.error_kind = said.what, said.hint, said.kind
        else:
            self.error, self.hint, self.error_kind = said.error, said.hint, said.error_kind
