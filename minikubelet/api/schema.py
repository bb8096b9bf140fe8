"""The JSON types of a Pod manifest, checked against the API's OpenAPI schema (api/pod_types.py).

The API server decodes a manifest into Go structs before it validates anything: a value of the
wrong type, an integer out of its int32/int64 range, a malformed quantity or timestamp is an error
there, never coerced. Fields the schema does not know are dropped with a strict-field-validation
warning (`unknown field "spec.containers[0].comand"`). JSON null means "absent" for every field.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass, field
from typing import Any

from minikubelet.api.field import FieldError, invalid, key_path, wrong_type
from minikubelet.api.pod_types import ROOT, TYPES
from minikubelet.base.quantity import QuantityError, parse_quantity

Token = str | int | tuple[str]  # field name, list index, map key
_INT_RANGES = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}
_DATE_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})")
_QUANTITY_MSG = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"


def format_path(tokens: tuple[Token, ...] | list[Token]) -> str:
    out: list[str] = []
    for tok in tokens:
        if isinstance(tok, int):
            out.append(f"[{tok}]")
        elif isinstance(tok, tuple):
            out.append(key_path("", tok[0]))
        else:
            out.append(f".{tok}" if out else tok)
    return "".join(out) or "<root>"


@dataclass
class TypeReport:
    errors: list[FieldError] = field(default_factory=list)
    unknown_fields: list[str] = field(default_factory=list)
    bad_paths: list[tuple[Token, ...]] = field(default_factory=list)

    @property
    def warnings(self) -> list[str]:
        """The API server's strict field validation warnings."""
        return [f'unknown field "{p}"' for p in self.unknown_fields]


class _Walker:
    def __init__(self) -> None:
        self.report = TypeReport()
        self.stack: list[Token] = []

    def bad(self, err: FieldError) -> None:
        self.report.errors.append(err)
        self.report.bad_paths.append(tuple(self.stack))

    def path(self) -> str:
        return format_path(self.stack)

    def check(self, value: Any, spec: str) -> None:
        if value is None or spec == "any":
            return
        if spec.startswith("[]"):
            if not isinstance(value, list):
                self.bad(wrong_type(self.path(), value, "a list"))
                return
            item_spec = spec[2:]
            for i, item in enumerate(value):
                self.stack.append(i)
                self.check(item, item_spec)
                self.stack.pop()
        elif spec.startswith("{}"):
            if not isinstance(value, dict):
                self.bad(wrong_type(self.path(), value, "an object"))
                return
            item_spec = spec[2:]
            for key, item in value.items():
                self.stack.append((key,))
                self.check(item, item_spec)
                self.stack.pop()
        elif spec in TYPES:
            self.obj(value, TYPES[spec])
        else:
            self.scalar(value, spec)

    def obj(self, value: Any, fields: dict[str, str]) -> None:
        if not isinstance(value, dict):
            self.bad(wrong_type(self.path(), value, "an object"))
            return
        for key, item in value.items():
            spec = fields.get(key)
            if type(item) is str and spec == "string":
                continue  # most leaves: no call, no path
            self.stack.append(key)
            if spec is None:
                self.report.unknown_fields.append(self.path())
            else:
                self.check(item, spec)
            self.stack.pop()

    def scalar(self, value: Any, spec: str) -> None:
        is_int = isinstance(value, int) and not isinstance(value, bool)
        if spec == "string":
            if not isinstance(value, str):
                self.bad(wrong_type(self.path(), value, "a string"))
        elif spec == "boolean":
            if not isinstance(value, bool):
                self.bad(wrong_type(self.path(), value, "a boolean"))
        elif spec in _INT_RANGES:
            self.integer(value, spec, is_int)
        elif spec == "number":
            if not (is_int or isinstance(value, float)):
                self.bad(wrong_type(self.path(), value, "a number"))
        elif spec == "IntOrString":
            if is_int:
                self.integer(value, "int32", is_int)
            elif not isinstance(value, str):
                self.bad(wrong_type(self.path(), value, "an integer or a string"))
        elif spec == "Quantity":
            self.quantity(value, is_int)
        elif spec == "date-time":
            if not isinstance(value, str):
                self.bad(wrong_type(self.path(), value, "a string"))
            elif not _DATE_TIME.fullmatch(value):
                self.bad(invalid(self.path(), value, "must be an RFC 3339 date-time (e.g. 2006-01-02T15:04:05Z)"))
        elif spec == "byte":
            if not isinstance(value, str):
                self.bad(wrong_type(self.path(), value, "a string"))
            else:
                try:
                    base64.b64decode(value, validate=True)
                except (binascii.Error, ValueError):
                    self.bad(invalid(self.path(), "<value omitted>", "must be base64-encoded"))

    def integer(self, value: Any, spec: str, is_int: bool) -> None:
        low, high = _INT_RANGES[spec]
        if not is_int:
            self.bad(wrong_type(self.path(), value, "an integer"))
        elif not low <= value <= high:
            self.bad(wrong_type(self.path(), value, f"a {spec[3:]}-bit integer, between {low} and {high}"))

    def quantity(self, value: Any, is_int: bool) -> None:
        if not (is_int or isinstance(value, str | float)):
            self.bad(wrong_type(self.path(), value, "a quantity (a string or a number)"))
            return
        try:
            parse_quantity(value)
        except QuantityError as exc:
            bad_syntax = isinstance(value, str) and "out of range" not in str(exc)
            self.bad(invalid(self.path(), value, _QUANTITY_MSG if bad_syntax else "must be a finite quantity in range"))


def check_types(pod: object) -> TypeReport:
    """Type errors and unknown fields of a Pod manifest as written (before defaulting)."""
    walker = _Walker()
    if pod is None:
        walker.bad(wrong_type("<root>", pod, "an object"))
    else:
        walker.check(pod, ROOT)
    return walker.report


def covered(path: str, bad: set[str]) -> bool:
    """Whether `path` is a reported bad value or lies inside one."""
    if path in bad:
        return True
    return any(path.startswith(b) and path[len(b)] in ".[" for b in bad if len(path) > len(b))


def prune(pod: Any, paths: list[tuple[Token, ...]]) -> None:
    """Remove the values at `paths` (in place), so later rules see them as absent."""
    for tokens in sorted(paths, key=len, reverse=True):
        if not tokens:
            continue
        target = pod
        for tok in tokens[:-1]:
            target = _step(target, tok)
            if target is None:
                break
        else:
            last = tokens[-1]
            key = last[0] if isinstance(last, tuple) else last
            if isinstance(target, dict) and isinstance(key, str):
                target.pop(key, None)
            elif isinstance(target, list) and isinstance(key, int) and key < len(target):
                target[key] = None


def _step(target: Any, tok: Token) -> Any:
    key = tok[0] if isinstance(tok, tuple) else tok
    if isinstance(target, dict) and isinstance(key, str):
        return target.get(key)
    if isinstance(target, list) and isinstance(key, int) and key < len(target):
        return target[key]
    return None
