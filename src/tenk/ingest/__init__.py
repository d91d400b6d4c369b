"""Write-behind ingestion: events through a Redis Stream into Postgres (see `worker.py` for the flush order)."""
