"""Settings of the fair share between tenants (workers/fairness.py), mixed into `Settings`."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings


class FairnessSettings(BaseSettings):
    """How many batches a tenant may have started and not yet recorded while another tenant's
    batches wait to start (0: no cap); `COGMILL_TENANT_BATCHES_IN_FLIGHT`."""

    tenant_batches_in_flight: int = Field(default=2, ge=0, le=10_000)
    # A batch over its tenant's cap goes back to its queue and is tried again after this.
    tenant_deferral_seconds: float = Field(default=0.5, gt=0, le=60)
