# syntax=docker/dockerfile:1.7
# One image for `tenk serve`, `tenk worker` and `tenk mock-upstream` (pick with the command).
#
# Build:  docker buildx build --platform linux/amd64,linux/arm64 -t tenk:latest .
# The lock file pins every wheel; each dependency ships manylinux wheels for x86_64 and aarch64, so both
# platforms install without a compiler, and the final stage carries none.
#
# PYTHON_IMAGE and UV_IMAGE are arguments so that a machine without access to a container registry can
# build from a local base (see docs/deploying.md: building without a registry).
ARG PYTHON_IMAGE=python:3.12-slim-bookworm
ARG UV_IMAGE=ghcr.io/astral-sh/uv:0.13.9

FROM ${UV_IMAGE} AS uv

FROM ${PYTHON_IMAGE} AS build
COPY --from=uv /uv /usr/local/bin/uv
# Optional extras, e.g. --build-arg EXTRAS=otel for tracing (TENK_OPS_OTEL_ENDPOINT); none by default.
ARG EXTRAS=""
# Byte-compile at build time (faster cold start, read-only root works); copy rather than hard-link out of
# the cache mount; never download a Python: use the base image's, which the final stage has too.
ENV UV_COMPILE_BYTECODE=1 \
    UV_LINK_MODE=copy \
    UV_PYTHON_DOWNLOADS=never \
    UV_PROJECT_ENVIRONMENT=/app/.venv
WORKDIR /app
# Dependencies first, from the lock alone: this layer is reused until uv.lock changes. The workspace's
# members (tenk and tenk-doctor, packages/) come after, with their source; uv needs their pyprojects to plan.
RUN --mount=type=cache,target=/root/.cache/uv \
    --mount=type=bind,source=uv.lock,target=/app/uv.lock \
    --mount=type=bind,source=pyproject.toml,target=/app/pyproject.toml \
    --mount=type=bind,source=packages/tenk-doctor/pyproject.toml,target=/app/packages/tenk-doctor/pyproject.toml \
    uv sync --frozen --no-dev --no-install-workspace ${EXTRAS:+--extra "$EXTRAS"}
COPY pyproject.toml uv.lock README.md ./
COPY src ./src
COPY packages ./packages
# --no-editable: the venv holds tenk itself, so the final stage needs no source tree.
RUN --mount=type=cache,target=/root/.cache/uv \
    uv sync --frozen --no-dev --no-editable ${EXTRAS:+--extra "$EXTRAS"}

FROM ${PYTHON_IMAGE} AS runtime
# A fixed uid, so volume permissions and Kubernetes' runAsUser can name it.
RUN groupadd --system --gid 10001 tenk \
    && useradd --system --uid 10001 --gid tenk --home-dir /home/tenk --create-home --shell /usr/sbin/nologin tenk
COPY --from=build --chown=root:root /app/.venv /app/.venv
# No dev fallback: a container has no `tenk up` dev key, and a cursor-signing key generated in its own
# /tmp would differ from every other replica's; tenk refuses to start unless the deployment names both.
ENV PATH=/app/.venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    TENK_HOST=0.0.0.0 \
    TENK_PORT=8000 \
    TENK_DATA_DIR=/tmp/tenk \
    TENK_DEV_FALLBACK=false \
    HEALTHCHECK_URL=http://127.0.0.1:8000/health
USER 10001:10001
WORKDIR /home/tenk
EXPOSE 8000
# No curl in a slim image: the interpreter that is there anyway does the probe. Workers and the mock
# override HEALTHCHECK_URL (their own /metrics or /health port).
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen(os.environ['HEALTHCHECK_URL'], timeout=2)"]
ENTRYPOINT ["tenk"]
CMD ["serve"]
