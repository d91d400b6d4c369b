"""Rows come back as JSON rendered by Postgres: the cache keeps and serves those bytes as they are."""

_WIDGET_JSON = "(SELECT row_to_json(w)::text FROM (SELECT id, name, price_cents) AS w)"

WIDGET_BY_ID = f"SELECT {_WIDGET_JSON} FROM widgets WHERE id = $1"
WIDGETS_BY_IDS = f"SELECT id, {_WIDGET_JSON} FROM widgets WHERE id = ANY($1::bigint[])"
INSERT_WIDGET = f"INSERT INTO widgets (name, price_cents) VALUES ($1, $2) RETURNING id, {_WIDGET_JSON}"
REPLACE_WIDGET = f"UPDATE widgets SET name = $2, price_cents = $3 WHERE id = $1 RETURNING {_WIDGET_JSON}"
DELETE_WIDGET = "DELETE FROM widgets WHERE id = $1 RETURNING id"
