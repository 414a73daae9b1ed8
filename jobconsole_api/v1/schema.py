"""JSON Schema (the 2020-12 subset OpenAPI 3.1 uses): builders for the API's definitions, and the validator the
views check requests with. The OpenAPI document is built from the same dicts, so what it promises is what is
enforced.

The validator knows the keywords these builders write: type, enum, const, minimum, maximum, minLength,
maxLength, pattern, format (date-time, date), properties, required, additionalProperties, items, prefixItems,
minItems, maxItems, anyOf, oneOf. Each error names its place (`jobs[2].priority`) and says what is wrong, in the
API's words. `integral` then turns numbers of integer value (5.0) where the schema says integer into ints, as
JSON Schema counts them integers and the engine expects them so.
"""

import re
from datetime import date, datetime
from typing import Any

from jobconsole.moments import to_utc

Schema = dict[str, Any]

ULID_PATTERN = "^[0-9A-HJKMNP-TV-Za-hjkmnp-tv-z]{26}$"
NAME_PATTERN = r"^[A-Za-z0-9_.\-]{1,100}$"  # queue and task names, as the engine accepts them


def string(description: str = "", **keywords: Any) -> Schema:
    return _described({"type": "string", **keywords}, description)


def integer(description: str = "", **keywords: Any) -> Schema:
    return _described({"type": "integer", **keywords}, description)


def number(description: str = "", **keywords: Any) -> Schema:
    return _described({"type": "number", **keywords}, description)


def boolean(description: str = "", **keywords: Any) -> Schema:
    return _described({"type": "boolean", **keywords}, description)


def nullable(schema: Schema) -> Schema:
    kinds = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
    return {**schema, "type": [*kinds, "null"]}


def array(items: Schema, description: str = "", **keywords: Any) -> Schema:
    return _described({"type": "array", "items": items, **keywords}, description)


def obj(
    properties: dict[str, Schema], required: tuple[str, ...] = (), description: str = "", *, extra: bool = False
) -> Schema:
    """An object with these properties; others are refused unless `extra`."""
    schema: Schema = {"type": "object", "properties": properties, "additionalProperties": extra}
    if required:
        schema["required"] = list(required)
    return _described(schema, description)


def any_object(description: str = "") -> Schema:
    return _described({"type": "object"}, description)


def ref(name: str) -> Schema:
    """A reference to a named response schema (components/schemas). Request schemas are kept inline."""
    return {"$ref": f"#/components/schemas/{name}"}


def _described(schema: Schema, description: str) -> Schema:
    if description:
        schema["description"] = description
    return schema


# --- validation ---------------------------------------------------------------------------------------------

_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
    "null": (type(None),),
}
_NAMES = {"string": "a string", "integer": "an integer", "number": "a number", "boolean": "a boolean",
          "object": "an object", "array": "an array", "null": "null"}  # fmt: skip


def _is(value: Any, kind: str) -> bool:
    if isinstance(value, bool) and kind in ("integer", "number"):
        return False  # JSON true is no number
    if kind == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _TYPES[kind])


def type_name(value: Any) -> str:
    for kind in ("null", "boolean", "integer", "number", "string", "array", "object"):
        if _is(value, kind):
            return _NAMES[kind]
    return type(value).__name__


def parse_datetime(value: str) -> datetime | None:
    """An RFC 3339 date-time (a zone is required: 2026-11-25T14:00:00Z); None when it is not one."""
    if not isinstance(value, str) or "T" not in value.upper():
        return None
    try:
        return to_utc(datetime.fromisoformat(value.replace("z", "Z")))
    except ValueError:  # not a date-time, no zone, or an offset or instant a database cannot store
        return None


def parse_date(value: str) -> date | None:
    """An RFC 3339 full-date (2026-11-25); None when it is not one."""
    if not isinstance(value, str) or not re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", value):
        return None
    try:
        return date.fromisoformat(value)
    except ValueError:
        return None


