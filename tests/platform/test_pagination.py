"""Cursor signing: never a constant secret, and nothing a cursor holds reaches Postgres unchecked."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from pydantic import ValidationError

from tenk.app import create_app
from tenk.ops.api_keys import digest
from tenk.platform.errors import InvalidInputError
from tenk.platform.pagination import SECRET_FILE, CursorSecretMissingError, cursor_codec, cursor_secret
from tenk.settings import Settings


def test_a_deployment_without_a_cursor_secret_refuses_to_start(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="TENK_CURSOR_SECRET"):
        Settings(api_keys=[digest("tk_x")], data_dir=tmp_path)
    # A tree copied with an update skips validation: the app still refuses to invent a secret.
    unchecked = Settings(data_dir=tmp_path).model_copy(update={"api_keys": [digest("tk_x")]})
    with pytest.raises(CursorSecretMissingError, match="TENK_CURSOR_SECRET"):
        create_app(unchecked)
    assert not (tmp_path / SECRET_FILE).exists()


def test_without_the_dev_fallback_an_empty_key_list_then_a_missing_cursor_secret_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="TENK_API_KEYS is empty"):
        Settings(dev_fallback=False, data_dir=tmp_path)
    with pytest.raises(ValidationError, match="TENK_CURSOR_SECRET"):
        Settings(dev_fallback=False, api_keys=[digest("tk_x")], data_dir=tmp_path)
    given = Settings(dev_fallback=False, api_keys=[digest("tk_x")], cursor_secret="s3cret", data_dir=tmp_path)
    assert cursor_secret(given) == "s3cret"


def test_development_generates_one_private_secret_per_install(tmp_path: Path) -> None:
    first = cursor_secret(Settings(data_dir=tmp_path))
    assert len(first) >= 32
    assert cursor_secret(Settings(data_dir=tmp_path)) == first
    assert stat.S_IMODE((tmp_path / SECRET_FILE).stat().st_mode) == 0o600
    assert cursor_secret(Settings(data_dir=tmp_path / "other")) != first
    assert Settings().cursor_secret == ""


def test_an_explicit_secret_wins(tmp_path: Path) -> None:
    assert cursor_secret(Settings(data_dir=tmp_path, cursor_secret="s3cret")) == "s3cret"
    assert not (tmp_path / SECRET_FILE).exists()


@pytest.mark.parametrize("position", [[2**63], [2**64 - 1], [True], ["5"], [1, 2]])
def test_a_signed_cursor_of_the_wrong_shape_or_range_is_invalid_input(position: list[object]) -> None:
    codec = cursor_codec("s", "tasks")
    with pytest.raises(InvalidInputError):
        codec.decode(codec.encode(position), shape=(int,))
