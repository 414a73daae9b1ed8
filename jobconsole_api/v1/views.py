"""The OpenAPI document and its docs page (rendered here, from the document: no CDN, no script)."""

import json
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from jobconsole_api.access import check_same_site
from jobconsole_api.problems import TITLES, api_view
from jobconsole_api.v1.openapi import document


@api_view(methods=["GET"])
def openapi_json(request: HttpRequest) -> HttpResponse:
    """The document, without a token (it holds no data, and a browser reading the docs sends none)."""
    check_same_site(request)
    return JsonResponse(document(), json_dumps_params={"ensure_ascii": False})


def _pretty(schema: Any) -> str:
    return json.dumps(schema, indent=2, ensure_ascii=False)


def _response_schema(status: str, response: dict[str, Any]) -> str:
    """A success response's body schema, shown; errors all share the problem schema (listed once)."""
    content: dict[str, Any] = response.get("content", {})
    if status.startswith(("4", "5")) or "application/json" not in content:
        return ""
    return _pretty(content["application/json"]["schema"])


@api_view(methods=["GET"])
def docs(request: HttpRequest) -> HttpResponse:
    check_same_site(request)
    doc = document()
    groups: dict[str, list[dict[str, Any]]] = {}
    for route, methods in doc["paths"].items():
        for method, op in methods.items():
            body = op["requestBody"]["content"]["application/json"]["schema"] if "requestBody" in op else None
            responses = [
                {"status": status, "description": r["description"], "schema": _response_schema(status, r)}
                for status, r in op["responses"].items()
            ]
            groups.setdefault(op["tags"][0], []).append({
                "method": method.upper(), "path": "/api/v1" + route, "id": op["operationId"], "summary": op["summary"],
                "description": op["description"], "scope": op["x-scope"],
                "parameters": [{**p, "schema": json.dumps(p["schema"], ensure_ascii=False)} for p in op["parameters"]],
                "body": _pretty(body) if body else "", "responses": responses,
            })  # fmt: skip
    context = {
        "doc": doc,
        "groups": groups,
        "schemas": {name: _pretty(schema) for name, schema in doc["components"]["schemas"].items()},
        "problems": sorted(TITLES.items()),
    }
    return render(request, "api/docs.html", context)
