"""Settings of the operations layer (tracing): `settings.ops` in the tree."""

from __future__ import annotations

import ipaddress
from typing import Annotated

from pydantic import BaseModel, Field, field_validator
from pydantic_settings import NoDecode


class OpsSettings(BaseModel):
    """`settings.ops` in the tree (tenk.settings): TENK_OPS_<FIELD>."""

    otel_endpoint: str = Field(
        "",
        description="OTLP/HTTP collector base URL (e.g. http://otel-collector:4318); empty: tracing off. "
        "Needs the `otel` extra (`pip install 'tenk[otel]'`).",
    )
    otel_sample_ratio: float = Field(1.0, ge=0, le=1, description="Share of new traces recorded (parent-based).")
    otel_trusted_networks: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Comma-separated networks (CIDR) whose callers' W3C trace context (traceparent, tracestate) is "
        "continued, sampled flag included: your own services, or a proxy that sets or strips traceparent. "
        "From anyone else it is ignored and the request starts a trace of its own, sampled by the ratio "
        "(a client's sampled flag would otherwise force every request it sends to be recorded). Empty: none.",
    )

    @field_validator("otel_trusted_networks", mode="before")
    @classmethod
    def _split_networks(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("otel_trusted_networks")
    @classmethod
    def _networks_parse(cls, value: list[str]) -> list[str]:
        for network in value:
            try:
                ipaddress.ip_network(network, strict=False)
            except ValueError:
                raise ValueError(f"{network!r} is not a network (e.g. 10.0.0.0/8 or 127.0.0.1)") from None
        return value
