"""Flame graphs as self-contained SVG: no script, no font or style sheet to fetch.

A frame is a box as wide as its share of the samples, on top of the frame that called it (the root at the
bottom). Hovering a box shows its function and figures (an SVG `<title>`). A plain graph colours frames
in warm hues chosen from the function's name, so a function keeps its colour from one rung's graph to the
next; a differential graph colours each frame by the change in its share: red grew, blue shrank, the
deeper the colour the larger the change against the graph's largest one, white unchanged.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from html import escape

from tenk.lab.results.flames import Frame

WIDTH = 1200.0
ROW = 17.0
PAD = 10.0
# Boxes narrower than this are left out (they could not be read), their width still counted in their parent.
MIN_WIDTH = 0.5
# About how wide a character of the 11 px sans-serif label is, to cut labels to their box.
CHAR = 6.4


def _boxes(frame: Frame, x: float, depth: int) -> Iterator[tuple[Frame, float, float, int]]:
    """(frame, x, width, depth) for `frame` and every descendant wide enough to draw."""
    width = frame.share * (WIDTH - 2 * PAD)
    if width < MIN_WIDTH:
        return
    yield frame, x, width, depth
    offset = x
    for child in sorted((frame.children or {}).values(), key=lambda c: c.name):
        yield from _boxes(child, offset, depth + 1)
        offset += child.share * (WIDTH - 2 * PAD)


def _warm(name: str) -> str:
    seed = zlib.crc32(name.encode())
    return f"rgb({205 + seed % 50},{80 + (seed >> 8) % 130},{(seed >> 16) % 55})"


def _diverging(change: float, largest: float) -> str:
    strength = min(1.0, abs(change) / largest) if largest > 0 else 0.0
    fade = round(255 * (1 - strength))
    return f"rgb(255,{fade},{fade})" if change > 0 else f"rgb({fade},{fade},255)"


def _ink(change: float, largest: float) -> str:
    """White on the deep end of the diverging scale, black elsewhere, so every label stays readable."""
    return "#fff" if largest > 0 and abs(change) / largest > 0.6 else "#000"


def _label(name: str, width: float) -> str:
    fits = int((width - 6) / CHAR)
    if fits < 3:
        return ""
    return name if len(name) <= fits else name[: fits - 2] + ".."


def render(root: Frame, title: str, subtitle: str, differential: bool = False) -> str:
    """The SVG document of the tree under `root`."""
    boxes = list(_boxes(root, PAD, 0))
    depth = max((d for *_, d in boxes), default=0) + 1
    height = 2 * PAD + 40 + depth * ROW
    largest = max((abs(f.change) for f, *_ in boxes if f is not root), default=0.0)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {WIDTH:.0f} {height:.0f}" font-family="sans-serif" font-size="11">',
        '<rect width="100%" height="100%" fill="#fafafa"/>',
        f'<text x="{WIDTH / 2:.0f}" y="{PAD + 14:.0f}" text-anchor="middle" font-size="15">{escape(title)}</text>',
        f'<text x="{WIDTH / 2:.0f}" y="{PAD + 32:.0f}" text-anchor="middle" fill="#555">{escape(subtitle)}</text>',
    ]
    for frame, x, width, level in boxes:
        y = height - PAD - (level + 1) * ROW
        fill = _diverging(frame.change, largest) if differential else _warm(frame.name)
        ink = _ink(frame.change, largest) if differential else "#000"
        figures = f"{frame.share:.2%} of samples"
        if differential:
            figures = f"{frame.share:.2%} of samples (mean of both), change {frame.change * 100:+.2f} points"
        parts.append(
            f"<g><title>{escape(frame.name)}: {figures}</title>"
            f'<rect x="{x:.2f}" y="{y:.1f}" width="{width:.2f}" height="{ROW - 1:.0f}" fill="{fill}" rx="2"/>'
            f'<text x="{x + 3:.2f}" y="{y + ROW - 5:.1f}" fill="{ink}">{escape(_label(frame.name, width))}</text></g>'
        )
    parts.append("</svg>\n")
    return "\n".join(parts)
