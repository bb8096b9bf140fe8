"""Field errors as apimachinery's field.Error prints them ("<path>: <type>: <value>: <detail>")."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass

# A manifest may hold megabytes in one field; an error line must stay readable and bounded.
MAX_VALUE_CHARS = 256


@dataclass(frozen=True)
class FieldError:
    path: str
    message: str
    reason: str = "FieldValueInvalid"

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


def _truncate(text: str) -> str:
    if len(text) <= MAX_VALUE_CHARS:
        return text
    return f"{text[:MAX_VALUE_CHARS]}...(truncated, {len(text)} characters)"


def key_path(path: str, key: str) -> str:
    """path[key], the key escaped and cut like a value so an error stays one bounded line."""
    shown = json.dumps(_truncate(key), ensure_ascii=False)[1:-1]
    return f"{path}[{shown}]"


def quote(value: object) -> str:
    """Go prints strings with %q, numbers and booleans with %v, anything else as JSON."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isfinite(value) and value == int(value) and abs(value) < 1e21:
            return str(int(value))
        return repr(value)
    if isinstance(value, str):
        return json.dumps(_truncate(value), ensure_ascii=False)
    try:
        rendered = json.dumps(value, ensure_ascii=False, default=str)
    except (ValueError, RecursionError):
        rendered = type(value).__name__
    return _truncate(rendered)


def invalid(path: str, value: object, detail: str) -> FieldError:
    return FieldError(path, f"Invalid value: {quote(value)}: {detail}", "FieldValueInvalid")


def required(path: str, detail: str = "") -> FieldError:
    return FieldError(path, "Required value" + (f": {detail}" if detail else ""), "FieldValueRequired")


def not_supported(path: str, value: object, supported: Iterable[str]) -> FieldError:
    choices = ", ".join(json.dumps(s) for s in supported)
    return FieldError(path, f"Unsupported value: {quote(value)}: supported values: {choices}", "FieldValueNotSupported")


def duplicate(path: str, value: object) -> FieldError:
    return FieldError(path, f"Duplicate value: {quote(value)}", "FieldValueDuplicate")


def forbidden(path: str, detail: str) -> FieldError:
    return FieldError(path, f"Forbidden: {detail}", "FieldValueForbidden")


def not_found(path: str, value: object) -> FieldError:
    return FieldError(path, f"Not found: {quote(value)}", "FieldValueNotFound")


def too_long(path: str, max_bytes: int) -> FieldError:
    return FieldError(path, f"Too long: may not be more than {max_bytes} bytes", "FieldValueTooLong")


def wrong_type(path: str, value: object, expected: str) -> FieldError:
    return FieldError(path, f"Invalid value: {quote(value)}: must be {expected}", "FieldValueTypeInvalid")


def format_errors(errors: Iterable[FieldError]) -> str:
    """"[path: message, path: message]" as in an API server Invalid status."""
    return "[" + ", ".join(str(e) for e in errors) + "]"
