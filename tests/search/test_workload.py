from __future__ import annotations

import collections

from benchmarks.search_mix import render

from tenk.lab.definition.mixes import BUILTIN_DIR, load_mix
from tenk.stack.seed import COMMON_WORD, VOCABULARY, held_out_search_queries, products, search_queries


def test_the_shipped_search_mix_is_the_seeded_query_set() -> None:
    assert (BUILTIN_DIR / "search.toml").read_text() == render()
    mix = load_mix("search")
    assert list(mix.vars["query"].values) == search_queries()


def test_the_query_set_is_long_tailed_with_phrases_and_exclusions() -> None:
    queries = search_queries()
    assert len(queries) >= 10_000
    assert queries == search_queries()  # deterministic
    assert len(set(queries)) > len(queries) * 0.6
    assert sum('"' in q for q in queries) > 300
    assert sum(" -" in q for q in queries) > 300
    assert all(1 <= len(q.replace('"', "").replace(" or ", " ").split()) <= 4 for q in queries)


def test_the_catalogue_vocabulary_is_zipfian() -> None:
    assert len(set(VOCABULARY)) >= 5_000
    counts = collections.Counter(word for p in products(20_000) for word in set(p[2].lower().split()))
    ranked = [count for _, count in counts.most_common()]
    assert counts.most_common(1)[0][0] == COMMON_WORD
    assert len(counts) >= 4_000  # most words occur somewhere, rarely
    assert ranked[0] > 10 * ranked[99] > 10 * ranked[999]


def test_the_held_out_query_set_has_shapes_the_tuning_set_has_none_of() -> None:
    held_out, tuning = held_out_search_queries(), set(search_queries())
    assert held_out == held_out_search_queries()  # deterministic
    assert len(held_out) >= 10_000
    assert len(set(held_out) & tuning) < len(held_out) * 0.01
    words = [len(q.split()) for q in held_out]
    assert sum(n >= 4 for n in words) > 2_000  # the tuning set has no query of more than 3 (4 with -x) words
    vocabulary = set(VOCABULARY)
    misspelt = sum(all(w not in vocabulary for w in q.split()) for q in held_out)
    assert misspelt > 2_000  # typos and cut-short name words: in no product at all
