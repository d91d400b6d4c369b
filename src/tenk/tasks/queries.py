from __future__ import annotations

_TASK_JSON = "(SELECT row_to_json(t)::text FROM (SELECT id, title, notes, done, created_at, updated_at) AS t)"

TASK_BY_ID = f"SELECT {_TASK_JSON} FROM tasks WHERE id = $1"

INSERT_TASK = f"INSERT INTO tasks (title, notes, done) VALUES ($1, $2, $3) RETURNING {_TASK_JSON}"

PATCH_TASK = f"""
UPDATE tasks
SET title = COALESCE($2, title), notes = COALESCE($3, notes), done = COALESCE($4, done), updated_at = now()
WHERE id = $1
RETURNING {_TASK_JSON}
"""

# Ordered by the identity column: rows committed during a walk never shift rows already passed.
TASK_PAGE = f"SELECT id, {_TASK_JSON} FROM tasks WHERE id > $1 ORDER BY id LIMIT $2"

DELETE_TASK = "DELETE FROM tasks WHERE id = $1 RETURNING id"
