"""Deterministic demo data: the same products and tasks on every machine, for benchmarks that compare."""

from __future__ import annotations

import hashlib
import itertools
import random
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import asyncpg

from tenk.stack.migrate import bundled_migrations

_ADJECTIVES = [
    "compact",
    "rugged",
    "wireless",
    "ergonomic",
    "stainless",
    "vintage",
    "modular",
    "portable",
    "silent",
    "smart",
    "waterproof",
    "foldable",
    "organic",
    "bamboo",
    "carbon",
    "titanium",
    "ceramic",
    "insulated",
    "magnetic",
    "solar",
    "cordless",
    "adjustable",
    "heavy",
    "light",
    "premium",
    "classic",
    "digital",
    "analog",
    "acoustic",
    "thermal",
    "electric",
    "manual",
    "hybrid",
    "industrial",
    "miniature",
    "giant",
    "slim",
]
_NOUNS = [
    "kettle",
    "lamp",
    "backpack",
    "keyboard",
    "mouse",
    "headphones",
    "speaker",
    "blender",
    "drill",
    "ladder",
    "tent",
    "jacket",
    "boots",
    "watch",
    "camera",
    "tripod",
    "router",
    "monitor",
    "desk",
    "chair",
    "mug",
    "bottle",
    "grinder",
    "toaster",
    "fan",
    "heater",
    "cable",
    "charger",
    "battery",
    "notebook",
    "pen",
    "stapler",
    "scissors",
    "wrench",
    "hammer",
    "saw",
    "sander",
    "knife",
    "pan",
    "skillet",
    "wok",
    "shelf",
    "rack",
    "bench",
    "cushion",
    "blanket",
    "pillow",
    "rug",
    "mat",
    "mirror",
    "clock",
    "radio",
    "projector",
    "microphone",
    "guitar",
    "violin",
    "drum",
    "piano",
]
_TASK_VERBS = [
    "write",
    "review",
    "fix",
    "deploy",
    "test",
    "plan",
    "design",
    "refactor",
    "document",
    "measure",
    "ship",
    "archive",
]
_TASK_OBJECTS = [
    "report",
    "invoice",
    "migration",
    "dashboard",
    "release",
    "budget",
    "roadmap",
    "benchmark",
    "incident",
    "backlog",
]


# Zipf-Mandelbrot word frequencies, p(rank) ∝ 1 / (rank + q)^s: a few words are everywhere, most are rare,
# the shape that catalogue text and search logs both follow. The offset q flattens the head so that the
# commonest word is in about a quarter of the products rather than nearly all of them.
_ZIPF_S = 1.0
_ZIPF_Q = 2.7
VOCABULARY_SIZE = 6_000
_NAME_WORDS = 3
_DESCRIPTION_WORDS = 6
_CONSONANTS = "bdfgklmnprstvz"
_VOWELS = "aiou"  # no trailing e or y: the English stemmer would fold some of those words together


def _synthetic_words(count: int, taken: set[str], rng: random.Random) -> list[str]:
    words: list[str] = []
    while len(words) < count:
        word = "".join(rng.choice(_CONSONANTS) + rng.choice(_VOWELS) for _ in range(rng.randint(2, 4)))
        if word not in taken:
            taken.add(word)
            words.append(word)
    return words


def _vocabulary() -> list[str]:
    """Words by descending frequency: the readable demo words first ("kettle" is the commonest), then made-up ones."""
    head = [word for pair in zip(_NOUNS, _ADJECTIVES, strict=False) for word in pair]
    head += _NOUNS[len(_ADJECTIVES) :]
    return head + _synthetic_words(VOCABULARY_SIZE - len(head), set(head), random.Random(1013))


VOCABULARY = _vocabulary()
COMMON_WORD = VOCABULARY[0]
_CUMULATIVE = list(itertools.accumulate(1 / (rank + _ZIPF_Q) ** _ZIPF_S for rank in range(1, VOCABULARY_SIZE + 1)))


