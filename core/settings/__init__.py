"""All configuration, read once from `COGMILL_*` environment variables (or a `.env` file).

The mode follows from the settings alone: with no broker, Neo4j or Qdrant URL everything is
embedded under `COGMILL_HOME`. The fields are grouped in the modules of this package, one
class each; docs/configuration.md lists them in this order (tools/configuration_doc.py).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from core.settings.api import ApiSettings
from core.settings.deployment import DeploymentSettings
from core.settings.ingestion import IngestionSettings
from core.settings.retrieval import RetrievalSettings


class Settings(DeploymentSettings, IngestionSettings, RetrievalSettings, ApiSettings, BaseSettings):
    """cogmill settings; every field maps to `COGMILL_<FIELD>`."""

    model_config = SettingsConfigDict(env_prefix="COGMILL_", env_file=".env", extra="ignore")

    @field_validator("home")
    @classmethod
    def _absolute_home(cls, value: Path) -> Path:
        return value.expanduser().resolve()

    @model_validator(mode="after")
    def _consistent(self) -> Settings:
        """chunk_overlap_tokens must be below chunk_tokens; task_soft_time_limit_seconds below
        task_time_limit_seconds, and that below visibility_timeout_seconds (or tasks run twice)."""
        if self.chunk_overlap_tokens >= self.chunk_tokens:
            raise ValueError(
                f"chunk_overlap_tokens ({self.chunk_overlap_tokens}) must be below chunk_tokens "
                f"({self.chunk_tokens})"
            )
        if self.visibility_timeout_seconds <= self.task_time_limit_seconds:
            raise ValueError(
                f"visibility_timeout_seconds ({self.visibility_timeout_seconds}) must be above "
                f"task_time_limit_seconds ({self.task_time_limit_seconds}), or a running task "
                "is delivered again to another worker"
            )
        if self.task_soft_time_limit_seconds >= self.task_time_limit_seconds:
            raise ValueError("task_soft_time_limit_seconds must be below task_time_limit_seconds")
        return self

    @property
    def embedded_broker(self) -> bool:
        return self.broker_url.startswith("memory://")
