"""The API's description (`/openapi.json`) and its two viewers (`/docs`, `/redoc`), behind TENK_AUTH_DOCS.

FastAPI's own copies of these routes take no dependencies, so the app turns them off and declares
these instead: the same pages, with the ops key check in the one place every route declares its auth.
A browser sends no `Authorization` header, so with the key required the viewers open but cannot fetch
the description: read it with a client that sends the key.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse, ORJSONResponse

from tenk.platform import require_ops_key

OPENAPI_URL = "/openapi.json"

router = APIRouter(include_in_schema=False, dependencies=[Depends(require_ops_key("docs"))])


@router.get(OPENAPI_URL)
async def openapi(request: Request) -> ORJSONResponse:
    return ORJSONResponse(request.app.openapi())


@router.get("/docs")
async def swagger_ui(request: Request) -> HTMLResponse:
    return get_swagger_ui_html(openapi_url=OPENAPI_URL, title=f"{request.app.title} - Swagger UI")


@router.get("/redoc")
async def redoc(request: Request) -> HTMLResponse:
    return get_redoc_html(openapi_url=OPENAPI_URL, title=f"{request.app.title} - ReDoc")
