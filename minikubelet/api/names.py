"""apimachinery's string rules (k8s.io/apimachinery/pkg/api/validate/content, util/validation).

Each returns the list of messages upstream returns (empty when valid); lengths are in bytes, as in Go.
"""

from __future__ import annotations

import ipaddress
import re


def _regex_error(msg: str, regex: str, *examples: str) -> str:
    if not examples:
        return f"{msg} (regex used for validation is '{regex}')"
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{msg} (e.g. {shown}regex used for validation is '{regex}')"


def _max_len(n: int) -> str:
    return f"must be no more than {n} bytes"


def _blen(value: str) -> int:
    return len(value.encode("utf-8", "surrogatepass"))


DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_SUBDOMAIN_FMT = DNS1123_LABEL_FMT + r"(\." + DNS1123_LABEL_FMT + ")*"
_DNS1123_LABEL = re.compile(DNS1123_LABEL_FMT)
_DNS1123_SUBDOMAIN = re.compile(DNS1123_SUBDOMAIN_FMT)
_LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
              "start and end with an alphanumeric character")
_SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                  "and must start and end with an alphanumeric character")


def dns1123_label_errors(value: str) -> list[str]:
    errs = []
    if _blen(value) > 63:
        errs.append(_max_len(63))
    if not _DNS1123_LABEL.fullmatch(value):
        if _DNS1123_SUBDOMAIN.fullmatch(value):
            errs.append("must not contain dots")
        else:
            errs.append(_regex_error(_LABEL_MSG, DNS1123_LABEL_FMT, "my-name", "123-abc"))
    return errs


def dns1123_subdomain_errors(value: str) -> list[str]:
    errs = []
    if _blen(value) > 253:
        errs.append(_max_len(253))
    if not _DNS1123_SUBDOMAIN.fullmatch(value):
        errs.append(_regex_error(_SUBDOMAIN_MSG, DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


_LABEL_KEY_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_KEY = re.compile(_LABEL_KEY_FMT)
_LABEL_KEY_MSG = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
                  "alphanumeric character")
_LABEL_VALUE_FMT = f"({_LABEL_KEY_FMT})?"
_LABEL_VALUE = re.compile(_LABEL_VALUE_FMT)
_LABEL_VALUE_MSG = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
                    "and must start and end with an alphanumeric character")


def qualified_name_errors(value: str) -> list[str]:
    """IsQualifiedName (= IsLabelKey): an optional DNS subdomain prefix and '/', then a name part."""
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + m for m in dns1123_subdomain_errors(prefix))
    else:
        return ["a valid label key " + _regex_error(_LABEL_KEY_MSG, _LABEL_KEY_FMT, "MyName", "my.name", "123-abc")
                + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    if not name:
        errs.append("name part must be non-empty")
    elif _blen(name) > 63:
        errs.append("name part " + _max_len(63))
    if not _LABEL_KEY.fullmatch(name):
        errs.append("name part " + _regex_error(_LABEL_KEY_MSG, _LABEL_KEY_FMT, "MyName", "my.name", "123-abc"))
    return errs


def label_value_errors(value: str) -> list[str]:
    errs = []
    if _blen(value) > 63:
        errs.append(_max_len(63))
    if not _LABEL_VALUE.fullmatch(value):
        errs.append(_regex_error(_LABEL_VALUE_MSG, _LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return errs


def port_name_errors(value: str) -> list[str]:
    """IsValidPortName (IANA_SVC_NAME)."""
    errs = []
    if _blen(value) > 15:
        errs.append(_max_len(15))
    if not re.fullmatch("[-a-z0-9]+", value):
        errs.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if not re.search("[a-z]", value):
        errs.append("must contain at least one letter (a-z)")
    if "--" in value:
        errs.append("must not contain consecutive hyphens")
    if value.startswith("-") or value.endswith("-"):
        errs.append("must not begin or end with a hyphen")
    return errs


_RELAXED_ENV_NAME = re.compile("[ -<>-~]+")  # printable ASCII except '='


def env_name_errors(value: str) -> list[str]:
    """IsRelaxedEnvVarName: any printable ASCII except '='."""
    if not value:
        return ["environment variable name must be non-empty"]
    if not _RELAXED_ENV_NAME.fullmatch(value):
        return ["a valid environment variable name must consist only of printable ASCII characters other than '='"]
    return []


_SLOPPY_V4 = re.compile(r"[0-9]{1,3}(\.[0-9]{1,3}){3}")


def ip_sloppy_errors(value: str) -> list[str]:
    """netutils.ParseIPSloppy: IPv4 (leading zeros read as decimal) or IPv6 without a zone."""
    if _SLOPPY_V4.fullmatch(value):
        if all(int(octet) <= 255 for octet in value.split(".")):
            return []
    elif ":" in value and "%" not in value:
        try:
            ipaddress.IPv6Address(value)
            return []
        except ValueError:
            pass
    return ["must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"]


def inclusive_range(low: int, high: int) -> str:
    return f"must be between {low} and {high}, inclusive"
