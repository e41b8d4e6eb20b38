"""The base of every pydantic model the bundler defines.

Schemas are built when a model is first used, not when its module is imported
(`defer_build`): a command loads the models of every stage it might touch, and building them
all up front was a large part of the start-up of a command that has little to do.

`model_name` is a field of the GPTNT format, not ours to rename. pydantic before 2.10 warned at
every start about any field beginning with `model_` (its protected namespace); the warning is
not the user's to act on, so no namespace is protected (pydantic's own methods still win).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Model(BaseModel):
    model_config = ConfigDict(defer_build=True, protected_namespaces=())
