"""Deterministic demo data: the same products and tasks on every machine, for benchmarks that compare."""

from __future__ import annotations

import random
from collections.abc import Iterator

import asyncpg

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
_DETAILS = [
    "built for daily use",
    "ships with a two year warranty",
    "designed in small batches",
    "tested in harsh weather",
    "easy to clean",
    "recycled packaging",
    "replaceable parts",
    "quiet operation",
    "fast charging",
    "low energy",
    "fits in a drawer",
    "gift ready",
    "professional grade",
    "beginner friendly",
    "award winning",
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


def products(count: int, seed: int = 42) -> Iterator[tuple[int, str, str, str, int, int]]:
    rng = random.Random(seed)
    for product_id in range(1, count + 1):
        name = f"{rng.choice(_ADJECTIVES)} {rng.choice(_ADJECTIVES)} {rng.choice(_NOUNS)}"
        description = f"A {name} {rng.choice(_DETAILS)}, {rng.choice(_DETAILS)}. Model {rng.randrange(100, 999)}."
        yield (
            product_id,
            f"SKU-{product_id:08d}",
            name.title(),
            description,
            rng.randrange(99, 99_999),
            rng.randrange(500),
        )


def tasks(count: int, seed: int = 7) -> Iterator[tuple[str, str, bool]]:
    rng = random.Random(seed)
    for number in range(1, count + 1):
        yield f"{rng.choice(_TASK_VERBS)} the {rng.choice(_TASK_OBJECTS)} #{number}", "", rng.random() < 0.3


async def seed(dsn: str, product_count: int, task_count: int) -> dict[str, int]:
    """Fill empty tables; tables that already hold rows are left alone, so this is safe to repeat."""
    conn = await asyncpg.connect(dsn)
    written = {"products": 0, "tasks": 0}
    try:
        async with conn.transaction():
            if product_count and not await conn.fetchval("SELECT EXISTS (SELECT 1 FROM products)"):
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
        await conn.execute("ANALYZE products; ANALYZE tasks")
    finally:
        await conn.close()
    return written