def zipf_words(rng: random.Random, count: int) -> list[str]:
    return rng.choices(VOCABULARY, cum_weights=_CUMULATIVE, k=count)


def products(count: int, seed: int = 42) -> Iterator[tuple[int, str, str, str, int, int]]:
    rng = random.Random(seed)
    for product_id in range(1, count + 1):
        words = zipf_words(rng, _NAME_WORDS + _DESCRIPTION_WORDS)
        name = " ".join(words[:_NAME_WORDS])
        description = f"A {name}, {' '.join(words[_NAME_WORDS:])}. Model {rng.randrange(100, 999)}."
        yield (
            product_id,
            f"SKU-{product_id:08d}",
            name.title(),
            description,
            rng.randrange(99, 99_999),
            rng.randrange(500),
        )


def search_queries(count: int = 10_000, seed: int = 13) -> list[str]:
    """Queries the way people type them, in `websearch_to_tsquery` syntax: mostly one to three words drawn
    with the catalogue's own word frequencies (so most are rare), some "quoted phrases", some -exclusions
    and a few `or`s. The same list on every machine."""
    rng = random.Random(seed)
    queries = []
    for _ in range(count):
        words = zipf_words(rng, rng.choices((1, 2, 3), weights=(45, 35, 20))[0])
        shape = rng.random()
        if len(words) > 1 and shape < 0.12:
            query = f'"{" ".join(words)}"'
        elif len(words) > 1 and shape < 0.16:
            query = " or ".join(words)
        else:
            query = " ".join(words)
        if rng.random() < 0.08:
            query += f" -{zipf_words(rng, 1)[0]}"
        queries.append(query)
    return queries


# Where the tail of the vocabulary starts for held-out queries' rare-word pairs: words past the 500th
# are each in well under 0.1 % of the products.
_RARE_FROM_RANK = 500


def held_out_search_queries(count: int = 10_000, seed: int = 8191) -> list[str]:
    """A second query set, never used while tuning search: drawn from another seed and in shapes the tuning
    set has none of, so a figure measured on both says whether the tuning generalises. A quarter each:
    four to six Zipf words; two rare words; a Zipf word or two with one letter dropped, doubled or swapped
    (a typo); the first words of a product's name with the last one cut short (typing in progress)."""
    rng = random.Random(seed)
    names = [name.lower().split() for _, _, name, *_ in products(2_000, seed=seed)]
    rare = VOCABULARY[_RARE_FROM_RANK:]
    queries = []
    for _ in range(count):
        shape = rng.randrange(4)
        if shape == 0:
            query = " ".join(zipf_words(rng, rng.randint(4, 6)))
        elif shape == 1:
            query = " ".join(rng.sample(rare, 2))
        elif shape == 2:
            query = " ".join(_typo(rng, word) for word in zipf_words(rng, rng.randint(1, 2)))
        else:
            name = rng.choice(names)
            kept = rng.randint(1, len(name))
            last = name[kept - 1]
            query = " ".join([*name[: kept - 1], last[: rng.randint(2, max(2, len(last) - 1))]])
        queries.append(query)
    return queries


def _typo(rng: random.Random, word: str) -> str:
    at = rng.randrange(len(word) - 1)
    edit = rng.randrange(3)
    if edit == 0:
        return word[:at] + word[at + 1 :]
    if edit == 1:
        return word[: at + 1] + word[at] + word[at + 1 :]
    return word[:at] + word[at + 1] + word[at] + word[at + 2 :]


def tasks(count: int, seed: int = 7) -> Iterator[tuple[str, str, bool]]:
    rng = random.Random(seed)
    for number in range(1, count + 1):
        yield f"{rng.choice(_TASK_VERBS)} the {rng.choice(_TASK_OBJECTS)} #{number}", "", rng.random() < 0.3


# Indexes a bulk load into an empty table builds once at the end instead of maintaining row by row.
_SEARCH_INDEXES = ("products_search_idx", "search_postings_rank_idx")
_POST_ALL_PRODUCTS = """
INSERT INTO search_postings (lexeme, score, product_id)
SELECT scored.lexeme, scored.score, products.id FROM products, search_postings_of(products.search) AS scored
"""


