"""Cut a comment-stripped CRI api.proto down to the RPCs the agent calls and the messages and enums they reach.

    python scripts/cri_proto_subset.py IN.proto OUT.proto Service.Rpc [Service.Rpc ...]

Used by scripts/gen-cri-api. The wire does not change: every message kept keeps all its fields (so each type a
field names is kept too), and the package, message and method names stay upstream's. A service keeps only the
listed RPCs; a message or enum no kept RPC reaches is dropped, so its Python class is never built at import.
Top-level definitions only are parsed (the file's nested enums stay inside their message).
"""

from __future__ import annotations

import re
import sys

_HEADER = [
    "// Cut by scripts/gen-cri-api from k8s.io/cri-api v0.36.2 pkg/apis/runtime/v1/api.proto (Copyright The",
    "// Kubernetes Authors, Apache License 2.0): the RPCs the agent calls and the messages and enums they reach,",
    "// comments dropped. Regenerate rather than edit.",
]
_DEF = re.compile(r"^(message|enum|service)\s+(\w+)\s*\{")
_RPC = re.compile(r"^\s*rpc\s+(\w+)\s*\(")
_WORD = re.compile(r"[A-Za-z_]\w*")


def blocks(lines: list[str]) -> tuple[list[str], list[tuple[str, str, list[str]]]]:
    """The header lines (syntax, package, options) and each top-level definition as (kind, name, lines)."""
    header: list[str] = []
    defs: list[tuple[str, str, list[str]]] = []
    i = 0
    while i < len(lines):
        m = _DEF.match(lines[i])
        if not m:
            if not defs:
                header.append(lines[i])
            elif lines[i].strip():
                raise SystemExit(f"line {i + 1}: unexpected text between definitions: {lines[i]!r}")
            i += 1
            continue
        depth, body = 0, []
        while True:
            depth += lines[i].count("{") - lines[i].count("}")
            body.append(lines[i])
            i += 1
            if depth == 0:
                break
        defs.append((m.group(1), m.group(2), body))
    return header, defs


def subset(text: str, wanted: list[str]) -> str:
    header, defs = blocks(text.splitlines())
    by_name = {name: (kind, body) for kind, name, body in defs}
    rpcs: dict[str, set[str]] = {}
    for item in wanted:
        service, _, rpc = item.partition(".")
        rpcs.setdefault(service, set()).add(rpc)
    out_services: dict[str, list[str]] = {}
    roots: set[str] = set()
    for service, names in rpcs.items():
        kind, body = by_name.get(service, ("", []))
        if kind != "service":
            raise SystemExit(f"no service {service} in the proto")
        kept, found = [], set()
        for line in body:
            m = _RPC.match(line)
            if m is None:
                kept.append(line)
            elif m.group(1) in names:
                kept.append(line)
                found.add(m.group(1))
                roots.update(w for w in _WORD.findall(line.split("(", 1)[1]) if w in by_name)
        if found != names:
            raise SystemExit(f"{service} has no RPC {', '.join(sorted(names - found))}")
        out_services[service] = kept
    reached: set[str] = set()
    todo = sorted(roots)
    while todo:
        name = todo.pop()
        if name in reached:
            continue
        reached.add(name)
        todo.extend(w for line in by_name[name][1] for w in _WORD.findall(line)
                    if w in by_name and by_name[w][0] != "service" and w not in reached)
    out = [*_HEADER, *header]
    for kind, name, body in defs:
        if kind == "service" and name in out_services:
            out.extend([*out_services[name], ""])
        elif kind != "service" and name in reached:
            out.extend([*body, ""])
    return "\n".join(out).rstrip("\n") + "\n"


def main(argv: list[str]) -> None:
    if len(argv) < 3:
        raise SystemExit(__doc__)
    with open(argv[0], encoding="utf-8") as f:
        text = f.read()
    with open(argv[1], "w", encoding="utf-8") as f:
        f.write(subset(text, argv[2:]))


if __name__ == "__main__":
    main(sys.argv[1:])
