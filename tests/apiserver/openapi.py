"""The recorded OpenAPI v3 documents: schema lookup by kind, type checking of writes, patch metadata.

The API server decodes a body into Go structs: a value of the wrong JSON type is a 400, an unknown
field is dropped (with a warning, or an error under fieldValidation=Strict). `check()` reports both,
so the harness can fail a test whose client sent either.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import re
from pathlib import Path
from typing import Any

Json = dict[str, Any]
Path_ = tuple[str | int, ...]

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "kubernetes"
DOCUMENTS = ("openapi-v3-api-v1.json", "openapi-v3-apis-coordination.k8s.io-v1.json")
_DATE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")
_INT_RANGES = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}
_QUANTITY = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+|[KMGTPE]i|[numkMGTPE])?$")


class Schemas:
    def __init__(self, documents: list[Json]) -> None:
        self.components: dict[str, Json] = {}
        for doc in documents:
            self.components.update(doc.get("components", {}).get("schemas", {}))
        self.by_gvk: dict[tuple[str, str, str], str] = {}
        for name, schema in self.components.items():
            for gvk in schema.get("x-kubernetes-group-version-kind", []):
                self.by_gvk.setdefault((gvk["group"], gvk["version"], gvk["kind"]), name)

    def for_kind(self, group: str, version: str, kind: str) -> Json | None:
        name = self.by_gvk.get((group, version, kind))
        return self.components[name] if name else None

    def resolve(self, schema: Json | None) -> Json:
        """Follow $ref and single-element allOf (how the documents wrap referenced types)."""
        while schema:
            if "$ref" in schema:
                schema = self.components[schema["$ref"].rsplit("/", 1)[-1]]
            elif "allOf" in schema and len(schema["allOf"]) == 1:
                merged = {k: v for k, v in schema.items() if k != "allOf"}
                target = self.resolve(schema["allOf"][0])
                schema = {**target, **merged}
            else:
                return schema
        return {}

    def field(self, schema: Json, key: str) -> Json:
        """The schema of `key` inside object schema `schema` (properties or additionalProperties)."""
        props = schema.get("properties")
        if props is not None and key in props:
            return self.resolve(props[key])
        extra = schema.get("additionalProperties")
        return self.resolve(extra) if isinstance(extra, dict) else {}

    def items(self, schema: Json) -> Json:
        return self.resolve(schema.get("items"))

    def check(self, obj: object, schema: Json) -> tuple[list[str], list[Path_]]:
        """(type errors, unknown fields as key paths) of `obj` against `schema`."""
        errors: list[str] = []
        unknown: list[Path_] = []
        self._walk(obj, self.resolve(schema), (), errors, unknown)
        return errors, unknown

    def _walk(self, value: object, schema: Json, at: Path_, errors: list[str], unknown: list[Path_]) -> None:
        path = format_path(at)
        if value is None or not schema:
            return
        fmt = schema.get("format")
        if "oneOf" in schema or fmt == "int-or-string":
            if fmt == "int-or-string":
                if not (isinstance(value, str) or (type(value) is int)):
                    errors.append(f"{path}: expected int or string, got {_kind(value)}")
            elif not isinstance(value, str | int | float) or isinstance(value, bool):
                errors.append(f"{path}: expected quantity, got {_kind(value)}")
            elif isinstance(value, str) and not _QUANTITY.match(value):
                errors.append(f"{path}: quantities must match the regular expression")
            return
        typ = schema.get("type")
        if typ == "object" or "properties" in schema:
            if not isinstance(value, dict):
                errors.append(f"{path}: expected object, got {_kind(value)}")
                return
            props = schema.get("properties")
            extra = schema.get("additionalProperties")
            for key, sub in value.items():
                sub_path = (*at, key)
                if props is not None and key in props:
                    self._walk(sub, self.resolve(props[key]), sub_path, errors, unknown)
                elif isinstance(extra, dict):
                    self._walk(sub, self.resolve(extra), sub_path, errors, unknown)
                elif props is not None or extra is False:
                    unknown.append(sub_path)
        elif typ == "array":
            if not isinstance(value, list):
                errors.append(f"{path}: expected array, got {_kind(value)}")
                return
            item = self.items(schema)
            for i, sub in enumerate(value):
                self._walk(sub, item, (*at, i), errors, unknown)
        elif typ == "string":
            _check_string(value, fmt, path, errors)
        elif typ == "integer":
            if type(value) is not int:
                errors.append(f"{path}: expected integer, got {_kind(value)}")
            elif fmt in _INT_RANGES and not _INT_RANGES[fmt][0] <= value <= _INT_RANGES[fmt][1]:
                errors.append(f"{path}: {value} overflows {fmt}")
        elif typ == "number":
            if not isinstance(value, int | float) or isinstance(value, bool):
                errors.append(f"{path}: expected number, got {_kind(value)}")
        elif typ == "boolean" and not isinstance(value, bool):
            errors.append(f"{path}: expected boolean, got {_kind(value)}")


def format_path(at: Path_) -> str:
    out = ""
    for tok in at:
        out += f"[{tok}]" if isinstance(tok, int) else (f".{tok}" if out else tok)
    return out


def drop(obj: Any, at: Path_) -> None:
    """Remove the field at `at` (the decoder's dropping of unknown fields)."""
    for tok in at[:-1]:
        obj = obj[tok]
    if isinstance(obj, dict):
        obj.pop(at[-1], None)


def _check_string(value: object, fmt: object, path: str, errors: list[str]) -> None:
    if not isinstance(value, str):
        errors.append(f"{path}: expected string, got {_kind(value)}")
    elif fmt == "date-time" and not _DATE_TIME.match(value):
        errors.append(f"{path}: {value!r} is not an RFC 3339 time")
    elif fmt == "byte":
        try:
            base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            errors.append(f"{path}: illegal base64 data")


def _kind(value: object) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    names: dict[type, str] = {str: "string", list: "array", dict: "object"}
    return names.get(type(value), type(value).__name__)


@functools.cache
def load() -> Schemas:
    return Schemas([json.loads((FIXTURES / name).read_text()) for name in DOCUMENTS])
