"""YAML from strangers (a dataset's eval.yaml, a model's results file, a card's header): read
by one loader that ends every way PyYAML can fail in one line.

`yaml.safe_load` alone is not enough for bytes anyone may write. It composes nested collections
recursively, so `[[[[…` a few thousand deep raises RecursionError, not a YAMLError; its
constructors raise a plain ValueError for a scalar its grammar accepts but Python cannot hold
(the date 2026-13-45); and aliases build shared or cyclic structures (`&a [*a]`, or nine
references nine levels deep: a few hundred bytes that any code walking them expands to
billions of items). None of the files read this way needs an alias, so one is refused.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.composer import ComposerError


class UnreadableYaml(ValueError):
    """The text is no YAML the bundler takes; the message says why, in one line."""


class _NoAliasLoader(yaml.SafeLoader):
    """safe_load's loader, refusing every alias (`*name`) where it composes one."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            alias = self.peek_event()  # type: ignore[no-untyped-call]
            raise ComposerError(
                None, None, "an alias (*name), which is not accepted", alias.start_mark
            )
        return super().compose_node(parent, index)


def load_untrusted_yaml(text: str | bytes) -> Any:
    """The YAML document of `text`, as `yaml.safe_load` gives it, without aliases; raises
    UnreadableYaml naming the problem (and its line, where PyYAML knows it), for the caller to
    say what the text is not."""
    try:
        decoded = text.decode("utf-8") if isinstance(text, bytes) else text
        return yaml.load(decoded, Loader=_NoAliasLoader)  # a SafeLoader, aliases refused
    except UnicodeDecodeError:
        raise UnreadableYaml("not UTF-8 text") from None
    except RecursionError:
        raise UnreadableYaml("nested too deeply") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        problem = getattr(error, "problem", None) or type(error).__name__
        raise UnreadableYaml(f"{where}{problem}") from None
    except ValueError as error:
        raise UnreadableYaml(str(error)) from None