@asynccontextmanager
async def _search_indexes_built_after(conn: asyncpg.Connection) -> AsyncIterator[None]:
    """Inside a transaction: load products with the search indexes and the postings trigger off, then post
    every product in one statement and build the indexes from their own definitions (migrations 0001, 0005).
    Sorting once is several times faster than inserting ~14 postings per product into a B-tree and a GIN."""
    definitions = [await conn.fetchval("SELECT pg_get_indexdef($1::regclass)", name) for name in _SEARCH_INDEXES]
    await conn.execute("ALTER TABLE products DISABLE TRIGGER products_search_postings_insert")
    for name in _SEARCH_INDEXES:
        await conn.execute(f"DROP INDEX {name}")
    yield
    await conn.execute("SET LOCAL maintenance_work_mem = '256MB'")
    await conn.execute(_POST_ALL_PRODUCTS)
    for definition in definitions:
        await conn.execute(definition)
    await conn.execute("ALTER TABLE products ENABLE TRIGGER products_search_postings_insert")


@asynccontextmanager
async def _no_invalidations_recorded(conn: asyncpg.Connection) -> AsyncIterator[None]:
    """Inside a transaction, loading an empty catalogue: no outbox record per product (migration 0003).

    A product that did not exist has no cached copy but "no such product", which lasts
    TENK_CATALOG_NEGATIVE_TTL_S (2 s). A million records, by contrast, kept every API process that
    started after `tenk up --products 1000000` busy for minutes delivering invalidations nobody needed,
    and skewed every benchmark run in that time (8572930's message has the figure)."""
    await conn.execute("ALTER TABLE products DISABLE TRIGGER products_record_invalidation")
    yield
    await conn.execute("ALTER TABLE products ENABLE TRIGGER products_record_invalidation")


async def seed(dsn: str, product_count: int, task_count: int) -> dict[str, int]:
    """Fill empty tables; tables that already hold rows are left alone, so this is safe to repeat."""
    conn = await asyncpg.connect(dsn)
    written = {"products": 0, "tasks": 0}
    try:
        async with conn.transaction():
            if product_count and not await conn.fetchval("SELECT EXISTS (SELECT 1 FROM products)"):
                async with _search_indexes_built_after(conn), _no_invalidations_recorded(conn):
                    await conn.copy_records_to_table(
                        "products",
                        records=products(product_count),
                        columns=["id", "sku", "name", "description", "price_cents", "stock"],
                    )
                # Ids were supplied explicitly; move the identity past them.
                await conn.execute("SELECT setval(pg_get_serial_sequence('products', 'id'), $1)", product_count)
                written["products"] = product_count
            if task_count and not await conn.fetchval("SELECT EXISTS (SELECT 1 FROM tasks)"):
                await conn.copy_records_to_table("tasks", records=tasks(task_count), columns=["title", "notes", "done"])
                written["tasks"] = task_count
        # VACUUM, not only ANALYZE: it moves the bulk-loaded rows out of the GIN pending list and marks the
        # search postings all-visible, so the first searches read indexes instead of heap pages.
        for table in ("products", "search_postings", "tasks"):
            await conn.execute(f"VACUUM ANALYZE {table}")
    finally:
        await conn.close()
    return written


def fingerprint(product_count: int, task_count: int) -> str:
    """What a database holds once migrated and then seeded with these counts, as a digest of what decides
    it: every bundled migration, this module's code and the counts. Two databases filled so hold the same
    rows but for their timestamps; a change to any of these changes the digest (`tenk.stack.seeded_copy`
    remakes its template then)."""
    digest = hashlib.sha256()
    for migration in bundled_migrations():
        digest.update(f"{migration.name}\0{migration.sql}\0".encode())
    digest.update(Path(__file__).read_bytes())
    digest.update(f"\0{product_count}\0{task_count}".encode())
    return digest.hexdigest()
