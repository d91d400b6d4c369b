"""Line numbers for TOML keys, which `tomllib` does not report, so errors can point at the line."""

from __future__ import annotations

import re

_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(?:#.*)?$")
_KEY = re.compile(r"""^\s*("?)([A-Za-z0-9_.\-]+)\1\s*=""")


def locate(text: str, table: str, index: int | None, key: str | None) -> int | None:
    """The 1-based line of `key` in `table` (the `index`-th `[[table]]` for arrays), or of the header.

    `table` is dotted ("defaults", "defaults.env", "rung", "rung.env"); a sub-table of an array
    table belongs to the array's latest entry. Falls back to the table header, then None.
    """
    root = table.split(".")[0]
    counts: dict[str, int] = {}
    current: tuple[str, int | None] = ("", None)
    header_line: int | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        header = _HEADER.match(line)
        if header:
            name = header.group(2).strip()
            if header.group(1) == "[[":
                counts[name] = counts.get(name, -1) + 1
                current = (name, counts[name])
            else:
                current = (name, counts.get(name.split(".")[0]))
            if current[0] == table and (index is None or current[1] == index):
                header_line = number
                if key is None:
                    return number
            continue
        if key is None:
            continue
        in_table = current[0] == table and (index is None or current[1] == index)
        at_root = table == "" and current[0] == ""
        match = _KEY.match(line)
        if match and (in_table or at_root) and match.group(2) == key:
            return number
        if match and root != table and current[0] == root and (index is None or current[1] == index):
            # `[rung] env.X = ...` or inline `env = { X = ... }` style: point at the parent key.
            sub = table[len(root) + 1 :]
            if match.group(2) in (sub, f"{sub}.{key}"):
                return number
    return header_line
