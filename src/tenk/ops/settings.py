"""Settings of the operations layer (tracing): `settings.ops` in the tree."""

from __future__ import annotations

from pydantic import BaseModel, Field


class OpsSettings(BaseModel):
    """`settings.ops` in the tree (tenk.settings): TENK_OPS_<FIELD>."""

    otel_endpoint: str = Field(
        "",
        description="OTLP/HTTP collector base URL (e.g. http://otel-collector:4318); empty: tracing off. "
        "Needs the `otel` extra (`pip install 'tenk[otel]'`).",
    )
    otel_sample_ratio: float = Field(1.0, ge=0, le=1, description="Share of new traces recorded (parent-based).")
