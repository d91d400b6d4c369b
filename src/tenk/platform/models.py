"""Shared building blocks for request models."""

from __future__ import annotations

from typing import Annotated, Any, Self

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator


def _storable(value: str) -> str:
    if "\x00" in value:
        raise ValueError("must not contain the NUL character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("must be valid Unicode text") from None
    return value


# A `str` that Postgres can store: no NUL characters, no lone surrogates.
PgText = Annotated[str, AfterValidator(_storable)]


class PatchModel(BaseModel):
    """A partial update: fields left out keep their value; at least one must be sent, none as null."""

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="after")
    def _sets_something(self) -> Self:
        if not self.model_fields_set:
            raise ValueError("a patch must set at least one field")
        for name in self.model_fields_set:
            if getattr(self, name) is None:
                raise ValueError(f"{name} cannot be null")
        return self


class FieldProblem(BaseModel):
    field: str = Field(description='Where: "path.product_id", "query.limit", "body.sku", "header.authorization".')
    message: str


class ErrorDetail(BaseModel):
    code: str = Field(description='Machine-readable: "not_found", "validation_error", "unavailable", ...')
    message: str
    fields: list[FieldProblem] | None = Field(None, description="The fields at fault, when there are any.")


class ErrorBody(BaseModel):
    """Every error answer, from either lane (see tenk.platform.errors)."""

    error: ErrorDetail


# The errors any route may answer; routes add their own (404, 409, ...) with `errors_documented`.
COMMON_ERRORS = {
    400: "A path that holds a control character, or a client gone before its body arrived",
    401: "No API key where one is needed",
    403: "API key not accepted",
    413: "Request body too large",
    422: "Invalid input: every field at fault is named",
    503: "A dependency is unavailable or the service is overloaded; see Retry-After",
}


def errors_documented(descriptions: dict[int, str]) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` for error statuses, each with the shared error body's schema."""
    return {status: {"model": ErrorBody, "description": text} for status, text in descriptions.items()}
