"""Widgets: a cached CRUD domain on tenk, as docs/building-an-api.md builds it."""
