"""The base of every pydantic model the bundler defines.

Schemas are built when a model is first used, not when its module is imported
(`defer_build`): a command loads the models of every stage it might touch, and building them
all up front was a large part of the start-up of a command that has little to do.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Model(BaseModel):
    model_config = ConfigDict(defer_build=True)
