"""Command-line flags, named as the kubelet's, mapped onto KubeletConfig attribute names."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from minikubelet.config.kubelet_config import flag_fields

# Flags come from the one settings table in kubelet_config; values stay raw here and load_config
# parses and validates them exactly like file values, so an error names the flag and a flag that is
# not given never overrides the file.
_RUN_FLAGS = flag_fields()

# Go's strconv.ParseBool, which pflag's bool flags use.
_GO_BOOLS = {**dict.fromkeys(("1", "t", "T", "TRUE", "true", "True"), True),
             **dict.fromkeys(("0", "f", "F", "FALSE", "false", "False"), False)}


def _go_bool(text: str) -> bool:
    if text not in _GO_BOOLS:
        raise argparse.ArgumentTypeError(f"invalid boolean value {text!r} (true or false)")
    return _GO_BOOLS[text]


def build_parser(more_commands: Callable[[Any], None] | None = None) -> argparse.ArgumentParser:
    """`minikubelet run [flags]` and `minikubelet version`; `more_commands(subparsers)` adds the others."""
    parser = argparse.ArgumentParser(prog="minikubelet", description="A Kubernetes node agent.", allow_abbrev=False)
    sub = parser.add_subparsers(dest="command", required=True,
                                metavar="{run,version,join,reset,explain}" if more_commands else "{run,version}")
    run = sub.add_parser("run", help="Run the node agent.", allow_abbrev=False)
    run.add_argument("--config", default=None, help="KubeletConfiguration file (kubelet.config.k8s.io/v1beta1).")
    for flag, attr, kind, help_text in _RUN_FLAGS:
        names = [flag, "-v"] if flag == "--v" else [flag]
        if kind is bool:  # as pflag: `--flag` alone is true, `--flag=false` turns it off
            run.add_argument(*names, dest=attr, type=_go_bool, nargs="?", const=True, default=None,
                             metavar="true|false", help=help_text)
        else:
            run.add_argument(*names, dest=attr, type=kind, default=None, help=help_text)
    sub.add_parser("version", help="Print the version and exit.")
    if more_commands is not None:
        more_commands(sub)
    return parser


def flags_to_overrides(ns: argparse.Namespace) -> dict[str, Any]:
    """The flags the user gave, as {KubeletConfig attribute: raw value}; absent flags are left out."""
    out: dict[str, Any] = {}
    for _, attr, _, _ in _RUN_FLAGS:
        value = getattr(ns, attr, None)
        if value is not None:
            out[attr] = value
    return out
