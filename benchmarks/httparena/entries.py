"""The entries `make bench-httparena` measures: tenk's, HttpArena's three Python entries, and a stock FastAPI
crud entry, each started as its own folder ships it, from an environment of its own.

HttpArena's entries run from virtual environments made here from their own requirements.txt (uv, from
PyPI), on this machine's Python, so that each runs the versions it pins. tenk's entry runs in the lab's
own environment, where tenk is installed, through its image's command (serve.sh).

fastpysgi-asgi pins a git commit of fastpysgi (21095fe, "v0.6 is bugged"); it gets 0.6 from PyPI here,
the newest release (PyPI has 0.1 to 0.6). The pinned commit is no better: built here from its git tree
(with its libuv and llhttp submodule commits, the same as 0.6's), it fails the same checks in the same
way. Both free a connection's state when they close it on the request's own `Connection: close`, while
the ASGI task's done callback still points at it (`asgi_done` reads it through `update_log_prefix`).
One request such as `GET /baseline11?a=1&b=1` with `Connection: close` is enough: under
PYTHONMALLOC=debug the server segfaults at once; with Python's own allocator it segfaults on the next
request whose handler awaits (`GET /async-db?min=9999&max=9999&limit=50`, on asyncpg), or once five
keep-alive connections send at once. validate.sh's fragmented requests close their connections, so the
entry fails api-4's checks and is not measured there; it passes the json and async-db checks, which
never ask for a close, and is measured on those. See docs/httparena.md.

Each is given the same number of workers (`workers`, one a CPU of the budget by default). HttpArena's
launcher.py would start max(CPUs, 4) uvicorn workers: four processes on a one-CPU budget only add
switching between them, so the bench does not, and says so.
"""

from __future__ import annotations

import hashlib
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from benchmarks.httparena.arena import FRAMEWORKS

HERE = Path(__file__).parent
REPO = HERE.parents[1]
TENK_ENTRY = REPO / "examples" / "httparena" / "tenk"
VENVS = REPO / ".tenk" / "httparena"
VENV_BIN = Path(sys.executable).parent
# The PyPI release of fastpysgi that fastpysgi-asgi runs on here, in place of the git commit it pins
# (which crashes as this does: see above).
FASTPYSGI = "fastpysgi==0.6"
API_PROFILES = ("api-4", "json", "async-db")


@dataclass(frozen=True)
class Entry:
    """One server to measure: its name, its folder, what it runs on, and the profiles it enters."""

    name: str
    folder: Path
    profiles: tuple[str, ...]
    # Its own environment's requirements (requirements.txt lines); () for tenk's, which is the lab's.
    requirements: tuple[str, ...] = ()
    kind: str = "uvicorn"  # how its folder serves: "tenk" (serve.sh), "uvicorn", "fastpysgi"
    # serve.sh's server for a "tenk" entry (TENK_SERVER): granian, its default, or uvicorn.
    server: str = "granian"

    @property
    def venv(self) -> Path:
        return VENVS / self.name

    def command(self) -> list[str]:
        """Its command line for the lab (`command` of a rung): {port} and {workers} are the lab's to fill."""
        if self.kind == "tenk":
            env = (
                f"PATH={shlex.quote(str(VENV_BIN))}:$PATH HOST=127.0.0.1 PORT={{port}} TENK_WORKERS={{workers}} "
                f"TENK_SERVER={shlex.quote(self.server)}"
            )
            return ["sh", "-c", f"cd {shlex.quote(str(self.folder))} && {env} exec sh serve.sh"]
        if self.kind == "fastpysgi":
            serve = str(HERE / "serve_fastpysgi.py")
            return [str(self.venv / "bin" / "python"), serve, str(self.folder), "{port}", "{workers}"]
        # launcher.py's uvicorn command line, with the bench's port and workers.
        uvicorn = str(self.venv / "bin" / "uvicorn")
        return [
            *(uvicorn, "app:app", "--app-dir", str(self.folder), "--host", "127.0.0.1", "--port", "{port}"),
            *("--loop", "uvloop", "--log-level", "critical", "--workers", "{workers}"),
        ]

    def prepare(self) -> None:
        """Its environment, made (or brought up to date) from its requirements; nothing for tenk's."""
        if not self.requirements:
            return
        wanted = hashlib.sha256("\n".join(self.requirements).encode()).hexdigest()
        stamp = self.venv / ".requirements-sha256"
        if stamp.exists() and stamp.read_text() == wanted:
            return
        uv = str(VENV_BIN / "uv")
        subprocess.run([uv, "venv", "--quiet", "--python", sys.executable, str(self.venv)], check=True)
        python = str(self.venv / "bin" / "python")
        subprocess.run([uv, "pip", "install", "--quiet", "--python", python, *self.requirements], check=True)
        stamp.write_text(wanted)


def requirements(folder: Path) -> tuple[str, ...]:
    """A requirements.txt's requirements, with a git pin of fastpysgi replaced by its PyPI release."""
    found = []
    for line in (folder / "requirements.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            found.append(FASTPYSGI if "fastpysgi" in line else line)
    return tuple(found)


def entries() -> dict[str, Entry]:
    arena = {
        name: Entry(name, FRAMEWORKS / name, API_PROFILES, requirements(FRAMEWORKS / name), kind)
        for name, kind in (("fastapi", "uvicorn"), ("uvicorn", "uvicorn"), ("fastpysgi-asgi", "fastpysgi"))
    }
    crud = HERE / "fastapi_crud"
    return {
        "tenk": Entry("tenk", TENK_ENTRY, (*API_PROFILES, "crud"), kind="tenk"),
        # The same entry on uvicorn: fewer wake-ups a request than granian, more instructions
        # (docs/httparena.md); measured beside it until a timing run says which serve.sh should start.
        "tenk-uvicorn": Entry("tenk-uvicorn", TENK_ENTRY, (*API_PROFILES, "crud"), kind="tenk", server="uvicorn"),
        **arena,
        "fastapi-crud": Entry("fastapi-crud", crud, ("crud",), requirements(crud)),
    }
