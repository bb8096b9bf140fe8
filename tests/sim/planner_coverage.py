"""Which lines and line-to-line arcs of the planner (minikubelet/worker/planner.py) the simulator's runs execute:
a sys.settrace tracer limited to that file (the project carries no coverage package). Its branches are its
arcs: a branch never taken shows as a line never run, or as an arc missing between two lines that ran."""

from __future__ import annotations

import inspect
import sys
import types
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from minikubelet.worker import planner

PATH = planner.__file__


def _code_objects(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            yield from _code_objects(c)


def executable_lines() -> set[int]:
    with open(PATH, encoding="utf-8") as f:
        module = compile(f.read(), PATH, "exec")
    lines: set[int] = set()
    for code in _code_objects(module):
        if not code.co_flags & inspect.CO_OPTIMIZED:
            continue  # the module's and the classes' bodies run at import, before any run
        lines.update(line for _s, _e, line in code.co_lines() if line is not None and line != code.co_firstlineno)
    return lines


@dataclass
class PlannerCoverage:
    lines: set[int] = field(default_factory=set)
    arcs: set[tuple[int, int]] = field(default_factory=set)

    def _local(self, frame: types.FrameType, event: str, _arg: Any) -> Any:
        if event == "line":
            self.lines.add(frame.f_lineno)
            prev = self._last.get(id(frame))
            if prev is not None:
                self.arcs.add((prev, frame.f_lineno))
            self._last[id(frame)] = frame.f_lineno
        elif event == "return":
            self._last.pop(id(frame), None)
        return self._local

    def _global(self, frame: types.FrameType, event: str, _arg: Any) -> Any:
        if event == "call" and frame.f_code.co_filename == PATH:
            return self._local
        return None

    def __enter__(self) -> PlannerCoverage:
        self._last: dict[int, int] = {}
        sys.settrace(self._global)
        return self

    def __exit__(self, *_exc: object) -> None:
        sys.settrace(None)

    def report(self) -> str:
        wanted = executable_lines()
        missed = sorted(wanted - self.lines)
        return (f"planner.py: {len(wanted & self.lines)} of {len(wanted)} lines run "
                f"({100 * len(wanted & self.lines) / max(len(wanted), 1):.0f} %), {len(self.arcs)} arcs; "
                f"never run: {_ranges(missed)}")


def _ranges(lines: list[int]) -> str:
    out: list[str] = []
    for n in lines:
        if out and out[-1].split("-")[-1] == str(n - 1):
            out[-1] = out[-1].split("-")[0] + f"-{n}"
        else:
            out.append(str(n))
    return ", ".join(out) or "none"
