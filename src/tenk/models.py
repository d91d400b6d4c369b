"""Shared building blocks for request models."""

from __future__ import annotations

from typing import Annotated, Self

from pydantic import AfterValidator, BaseModel, ConfigDict, model_validator


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
