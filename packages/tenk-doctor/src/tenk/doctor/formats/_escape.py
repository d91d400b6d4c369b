"""Text from the analysed project (its file names, source lines, and the messages that quote them) as
doctor writes it: no control character reaches a terminal, a TOML comment or a TOML string as itself.

A file may be named `"Dockerfile\\n[rung.env]\\nLD_PRELOAD = ..."`: written verbatim into a `# reason`
comment of the ladder, its newline would start a table of the file's choosing.
"""

from __future__ import annotations

# The escapes TOML's basic strings share with Python's (https://toml.io/en/v1.0.0#string).
_TOML_SHORT = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def _escape(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def printable(text: str) -> str:
    """`text` with each character Python would not print as a Python-style escape (`\\x1b`, `\\u2028`):
    C0 and C1 controls, DEL, line and paragraph separators, format characters such as bidi overrides,
    and the lone surrogates an undecodable byte of a file name becomes. A tab stays a tab."""
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() or char == "\t" else _escape(char) for char in text)


def toml_string(text: str) -> str:
    """`text` as a TOML basic string: quote, backslash and every character Python would not print
    escaped as TOML spells them. TOML holds Unicode scalar values only, so a lone surrogate raises
    ValueError."""
    parts = []
    for char in text:
        if char in _TOML_SHORT:
            parts.append(_TOML_SHORT[char])
        elif char.isprintable():
            parts.append(char)
        elif 0xD800 <= ord(char) <= 0xDFFF:
            raise ValueError(f"'{printable(text)}' is not valid Unicode (an undecodable byte?): TOML cannot hold it")
        else:
            parts.append(f"\\u{ord(char):04X}" if ord(char) < 0x10000 else f"\\U{ord(char):08X}")
    return '"' + "".join(parts) + '"'
