"""Values formatted as Go's fmt prints them, for messages that must read as the kubelet's."""

from __future__ import annotations

from collections.abc import Iterable


def go_quote(text: str) -> str:
    """Go's %q of a string (strconv.Quote) for the printable and common control characters."""
    out = ['"']
    for ch in text:
        if ch == '"' or ch == "\\":
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif ch.isprintable():
            out.append(ch)
        elif ord(ch) < 0x100:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) < 0x10000:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    out.append('"')
    return "".join(out)


def go_list(items: Iterable[object]) -> str:
    """Go's %v of a []string: [a b c]."""
    return "[" + " ".join(str(i) for i in items) + "]"
