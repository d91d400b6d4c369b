"""One cache key per query, whatever its spelling, and the queries that need no ranking at all.

`kettle  lamp`, `the kettle lamp` and `Kettle Lamp` are one query to Postgres (`'kettl' & 'lamp'`);
keyed by their text, each missed the result cache, and a scripted client could send endless spellings
of one expensive query. Pages are keyed by the query's tsquery instead, which Postgres gives for a
round trip far cheaper than a ranking (`NORMALISE`), once per spelling (spellings are remembered).

A plain word needs no round trip: websearch_to_tsquery reads it as to_tsvector does, case aside.

A query the index cannot narrow (querytree `T`: an alternative of exclusions only, `-kettle` or
`kettle or -lamp`) matches nearly every product by a scan of them all, and `kettle -kettle` matches
none after rechecking every product with the word. Both are answered with no hits and no ranking:
search finds products by the words they have, not by the words they lack.
"""

from __future__ import annotations

import re

# A prefix per kind of key: a plain word and a tsquery's text never collide.
WORD, TSQUERY = "w:", "q:"
NOTHING = ""

_TOKEN = re.compile(r"'(?:[^']|'')*'|<[^>]*>|[()&|!]")


def word_key(word: str) -> str:
    return WORD + word.strip().lower()


def tsquery_key(tsquery: str, tree: str) -> str:
    """The page key of a normalised query, or NOTHING when it can match no product worth ranking."""
    if not tsquery or tree in ("", "T") or _contradicts_itself(tsquery):
        return NOTHING
    return TSQUERY + tsquery


def _contradicts_itself(tsquery: str) -> bool:
    """True when an `and` of terms both requires and forbids a word (`'kettl' & !'kettl'`).

    Only the plainest shape is judged: no `|` outside parentheses (`&` binds tighter, so the query is
    then an `and` of its top-level parts), a part that forbids is exactly `!'word'`, and a part that
    requires holds no `!` or `|` (a word or a phrase, each of whose words must be present).
    """
    parts: list[list[str]] = [[]]
    depth = 0
    for token in _TOKEN.findall(tsquery):
        if token == "(":
            depth += 1
        elif token == ")":
            depth -= 1
        elif depth == 0 and token == "|":
            return False
        elif depth == 0 and token == "&":
            parts.append([])
            continue
        parts[-1].append(token)
    forbidden = {part[1] for part in parts if len(part) == 2 and part[0] == "!"}
    required = {
        token for part in parts if "!" not in part and "|" not in part for token in part if token.startswith("'")
    }
    return not forbidden.isdisjoint(required)
