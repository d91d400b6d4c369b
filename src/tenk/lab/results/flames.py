"""The arithmetic of stack samples: collapse py-spy's raw lines, merge them, and share them out.

A profile is a `Counter` of stacks: each stack a tuple of frames, root first, counted by its samples.
py-spy's raw format is one line per distinct stack, `frame;frame;...;frame COUNT`; with `--subprocesses`
each stack starts with a frame per process (`process PID:"command line"`). Those frames are dropped here:
their ids differ from one rung, repeat and step to the next, and the question a profile answers is which
functions the target's CPU went to, whichever worker ran them.

Every share is a fraction of the profile's samples, so profiles of different lengths and rates compare.
A function's *self* share counts the samples where it was the running frame (the leaf); its *total*
share those where it was anywhere on the stack, once per sample however deep it recurses.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from tenk.lab.documents import FunctionChange, FunctionShare

Stack = tuple[str, ...]
Profile = Counter[Stack]

_PROCESS_FRAME = re.compile(r'^process \d+:".*"$')


def collapse(text: str) -> Profile:
    """py-spy's `--format raw` text as a profile; lines that are not `stack count` are skipped."""
    profile: Profile = Counter()
    for line in text.splitlines():
        stack, _, count = line.rstrip().rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = tuple(frame for frame in stack.split(";") if frame and not _PROCESS_FRAME.match(frame))
        if frames:
            profile[frames] += int(count)
    return profile


def merge(profiles: Iterable[Mapping[Stack, int]]) -> Profile:
    """The samples of every profile, added up stack by stack."""
    merged: Profile = Counter()
    for profile in profiles:
        merged.update(profile)
    return merged


def self_shares(profile: Mapping[Stack, int]) -> dict[str, float]:
    """Function -> the fraction of samples where it was the running frame. They sum to 1."""
    total = sum(profile.values())
    counts: Counter[str] = Counter()
    for stack, count in profile.items():
        counts[stack[-1]] += count
    return {function: count / total for function, count in counts.items()} if total else {}


def total_shares(profile: Mapping[Stack, int]) -> dict[str, float]:
    """Function -> the fraction of samples with it anywhere on the stack (once per sample)."""
    total = sum(profile.values())
    counts: Counter[str] = Counter()
    for stack, count in profile.items():
        for function in set(stack):
            counts[function] += count
    return {function: count / total for function, count in counts.items()} if total else {}


def top_functions(profile: Mapping[Stack, int], count: int = 10) -> list[FunctionShare]:
    """The `count` functions with the largest self share, each with its total share beside it."""
    own, anywhere = self_shares(profile), total_shares(profile)
    ranked = sorted(own, key=lambda function: (-own[function], function))[:count]
    return [FunctionShare(function=f, self_share=round(own[f], 4), total_share=round(anywhere[f], 4)) for f in ranked]


def share_changes(before: Mapping[Stack, int], after: Mapping[Stack, int], count: int = 5) -> list[FunctionChange]:
    """The `count` functions whose self share moved most (either way) from `before` to `after`."""
    old, new = self_shares(before), self_shares(after)
    n_old, n_new = sum(before.values()), sum(after.values())
    moved = {function: new.get(function, 0.0) - old.get(function, 0.0) for function in old.keys() | new.keys()}
    ranked = sorted(moved, key=lambda function: (-abs(moved[function]), function))[:count]
    return [
        FunctionChange(
            function=f,
            before=round(old.get(f, 0.0), 4),
            after=round(new.get(f, 0.0), 4),
            points=round(moved[f] * 100, 2),
            noise_points=round(
                200 * math.sqrt(_variance(old.get(f, 0.0), n_old) + _variance(new.get(f, 0.0), n_new)), 2
            ),
        )
        for f in ranked
    ]


def _variance(share: float, samples: int) -> float:
    """The sampling variance of a share of `samples` samples (a binomial proportion)."""
    return share * (1 - share) / samples if samples else 0.0


@dataclass
class Frame:
    """One frame of a flame graph: a function at one place in the call tree (its path from the root),
    with its share of the samples there (`share`) and, for a differential graph, the change in it."""

    name: str
    share: float = 0.0
    change: float = 0.0
    children: dict[str, Frame] | None = None

    def child(self, name: str) -> Frame:
        if self.children is None:
            self.children = {}
        return self.children.setdefault(name, Frame(name))


def call_tree(profile: Mapping[Stack, int]) -> Frame:
    """The profile as a tree of frames, each with its share of all samples (the root's is 1)."""
    total = sum(profile.values())
    root = Frame("all", share=1.0 if total else 0.0)
    for stack, count in profile.items():
        node = root
        for name in stack:
            node = node.child(name)
            node.share += count / total
    return root


def diff_tree(before: Mapping[Stack, int], after: Mapping[Stack, int]) -> Frame:
    """Both profiles as one tree: each frame as wide as the mean of its two shares (so a frame that is in
    only one of them still shows), and its `change` the share after minus the share before."""
    root = Frame("all")
    for weight, profile in ((-1.0, before), (1.0, after)):
        total = sum(profile.values())
        if not total:
            continue
        root.share += 0.5
        root.change += weight
        for stack, count in profile.items():
            node = root
            for name in stack:
                node = node.child(name)
                node.share += count / total / 2
                node.change += weight * count / total
    return root
