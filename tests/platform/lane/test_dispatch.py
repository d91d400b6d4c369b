"""The lane's own query-string split gives exactly the pairs Starlette's (parse_qsl) gives."""

from __future__ import annotations

from urllib.parse import parse_qsl

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tenk.platform.lane.dispatch import query_pairs


@pytest.mark.parametrize(
    "query",
    ["", "a=13&b=42", "a=1&&b=2", "&a=1&", "a", "a=&b", "=1", "a==1", "a=1;b=2", "q=x%20y", "q=x+y", "a=%", "m=1&m=2"],
)
def test_query_pairs_are_parse_qsl_s_for_the_shapes_requests_take(query: str) -> None:
    assert query_pairs(query) == parse_qsl(query, keep_blank_values=True)


@given(st.text(alphabet="ab1=&;%+2F ", max_size=24))
def test_query_pairs_are_parse_qsl_s_for_any_query(query: str) -> None:
    assert query_pairs(query) == parse_qsl(query, keep_blank_values=True)
