"""Hostname, domain and the kubelet-managed /etc/hosts (upstream kubelet_pods.go)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from minikubelet.base.podview import PodView
from minikubelet.worker.hosts import (
    HostAlias,
    HostnameError,
    host_aliases,
    hosts_content,
    kernel_hostname,
    managed_hosts_content,
    pod_hostname_and_domain,
    sandbox_hostname,
    should_mount_hosts_file,
    write_hosts_file,
)

LOCALHOST_BLOCK = (
    "# Kubernetes-managed hosts file.\n"
    "127.0.0.1\tlocalhost\n"
    "::1\tlocalhost ip6-localhost ip6-loopback\n"
    "fe00::0\tip6-localnet\n"
    "fe00::0\tip6-mcastprefix\n"
    "fe00::1\tip6-allnodes\n"
    "fe00::2\tip6-allrouters\n"
)


def pod(name: str = "web", mounts: list[dict[str, Any]] | None = None, **spec: Any) -> PodView:
    container = {"name": "c", "image": "i", "volumeMounts": mounts or []}
    return PodView.of({"metadata": {"name": name, "namespace": "prod", "uid": "u1"},
                       "spec": {"containers": [container], **spec}})


def test_hosts_file_without_a_domain() -> None:
    assert managed_hosts_content(["10.88.0.5"], "web", "", []) == LOCALHOST_BLOCK + "10.88.0.5\tweb\n"


def test_hosts_file_with_a_domain_names_every_pod_ip() -> None:
    content = managed_hosts_content(["10.88.0.5", "fd00::5"], "web", "sub.prod.svc.cluster.local", [])
    assert content == LOCALHOST_BLOCK + (
        "10.88.0.5\tweb.sub.prod.svc.cluster.local\tweb\n"
        "fd00::5\tweb.sub.prod.svc.cluster.local\tweb\n"
    )


def test_host_aliases_follow_a_blank_line_and_a_comment() -> None:
    aliases = [HostAlias("127.0.0.1", ("foo.local", "bar.local")), HostAlias("10.1.2.3", ("foo.remote",))]
    assert managed_hosts_content(["10.88.0.5"], "web", "", aliases) == LOCALHOST_BLOCK + (
        "10.88.0.5\tweb\n"
        "\n"
        "# Entries added by HostAliases.\n"
        "127.0.0.1\tfoo.local\tbar.local\n"
        "10.1.2.3\tfoo.remote\n"
    )


def test_host_network_pods_get_the_nodes_file_and_their_aliases() -> None:
    view = pod(hostNetwork=True, hostAliases=[{"ip": "10.1.2.3", "hostnames": ["foo.remote"]}])
    content = hosts_content(view, (), "cluster.local", "127.0.0.1 localhost\n192.0.2.7 node1\n")
    assert content == (
        "# Kubernetes-managed hosts file (host network).\n"
        "127.0.0.1 localhost\n192.0.2.7 node1\n"
        "\n# Entries added by HostAliases.\n10.1.2.3\tfoo.remote\n"
    )


def test_hosts_content_from_the_pod() -> None:
    view = pod(hostname="db-0", subdomain="db", hostAliases=[{"ip": "10.1.2.3", "hostnames": ["a", "b"]}])
    assert host_aliases(view) == (HostAlias("10.1.2.3", ("a", "b")),)
    assert hosts_content(view, ("10.88.0.5",), "cluster.local", "ignored") == LOCALHOST_BLOCK + (
        "10.88.0.5\tdb-0.db.prod.svc.cluster.local\tdb-0\n"
        "\n# Entries added by HostAliases.\n10.1.2.3\ta\tb\n"
    )


def test_hostname_and_domain() -> None:
    assert pod_hostname_and_domain(pod(), "cluster.local") == ("web", "")
    assert pod_hostname_and_domain(pod(hostname="h"), "cluster.local") == ("h", "")
    assert pod_hostname_and_domain(pod(hostname="h", subdomain="s"), "cluster.local") == ("h", "s.prod.svc.cluster.local")
    assert pod_hostname_and_domain(pod(subdomain="s"), "") == ("web", "s.prod.svc.")
    assert pod_hostname_and_domain(pod(hostnameOverride="my.host", subdomain="s"), "cluster.local") == ("my.host", "")


def test_long_pod_names_are_truncated_to_63_without_a_trailing_dash_or_dot() -> None:
    name = "a" * 61 + "-.b"
    assert pod_hostname_and_domain(pod(name), "") == ("a" * 61, "")
    assert pod_hostname_and_domain(pod("x" * 70), "") == ("x" * 63, "")


@pytest.mark.parametrize(("spec", "message"), [
    ({"hostname": "Bad_Host"}, 'pod Hostname "Bad_Host" is not a valid DNS label: '),
    ({"subdomain": "a.b"}, 'pod Subdomain "a.b" is not a valid DNS label: '),
    ({"hostnameOverride": "UPPER"}, 'pod HostnameOverride "UPPER" is not a valid DNS subdomain: '),
])
def test_invalid_names_are_refused(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(HostnameError) as info:
        pod_hostname_and_domain(pod(**spec), "cluster.local")
    assert str(info.value).startswith(message)


def test_kernel_hostname_is_the_fqdn_only_when_asked_and_there_is_a_domain() -> None:
    assert kernel_hostname("web", "s.prod.svc.cluster.local", False) == "web"
    assert kernel_hostname("web", "", True) == "web"
    assert kernel_hostname("web", "s.prod.svc.cluster.local", True) == "web.s.prod.svc.cluster.local"
    domain = "s.prod.svc.cluster.local"  # 24 characters
    assert kernel_hostname("h" * 39, domain, True) == "h" * 39 + "." + domain  # 64: the most allowed


def test_an_fqdn_over_64_characters_is_refused_with_upstreams_message() -> None:
    with pytest.raises(HostnameError) as info:
        kernel_hostname("h" * 40, "s.prod.svc.cluster.local", True)
    assert str(info.value) == (
        f"failed to construct FQDN from pod hostname and cluster domain, FQDN {'h' * 40}.s.prod.svc.cluster.local "
        "is too long (64 characters is the max, 65 characters requested)"
    )


def test_sandbox_hostname() -> None:
    assert sandbox_hostname(pod(subdomain="s", setHostnameAsFQDN=True), "cluster.local") == "web.s.prod.svc.cluster.local"
    assert sandbox_hostname(pod(subdomain="s"), "cluster.local") == "web"
    assert sandbox_hostname(pod(hostNetwork=True, hostname="h"), "cluster.local") == ""


def test_the_hosts_file_is_mounted_with_a_pod_ip_or_host_network_unless_the_container_mounts_one() -> None:
    view = pod()
    c = view.container("c")
    assert should_mount_hosts_file(view, ("10.88.0.5",), c)
    assert not should_mount_hosts_file(view, (), c)
    host_net = pod(hostNetwork=True)
    assert should_mount_hosts_file(host_net, (), host_net.container("c"))
    own = pod(mounts=[{"name": "v", "mountPath": "/etc/hosts"}])
    assert not should_mount_hosts_file(own, ("10.88.0.5",), own.container("c"))


def test_write_hosts_file_keeps_the_inode(tmp_path: Path) -> None:
    path = write_hosts_file(str(tmp_path / "pods" / "u1"), "one\n")
    assert path == str(tmp_path / "pods" / "u1" / "etc-hosts")
    inode = os.stat(path).st_ino
    write_hosts_file(str(tmp_path / "pods" / "u1"), "two\n")
    assert Path(path).read_text() == "two\n"
    assert os.stat(path).st_ino == inode
    assert os.stat(path).st_mode & 0o777 == 0o644
