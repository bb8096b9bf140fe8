"""scripts/cri_proto_subset.py, which cuts CRI's api.proto to the RPCs the agent calls: what it keeps, and that
the committed cri/remote/v1/api.proto is what it makes of itself."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

from cri.remote.v1 import api_grpc, api_pb2

ROOT = Path(__file__).resolve().parents[4]


def _subset_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("cri_proto_subset", ROOT / "scripts" / "cri_proto_subset.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


PROTO = """syntax = "proto3";

package runtime.v1;

service RuntimeService {
    rpc Version(VersionRequest) returns (VersionResponse) {}
    rpc Status(StatusRequest) returns (StatusResponse) {}
}

message VersionRequest {
    string version = 1;
}

message VersionResponse {
    string version = 1;
    Kind kind = 2;
}

message StatusRequest {
    bool verbose = 1;
}

message StatusResponse {
    RuntimeStatus status = 1;
    map<string, string> info = 2;
}

message RuntimeStatus {
    repeated RuntimeCondition conditions = 1;
}

message RuntimeCondition {
    string type = 1;
    message Inner {
        bool ok = 1;
    }
}

enum Kind {
    A = 0;
}
"""


def _names(text: str) -> list[str]:
    return re.findall(r"^(?:message|enum) (\w+)", text, re.M)


def test_it_keeps_the_rpcs_asked_and_what_they_reach() -> None:
    cut = _subset_module().subset(PROTO, ["RuntimeService.Version"])
    assert "rpc Version(" in cut and "rpc Status(" not in cut
    assert _names(cut) == ["VersionRequest", "VersionResponse", "Kind"]
    everything = _subset_module().subset(PROTO, ["RuntimeService.Version", "RuntimeService.Status"])
    assert _names(everything) == _names(PROTO)
    assert "    message Inner {\n        bool ok = 1;\n    }" in everything  # nested definitions stay whole


def test_an_unknown_rpc_or_service_is_refused() -> None:
    with pytest.raises(SystemExit, match="no RPC Nope"):
        _subset_module().subset(PROTO, ["RuntimeService.Nope"])
    with pytest.raises(SystemExit, match="no service ImageService"):
        _subset_module().subset(PROTO, ["ImageService.ListImages"])


def test_the_committed_proto_is_its_own_cut_and_matches_the_stubs() -> None:
    committed = (ROOT / "cri" / "remote" / "v1" / "api.proto").read_text()
    rpcs = [f"{service}.{rpc}" for service, body in re.findall(r"^service (\w+) \{(.*?)^\}", committed, re.M | re.S)
            for rpc in re.findall(r"rpc (\w+)\(", body)]
    body = committed[committed.index("syntax"):]
    assert _subset_module().subset(body, rpcs).split("syntax", 1)[1] == body.split("syntax", 1)[1]
    # the generated modules hold exactly the proto's messages and RPCs
    assert set(_names(committed)) == (set(api_pb2.DESCRIPTOR.message_types_by_name)
                                      | set(api_pb2.DESCRIPTOR.enum_types_by_name))
    stub_rpcs = {name for name in vars(api_grpc.RuntimeServiceBase) | vars(api_grpc.ImageServiceBase)
                 if not name.startswith("_")}
    assert stub_rpcs == {r.split(".")[1] for r in rpcs}
