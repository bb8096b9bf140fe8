"""scripts/images/cluster-dns/server.py, the test DNS server standing in for CoreDNS: its zone file and answers."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from types import ModuleType

import dns.flags
import dns.message
import dns.name
import dns.rcode
import dns.rdatatype
import pytest

SERVER = Path(__file__).resolve().parents[3] / "scripts" / "images" / "cluster-dns" / "server.py"
DOMAIN = dns.name.from_text("cluster.local")


@pytest.fixture(scope="module")
def server() -> ModuleType:
    spec = importlib.util.spec_from_file_location("cluster_dns_server", SERVER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def ask(server: ModuleType, zone: Path, name: str, rdtype: str = "A") -> dns.message.Message:
    query = dns.message.make_query(name, rdtype)
    response, _ = server.answer(query, server.load_zone(str(zone)), DOMAIN)
    assert isinstance(response, dns.message.Message)
    return dns.message.from_wire(response.to_wire())  # what a client parses


@pytest.fixture
def zone(tmp_path: Path) -> Path:
    path = tmp_path / "hosts"
    path.write_text("# Services\n10.96.0.11 web.default.svc.cluster.local  # web\n"
                    "10.96.0.12 db.default.svc.cluster.local db.alias.svc.cluster.local\n"
                    "fd00::12 db.default.svc.cluster.local\n\n")
    return path


def addresses(response: dns.message.Message) -> list[str]:
    return [rd.to_text() for rrset in response.answer for rd in rrset]


def test_a_name_in_the_zone_is_answered_with_authority(server: ModuleType, zone: Path) -> None:
    response = ask(server, zone, "web.default.svc.cluster.local.")
    assert response.rcode() == dns.rcode.NOERROR and response.flags & dns.flags.AA
    assert addresses(response) == ["10.96.0.11"]
    assert addresses(ask(server, zone, "WEB.Default.svc.cluster.local.")) == ["10.96.0.11"]
    assert addresses(ask(server, zone, "db.alias.svc.cluster.local.")) == ["10.96.0.12"]
    assert addresses(ask(server, zone, "db.default.svc.cluster.local.", "AAAA")) == ["fd00::12"]


def test_a_type_the_name_lacks_is_an_empty_answer_not_an_error(server: ModuleType, zone: Path) -> None:
    response = ask(server, zone, "web.default.svc.cluster.local.", "AAAA")
    assert (response.rcode(), response.answer) == (dns.rcode.NOERROR, [])


def test_other_names_in_the_domain_do_not_exist_and_names_outside_are_refused(server: ModuleType,
                                                                              zone: Path) -> None:
    # NXDOMAIN lets a resolver go on to its next search path (web.default.default.svc... -> web.default.svc...)
    missing = ask(server, zone, "web.default.default.svc.cluster.local.")
    assert missing.rcode() == dns.rcode.NXDOMAIN and missing.flags & dns.flags.AA
    assert ask(server, zone, "example.com.").rcode() == dns.rcode.REFUSED


def test_the_zone_follows_a_configmap_style_swap_and_survives_a_bad_edit(server: ModuleType, tmp_path: Path) -> None:
    # a ConfigMap volume: hosts -> ..data/hosts, ..data -> a timestamped dir swapped by rename
    first, second, third = (tmp_path / n for n in ("..2026_1", "..2026_2", "..2026_3"))
    for d, text in ((first, "10.96.0.11 web.default.svc.cluster.local\n"),
                    (second, "10.96.0.13 web.default.svc.cluster.local\n"), (third, "not-an-ip web\n")):
        d.mkdir()
        (d / "hosts").write_text(text)
    (tmp_path / "..data").symlink_to(first.name)
    (tmp_path / "hosts").symlink_to("..data/hosts")
    zone = server.Zone(str(tmp_path / "hosts"))
    web = dns.name.from_text("web.default.svc.cluster.local")
    assert zone.current()[web] == [(dns.rdatatype.A, "10.96.0.11")]
    for target in (second, third):
        (tmp_path / "..data.tmp").symlink_to(target.name)
        os.rename(tmp_path / "..data.tmp", tmp_path / "..data")
        assert zone.current()[web] == [(dns.rdatatype.A, "10.96.0.13")]  # the bad edit keeps the last zone
