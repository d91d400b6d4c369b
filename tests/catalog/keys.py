"""Every Redis key and channel the catalog uses, by the names the tests read them by (the products'
cache's, `tenk.catalog.service.PRODUCTS`).

Layout (`tenk.platform.readthrough`, cluster-safe): `tenk:catalog:product:{<id>}` (the cached row),
`tenk:catalog:product:{<id>}:gen` (its write generation) and `tenk:catalog:product:{<id>}:lsn` (the
primary's WAL position after its latest write, for read replicas); invalidations go out on
`tenk:catalog:invalidate`.
"""

from __future__ import annotations

from tenk.catalog.service import PRODUCTS

product_key = PRODUCTS.keys.value_key
generation_key = PRODUCTS.keys.generation_key
written_lsn_key = PRODUCTS.keys.written_lsn_key
INVALIDATE_CHANNEL = PRODUCTS.keys.channel
