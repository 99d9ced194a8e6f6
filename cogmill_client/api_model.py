"""The base of every model the client reads or sends."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class ApiModel(BaseModel):
    """Base of every body: fields the server adds later are ignored, not an error."""

    model_config = ConfigDict(extra="ignore")
