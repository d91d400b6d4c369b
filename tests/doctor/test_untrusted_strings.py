"""What doctor writes holds the analysed project's file names, source lines and route paths as data:
the ladder parses (tomllib) to exactly the tables a benign project gives, its mix to exactly the paths
the lab can send, both load in the lab; SARIF and JSON carry each name intact; text holds no raw
control character.
"""

from __future__ import annotations

import functools
import json
import os
import string
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import jsonschema
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tenk.doctor import Report, diagnose
from tenk.doctor.formats import FORMATS
from tenk.doctor.formats._escape import printable
from tenk.doctor.ladder import write_ladder
from tenk.lab.definition.ladder import load_ladder
from tenk.lab.definition.mixes import load_mix
from tests.doctor.test_formats import SARIF_SCHEMA

# What ends a TOML comment or string, moves a terminal's cursor, or reverses text (U+202E).
TRICKY = ["\n", "\r", "\x1b[2J", "\x07", "\x00", "\x7f", "\x85", "\u2028", "\u202e", '"', "'", "\\", "#", "[", "]"]
URI_CHARACTERS = set(string.ascii_letters + string.digits + "-._~:/?#[]@!$&'()*+,;=%")
ISSUE = '\n[rung.env]\nLD_PRELOAD = "x.so"\n#'
undecodable = st.characters(min_codepoint=0xDC80, max_codepoint=0xDCFF)
# A Linux file name: any characters but `/` and NUL, undecodable bytes as surrogate escapes, 255 bytes at most.
name_pieces = st.one_of(
    st.text(st.one_of(st.characters(exclude_characters="/\x00"), undecodable), max_size=4),
    st.sampled_from([piece for piece in TRICKY if piece != "\x00"]),
)
suffixes = st.lists(name_pieces, max_size=8).map("".join).filter(lambda s: len(os.fsencode("Dockerfile" + s)) <= 255)
texts = st.lists(
    st.one_of(st.text(st.one_of(st.characters(), undecodable), max_size=4), st.sampled_from(TRICKY)), max_size=8
).map("".join)
# doctor reads a Dockerfile's lines as Python splits them (U+0085 and U+2028 too): text for one line has none.
one_line = texts.filter(lambda text: text.splitlines() in ([text], []))


@dataclass(frozen=True)
class Project:
    """A FastAPI app with one more route, and a Dockerfile that runs it with findings to fix."""

    root: Path
    dockerfile: str
    route: str

    @classmethod
    def write(cls, root: Path, suffix: str, route: str, argument: str) -> Project:
        """`argument` goes on the Dockerfile's CMD line, which the ladder's first reason quotes."""
        dockerfile = "Dockerfile" + suffix
        (root / "app.py").write_text(
            "from fastapi import FastAPI\napp = FastAPI()\n"
            '@app.get("/ping")\nasync def ping():\n    return {}\n'
            f"@app.get({route!r})\nasync def other():\n    return {{}}\n",
            encoding="utf-8",
        )
        command = json.dumps(["uvicorn", "app:app", "--http", "h11", "--root-path=" + argument], ensure_ascii=False)
        (root / dockerfile).write_text(
            f"FROM python:3.12-slim\nCMD {command}\n", encoding="utf-8", errors="surrogateescape"
        )
        return cls(root, dockerfile, route)

    def report(self) -> Report:
        return diagnose("app:app", search_path=[str(self.root)])


def _written(project: Project) -> tuple[str, str, Path]:
    """The ladder's and the mix's text, and the ladder's path."""
    out = project.root / "out"
    out.mkdir()
    ladder = write_ladder(project.report(), out / "ladder.toml")
    return ladder.read_text(encoding="utf-8"), (out / "ladder-mix.toml").read_text(encoding="utf-8"), ladder


@functools.cache
def _benign_ladder() -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        return tomllib.loads(_written(Project.write(Path(tmp), "", "/benign", "benign"))[0])


def _sendable(path: str) -> bool:
    """A route the mix holds: no path parameter, and a path the lab takes (no whitespace or control)."""
    return "{" not in path and path.isprintable() and not any(char.isspace() for char in path)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(suffix=suffixes, route=texts.map(lambda s: "/" + s), argument=one_line)
@example(suffix=ISSUE, route="/ping", argument="benign")
def test_the_ladder_holds_exactly_the_tables_doctor_means_whatever_the_projects_names(
    suffix: str, route: str, argument: str
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        project = Project.write(Path(tmp), suffix, route, argument)
        ladder_text, mix_text, ladder = _written(project)
        # The reasons are comments: whatever the names, the tables and values are a benign project's.
        assert tomllib.loads(ladder_text) == _benign_ladder()
        assert printable(project.dockerfile) in ladder_text
        paths = sorted(path for path in {"/ping", route} if _sendable(path))
        assert [endpoint["path"] for endpoint in tomllib.loads(mix_text)["endpoint"]] == paths
        loaded = load_ladder(ladder)
        assert [endpoint.path for endpoint in load_mix(str(ladder.with_name("ladder-mix.toml"))).endpoints] == paths
        assert loaded.rungs[0].config.mix == "ladder-mix.toml"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(suffix=suffixes, argument=one_line)
@example(suffix=ISSUE, argument="\x1b]0;owned\x07")
def test_sarif_and_json_carry_the_names_intact_and_text_no_control_character(suffix: str, argument: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        project = Project.write(Path(tmp), suffix, "/other", argument)
        report = project.report()
        sarif = json.loads(FORMATS["sarif"](report, project.root))
        jsonschema.validate(sarif, SARIF_SCHEMA)
        uris = {
            location["physicalLocation"]["artifactLocation"]["uri"]
            for result in sarif["runs"][0]["results"]
            for location in result["locations"]
        }
        # Each is a URI reference (RFC 3986) naming a path alone, which decodes to the file's name.
        for uri in uris:
            assert set(uri) <= URI_CHARACTERS, uri
            assert urlsplit(uri).path == uri, uri
        assert project.dockerfile in {unquote(uri, errors="surrogateescape") for uri in uris}
        document = json.loads(FORMATS["json"](report, project.root))
        assert project.dockerfile in {finding["path"] for finding in document["findings"]}
        text = FORMATS["text"](report, project.root)
        assert all(char in "\n\t" or char.isprintable() for char in text), text
        assert printable(project.dockerfile) in text
