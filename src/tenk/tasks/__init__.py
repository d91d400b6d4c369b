"""Tasks: plain CRUD over the pooled Postgres, with keyset pagination."""
