"""The base of every pydantic model the bundler defines.

Schemas are built when a model is first used, not when its module is imported
(`defer_build`): a command loads the models of every stage it might touch, and building them
all up front was a large part of the start-up of a command that has little to do.

`model_name` is a field of the GPTNT format, not ours to rename. pydantic before 2.10 warned at
every start about any field beginning with `model_` (its protected namespace); the warning is
not the user's to act on, so no namespace is protected (pydantic's own methods still win).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from bundler.core.errors import Remedy


class Model(BaseModel):
    model_config = ConfigDict(defer_build=True, protected_namespaces=())


def _absent(value: object) -> bool:
    return value is None


RemedyField = Annotated[Remedy | None, Field(exclude_if=_absent)]
"""What the person can do about a report's entry (a held-back bundle, a refused run, a check's
warning), named for the command line to word (bundler.core.errors.Remedy); in the entry's JSON
only when there is one, as most entries have none."""
