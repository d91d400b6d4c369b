"""The Dockerfile, built and run for real where buildah works (no Docker engine here).

Docker Hub and ghcr.io are not reachable from these machines, so the base images come from what is: a
Debian root made by mmdebstrap stands in for python:3.12-slim, and the running uv binary for the uv image
(both are build arguments of the Dockerfile). buildah builds with chroot isolation, and runs the image's
`tenk` the same way: podman's OCI runtimes cannot set rlimits in this sandbox.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from harness.clients import AUTH
from harness.stack import Stack
from tenk.stack import free_port, wait_http_ok

ROOT = Path(__file__).resolve().parents[2]
BUILDAH = shutil.which("buildah")
MMDEBSTRAP = shutil.which("mmdebstrap")
IMAGE = "localhost/tenk:suite"
SUITE_PYTHON = "localhost/tenk-suite-python:bookworm"
SUITE_UV = "localhost/tenk-suite-uv:local"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        BUILDAH is None or MMDEBSTRAP is None, reason="buildah and mmdebstrap are needed (`make system-deps`)"
    ),
]


def _uv_binary() -> str | None:
    for candidate in (shutil.which("uv"), str(ROOT / ".tenk/tools/bin/uv"), str(Path(sys.executable).parent / "uv")):
        if candidate and Path(candidate).is_file():
            return candidate
    return None


def _buildah(*args: str, timeout: float = 600) -> str:
    assert BUILDAH is not None
    result = subprocess.run([BUILDAH, *args], capture_output=True, text=True, timeout=timeout, check=False)
    assert result.returncode == 0, f"buildah {' '.join(args)}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result.stdout.strip()


def _image_from(root_tar: Path | None, files: dict[str, str], env: dict[str, str], tag: str) -> None:
    container = _buildah("from", "scratch")
    try:
        if root_tar is not None:
            _buildah("add", container, str(root_tar), "/")
        for source, target in files.items():
            _buildah("copy", container, source, target)
        for key, value in env.items():
            _buildah("config", "--env", f"{key}={value}", container)
        _buildah("commit", "--quiet", container, tag)
    finally:
        _buildah("rm", container)


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    uv = _uv_binary()
    if uv is None:
        pytest.skip("no uv binary to put in the stand-in uv image")
    work = tmp_path_factory.mktemp("image")
    root_tar = work / "bookworm.tar"
    subprocess.run(
        [
            str(MMDEBSTRAP),
            "--quiet",
            "--variant=minbase",
            "--include=python3,ca-certificates",
            "bookworm",
            str(root_tar),
        ],
        check=True,
        timeout=600,
        capture_output=True,
    )
    # This machine's TLS goes through a proxy whose CA only the host trusts; the build's uv needs it too.
    ca = os.environ.get("SSL_CERT_FILE", "/etc/ssl/certs/ca-certificates.crt")
    bundle = "/etc/ssl/certs/ca-certificates.crt"
    _image_from(root_tar, {ca: bundle}, {"SSL_CERT_FILE": bundle}, SUITE_PYTHON)
    _image_from(None, {uv: "/uv"}, {}, SUITE_UV)
    try:
        _buildah(
            "bud",
            "--isolation=chroot",
            "--network=host",
            "--format=docker",
            "--no-cache",
            "--force-rm",
            f"--build-arg=PYTHON_IMAGE={SUITE_PYTHON}",
            f"--build-arg=UV_IMAGE={SUITE_UV}",
            "-t",
            IMAGE,
            "-f",
            str(ROOT / "Dockerfile"),
            str(ROOT),
            timeout=1200,
        )
        yield IMAGE
    finally:
        # A fresh base every run makes every layer new: keeping them would only fill the disk.
        assert BUILDAH is not None
        subprocess.run([BUILDAH, "rmi", "--force", IMAGE, SUITE_PYTHON, SUITE_UV], capture_output=True, check=False)


@pytest.fixture
def container(image: str) -> Iterator[str]:
    name = _buildah("from", image)
    yield name
    _buildah("rm", name)


def _run_in(container: str, *argv: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """`argv` in the image as the image's user, on the host network, in a process group of its own."""
    assert BUILDAH is not None
    flags = [f"--env={key}={value}" for key, value in (env or {}).items()]
    return subprocess.Popen(
        [BUILDAH, "run", "--isolation=chroot", "--network=host", "--user=10001:10001", *flags, container, *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def _stop(process: subprocess.Popen[bytes]) -> None:
    # buildah does not pass SIGTERM on to a chroot-isolated child: end the whole group this test started.
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(20)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(5)


def test_image_runs_as_non_root_with_a_health_check_and_no_build_tools(image: str, container: str) -> None:
    config = _buildah("inspect", "--format", "{{.Docker.Config.User}} {{.Docker.Config.Entrypoint}}", image)
    assert config == "10001:10001 [tenk]"
    assert "HEALTHCHECK_URL" in _buildah("inspect", "--format", "{{.Docker.Config.Healthcheck.Test}}", image)
    probe = _run_in(
        container,
        "python",
        "-c",
        "import os, shutil; print(os.getuid(), [t for t in ('gcc', 'cc', 'make', 'uv', 'pip') if shutil.which(t)])",
    )
    out, _ = probe.communicate(timeout=60)
    assert out.decode().strip().splitlines()[-1] == "10001 []"


def test_image_serves_the_api_and_its_health_check_passes(stack: Stack, container: str) -> None:
    port = free_port()
    # In the container, this machine's sockets are out of sight: the stores over their ports.
    env = {key: value for key, value in stack.env_over_tcp().items() if key.startswith("TENK_")}
    env.update(
        {"TENK_PORT": str(port), "TENK_DATA_DIR": "/tmp/tenk", "HEALTHCHECK_URL": f"http://127.0.0.1:{port}/health"}
    )
    server = _run_in(container, "tenk", "serve", env=env)
    try:
        wait_http_ok(f"http://127.0.0.1:{port}/health", 60, server)
        assert httpx.get(f"http://127.0.0.1:{port}/ready").json()["status"] == "ok"
        assert httpx.get(f"http://127.0.0.1:{port}/products/1").status_code == 200
        assert (
            httpx.post(f"http://127.0.0.1:{port}/tasks", json={"title": "from the image"}, headers=AUTH).status_code
            == 201
        )
        healthcheck = _run_in(
            container,
            "python",
            "-c",
            "import os, urllib.request; urllib.request.urlopen(os.environ['HEALTHCHECK_URL'], timeout=2)",
            env=env,
        )
        assert healthcheck.wait(60) == 0
    finally:
        _stop(server)


def test_image_runs_the_worker_and_the_mock_upstream(stack: Stack, container: str) -> None:
    metrics_port, mock_port = free_port(), free_port()
    # In the container, this machine's sockets are out of sight: the stores over their ports.
    env = {key: value for key, value in stack.env_over_tcp().items() if key.startswith("TENK_")}
    env["TENK_INGEST_METRICS_PORT"] = str(metrics_port)
    worker = _run_in(container, "tenk", "worker", "--name", "image-test", env=env)
    mock = _run_in(container, "tenk", "mock-upstream", "--port", str(mock_port))
    try:
        wait_http_ok(f"http://127.0.0.1:{metrics_port}/metrics", 60, worker)
        assert "tenk_ingest_rows_written_total" in httpx.get(f"http://127.0.0.1:{metrics_port}/metrics").text
        wait_http_ok(f"http://127.0.0.1:{mock_port}/health", 60, mock)
    finally:
        _stop(worker)
        _stop(mock)
