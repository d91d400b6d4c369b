from __future__ import annotations

from tenk.cache_settings import CacheSettings


class CatalogSettings(CacheSettings):
    """`settings.catalog` in the tree (tenk.settings): TENK_CATALOG_<FIELD>, the products' cache."""