def _place(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def validate(value: Any, schema: Schema, path: str = "") -> list[dict[str, str]]:
    """Every way `value` breaks `schema`, as {"field", "message"}; an empty list when it fits."""
    errors: list[dict[str, str]] = []
    _check(value, schema, path, errors)
    return errors


def _check(value: Any, schema: Schema, path: str, errors: list[dict[str, str]]) -> None:
    def fail(message: str) -> None:
        errors.append({"field": path or "(body)", "message": message})

    if "anyOf" in schema:
        options = [validate(value, option, path) for option in schema["anyOf"]]
        if all(options):
            fail(schema.get("x-any-message") or schema.get("description") or min(options, key=len)[0]["message"])
            return
    if "oneOf" in schema:
        fitting = sum(not validate(value, option, path) for option in schema["oneOf"])
        if fitting != 1:
            fail(schema.get("x-one-message") or f"must fit exactly one of {len(schema['oneOf'])} forms")
            return
    kinds = schema.get("type")
    if kinds is not None:
        kinds = kinds if isinstance(kinds, list) else [kinds]
        if not any(_is(value, kind) for kind in kinds):
            fail(f"must be {' or '.join(_NAMES[k] for k in kinds)}, not {type_name(value)}")
            return
    if "const" in schema and value != schema["const"]:
        fail(f"must be {schema['const']!r}")
    if "enum" in schema and value not in schema["enum"]:
        fail(f"must be one of {', '.join(map(str, schema['enum']))}; got {value!r}")
        return
    if isinstance(value, str):
        _check_string(value, schema, fail)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            fail(f"must be at least {schema['minimum']}; got {value}")
        if "maximum" in schema and value > schema["maximum"]:
            fail(f"must be at most {schema['maximum']}; got {value}")
    elif isinstance(value, list):
        if "minItems" in schema and len(value) < schema["minItems"]:
            fail(f"must have at least {schema['minItems']} item(s); got {len(value)}")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            fail(f"must have at most {schema['maxItems']} items; got {len(value)}")
            return  # do not check every item of an oversized list
        prefix = schema.get("prefixItems", [])
        for index, item in enumerate(value):
            item_schema = prefix[index] if index < len(prefix) else schema.get("items")
            if isinstance(item_schema, dict):
                _check(item, item_schema, _place(path, index), errors)
    elif isinstance(value, dict):
        _check_object(value, schema, path, errors, fail)


def _check_string(value: str, schema: Schema, fail: Any) -> None:
    if "minLength" in schema and len(value) < schema["minLength"]:
        fail(f"must have at least {schema['minLength']} character(s)")
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        fail(f"must have at most {schema['maxLength']} characters; got {len(value)}")
    if "pattern" in schema and not re.search(schema["pattern"], value):
        fail(schema.get("x-pattern-message") or f"must match {schema['pattern']}")
    if schema.get("format") == "date-time" and parse_datetime(value) is None:
        fail(f"must be a date and time with its zone, like 2026-11-25T14:00:00Z; got {value[:40]!r}")
    if schema.get("format") == "date" and parse_date(value) is None:
        fail(f"must be a date, like 2026-11-25; got {value[:40]!r}")


def _check_object(value: dict[str, Any], schema: Schema, path: str, errors: list[dict[str, str]], fail: Any) -> None:
    properties: dict[str, Schema] = schema.get("properties", {})
    for name in schema.get("required", []):
        if name not in value:
            errors.append({"field": _place(path, name), "message": "is required"})
    extra = schema.get("additionalProperties", True)
    for name, item in value.items():
        if name in properties:
            _check(item, properties[name], _place(path, name), errors)
        elif extra is False:
            known = ", ".join(properties) or "none"
            errors.append({"field": _place(path, name), "message": f"is not a known field (the fields: {known})"})
        elif isinstance(extra, dict):
            _check(item, extra, _place(path, name), errors)


def integral(value: Any, schema: Schema) -> Any:
    """A valid `value` with every float of integer value where `schema` wants an integer made an int (5.0 -> 5)."""
    for option in [*schema.get("anyOf", []), *schema.get("oneOf", [])]:
        if not validate(value, option):  # the form the value has
            value = integral(value, option)
            break
    if isinstance(value, float) and value.is_integer() and _wants_integer(schema):
        return int(value)
    if isinstance(value, list):
        prefix = schema.get("prefixItems", [])
        return [integral(item, prefix[i] if i < len(prefix) else schema.get("items") or {})
                for i, item in enumerate(value)]  # fmt: skip
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        others = extra if isinstance(extra, dict) else {}
        return {k: integral(v, properties.get(k) or others) for k, v in value.items()}
    return value


def _wants_integer(schema: Schema) -> bool:
    kinds = schema.get("type")
    kinds = kinds if isinstance(kinds, list) else [kinds]
    return "integer" in kinds and "number" not in kinds
