"""The OpenAPI documents every answer: each route's 2xx is JSON with named fields (a model),
or declares the media type it is (a page, an SVG, a clip, a CSV file)."""

from typing import Any

from api.app import create_app
from hall.config import parse_config

CONFIG = {"voice": {"engine": "estimate"}, "audio": {"output": "null"}}
NO_BODY = {"204", "205", "304"}


def _resolve(spec: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = spec["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def _named(spec: dict[str, Any], schema: dict[str, Any]) -> bool:
    """An object with properties, or an array of them (a free-form object, one with only
    additionalProperties, or no schema at all is not)."""
    s = _resolve(spec, schema)
    if s.get("type") == "array":
        return _named(spec, s.get("items", {}))
    if "anyOf" in s or "oneOf" in s:
        return all(_named(spec, x) or _resolve(spec, x).get("type") == "null"
                   for x in s.get("anyOf", s.get("oneOf", [])))
    return bool(s.get("properties"))


def untyped(spec: dict[str, Any]) -> list[str]:
    bad = []
    for path, item in spec["paths"].items():
        for method, op in item.items():
            answers = {c: r for c, r in op["responses"].items()
                       if c.startswith("2") and c not in NO_BODY}
            why = "no 2xx answer with a body" if not answers else None
            for code, r in answers.items():
                content = r.get("content")
                if not content:
                    why = f"{code} says nothing of its body"
                for media, body in (content or {}).items():
                    if media == "application/json" and not _named(spec, body.get("schema", {})):
                        why = f"{code} is JSON without named fields (give it a response model)"
            if why:
                bad.append(f"{method.upper()} {path}: {why}")
    return bad


def test_every_answer_is_typed():
    spec = create_app(parse_config(CONFIG)).openapi()
    assert untyped(spec) == []


def test_the_check_finds_an_untyped_route():
    spec = {"paths": {"/x": {"get": {"responses": {"200": {"content": {
        "application/json": {"schema": {"type": "object", "additionalProperties": True}}}}}}},
        "/y": {"get": {"responses": {"200": {"content": {"application/json": {"schema": {}}}}}}},
        "/z": {"get": {"responses": {"200": {"content": {"text/csv": {}}}}}}}}
    assert untyped(spec) == [
        "GET /x: 200 is JSON without named fields (give it a response model)",
        "GET /y: 200 is JSON without named fields (give it a response model)"]
