"""Settings of the operations layer (tracing): `settings.ops` in the tree."""

from __future__ import annotations

import ipaddress
from typing import Annotated

from pydantic import AfterValidator, BaseModel, BeforeValidator, Field
from pydantic_settings import NoDecode


def _split(value: object) -> object:
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


def _parse(value: list[str]) -> list[str]:
    for network in value:
        try:
            ipaddress.ip_network(network, strict=False)
        except ValueError:
            raise ValueError(f"{network!r} is not a network (e.g. 10.0.0.0/8 or 127.0.0.1)") from None
    return value


# A comma-separated list of networks (CIDR, or one address), each refused at start-up unless it parses.
Networks = Annotated[list[str], NoDecode, BeforeValidator(_split), AfterValidator(_parse)]


class OpsSettings(BaseModel):
    """`settings.ops` in the tree (tenk.settings): TENK_OPS_<FIELD>."""

    otel_endpoint: str = Field(
        "",
        description="OTLP/HTTP collector base URL (e.g. http://otel-collector:4318); empty: tracing off. "
        "Needs the `otel` extra (`pip install 'tenk[otel]'`).",
    )
    otel_sample_ratio: float = Field(1.0, ge=0, le=1, description="Share of new traces recorded (parent-based).")
    otel_trusted_networks: Networks = Field(
        default_factory=list,
        description="Comma-separated networks (CIDR) whose callers' W3C trace context (traceparent, tracestate) is "
        "continued, sampled flag included: your own services, or a proxy that sets or strips traceparent. "
        "From anyone else it is ignored and the request starts a trace of its own, sampled by the ratio "
        "(a client's sampled flag would otherwise force every request it sends to be recorded). The caller is "
        "the client as TENK_TRUSTED_PROXIES resolves it: through a proxy listed there, the client it forwards "
        "for, never the proxy. Empty: none.",
    )
