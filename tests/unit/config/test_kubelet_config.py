"""KubeletConfiguration loading: defaults, file, flag precedence, validation messages; CLI flags."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from minikubelet.config.flags import build_parser, flags_to_overrides
from minikubelet.config.kubelet_config import (
    ConfigError,
    KubeletConfig,
    config_fields,
    load_config,
    parse_duration,
)

HEADER = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"


def write(tmp_path: Path, body: str, header: str = HEADER) -> str:
    path = tmp_path / "kubelet.yaml"
    path.write_text(header + body)
    return str(path)


def test_defaults_without_file_or_flags() -> None:
    config, warnings = load_config(None, {})
    assert warnings == []
    assert config == KubeletConfig()
    assert config.static_pod_path == "/etc/kubernetes/manifests"
    assert (config.file_check_frequency, config.http_check_frequency, config.sync_frequency) == (20.0, 20.0, 60.0)
    assert (config.address, config.read_only_port) == ("0.0.0.0", -1)
    assert (config.healthz_bind_address, config.healthz_port) == ("127.0.0.1", 10248)
    assert config.container_runtime_endpoint == "unix:///var/run/docker.sock"
    assert config.eviction_hard == {
        "memory.available": "100Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%", "imagefs.available": "15%",
    }
    assert config.cpu_cfs_quota_period == pytest.approx(0.1)
    assert config.runtime_request_timeout == 120.0
    assert config.enforce_node_allocatable == ("pods",)
    assert (config.max_pods, config.pod_pids_limit) == (110, -1)
    assert (config.container_log_max_size, config.container_log_max_files) == ("10Mi", 5)
    assert (config.container_log_max_workers, config.container_log_monitor_interval) == (1, 10.0)
    assert (config.pod_logs_dir, config.legacy_container_logs_dir) == ("/var/log/pods", "/var/log/containers")


def test_default_mappings_are_not_shared_between_instances() -> None:
    a, b = KubeletConfig(), KubeletConfig()
    assert a.eviction_hard is not b.eviction_hard


def test_file_values_are_parsed(tmp_path: Path) -> None:
    path = write(tmp_path, """
staticPodPath: /srv/manifests
fileCheckFrequency: 1m30s
syncFrequency: 500ms
readOnlyPort: 0
cgroupDriver: systemd
maxPods: 20
evictionHard: {memory.available: 200Mi}
kubeReserved: {cpu: 100m, memory: 1Gi}
featureGates: {SidecarContainers: true}
enforceNodeAllocatable: [pods, kube-reserved]
cpuCFSQuota: false
containerLogMaxSize: 100Ki
containerLogMaxFiles: 2
containerLogMaxWorkers: 3
containerLogMonitorInterval: 1m
legacyContainerLogsDir: /tmp/legacy
logging: {verbosity: 4}
""")
    config, warnings = load_config(path, {})
    assert warnings == []
    assert config.static_pod_path == "/srv/manifests"
    assert config.file_check_frequency == 90.0
    assert config.sync_frequency == pytest.approx(0.5)
    assert config.read_only_port == 0
    assert config.cgroup_driver == "systemd"
    assert config.max_pods == 20
    assert config.eviction_hard == {"memory.available": "200Mi"}
    assert config.kube_reserved == {"cpu": "100m", "memory": "1Gi"}
    assert config.feature_gates == {"SidecarContainers": True}
    assert config.enforce_node_allocatable == ("pods", "kube-reserved")
    assert config.cpu_cfs_quota is False
    assert (config.container_log_max_size, config.container_log_max_files) == ("100Ki", 2)
    assert (config.container_log_max_workers, config.container_log_monitor_interval) == (3, 60.0)
    assert config.legacy_container_logs_dir == "/tmp/legacy"
    assert config.verbosity == 4


def test_flags_override_file(tmp_path: Path) -> None:
    path = write(tmp_path, "readOnlyPort: 10999\nmaxPods: 5\nsyncFrequency: 2m\n")
    config, _ = load_config(path, {"read_only_port": 12000, "sync_frequency": "10s"})
    assert (config.read_only_port, config.max_pods, config.sync_frequency) == (12000, 5, 10.0)


def test_unknown_and_unsupported_fields_warn(tmp_path: Path) -> None:
    path = write(tmp_path, "fooBar: 1\npodCIDR: 10.0.0.0/24\n")
    _, warnings = load_config(path, {})
    assert f"unknown field 'fooBar' in {path}" in warnings
    assert any("'podCIDR'" in w and "not supported" in w for w in warnings)
    assert len(warnings) == 2


@pytest.mark.parametrize(
    ("header", "needle"),
    [
        ("apiVersion: kubelet.config.k8s.io/v1\nkind: KubeletConfiguration\n", "apiVersion"),
        ("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: Pod\n", "kind"),
        ("kind: KubeletConfiguration\n", "apiVersion"),
        ("apiVersion: kubelet.config.k8s.io/v1beta1\n", "kind"),
    ],
)
def test_wrong_api_version_or_kind_is_an_error(tmp_path: Path, header: str, needle: str) -> None:
    with pytest.raises(ConfigError, match=f"^{needle}:"):
        load_config(write(tmp_path, "", header=header), {})


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("readOnlyPort: abc", "readOnlyPort: must be an integer between 0 and 65535, got 'abc'"),
        ("readOnlyPort: 70000", "readOnlyPort: must be an integer between 0 and 65535, got 70000"),
        ("readOnlyPort: true", "readOnlyPort: must be an integer between 0 and 65535, got True"),
        ("healthzPort: -1", "healthzPort: must be an integer between 0 and 65535, got -1"),
        ("maxPods: 0", "maxPods: must be an integer between 1 and 2147483647, got 0"),
        ("maxPods: 99999999999999999999999", "maxPods: must be an integer between 1"),
        ("syncFrequency: 60", "syncFrequency: must be a duration string"),
        ("syncFrequency: 10 parsecs", "syncFrequency: must be a duration string"),
        ("fileCheckFrequency: 0s", "fileCheckFrequency: must be greater than 0"),
        ("fileCheckFrequency: -5s", "fileCheckFrequency: must be greater than 0"),
        ("cpuCFSQuotaPeriod: 2s", "cpuCFSQuotaPeriod: must be between 1ms and 1s"),
        ("cgroupDriver: lxc", "cgroupDriver: supported values: \"cgroupfs\", \"systemd\", got 'lxc'"),
        ("staticPodPath: relative/dir", "staticPodPath: must be an absolute path"),
        ("staticPodPath: ../etc", "staticPodPath: must be an absolute path"),
        ("rootDir: ''", "rootDir: must be an absolute path"),
        ("podLogsDir: 5", "podLogsDir: must be a string"),
        ("containerRuntimeEndpoint: tcp://1.2.3.4:2375", "containerRuntimeEndpoint: tcp:// endpoints are not supported"),
        ("containerRuntimeEndpoint: npipe:////./pipe/docker", "containerRuntimeEndpoint: npipe:// endpoints"),
        ("containerRuntimeEndpoint: http://x", "containerRuntimeEndpoint: must be a unix:// endpoint"),
        ("containerRuntimeEndpoint: 'unix://'", "containerRuntimeEndpoint: must be a unix:// endpoint"),
        ("address: localhost", "address: must be an IP address"),
        ("healthzBindAddress: 300.1.1.1", "healthzBindAddress: must be an IP address"),
        ("cgroupsPerQOS: 'yes please'", "cgroupsPerQOS: must be true or false"),
        ("evictionHard: {memory.available: lots}", "evictionHard: memory.available: must be a non-negative quantity"),
        ("evictionHard: {nodefs.available: 150%}", "evictionHard: nodefs.available: percentage must be between"),
        ("evictionHard: {cpu.available: 1}", "evictionHard: unsupported eviction signal 'cpu.available'"),
        ("evictionHard: {memory.available: '0'}", "evictionHard: eviction threshold memory.available must be positive"),
        ("evictionSoft: {memory.available: 1Gi}",
         "evictionSoft: grace period must be specified for the soft eviction threshold memory.available"),
        ("evictionSoftGracePeriod: {memory.available: soon}", "evictionSoftGracePeriod: memory.available: must be a duration"),
        ("evictionMinimumReclaim: {memory.available: 0%}", "evictionMinimumReclaim: memory.available: eviction percentage"),
        ("imageGCHighThresholdPercent: 101", "imageGCHighThresholdPercent: must be an integer between 0 and 100"),
        ("imageGCLowThresholdPercent: 90", "imageGCLowThresholdPercent (90) must be less than imageGCHighThresholdPercent (85)"),
        ("imageMinimumGCAge: '-1s'", "imageMinimumGCAge: must not be negative"),
        ("kubeReserved: {memory: -1Gi}", "kubeReserved: memory: must be a non-negative quantity"),
        ("kubeReserved: {gpu: 1}", "kubeReserved: unsupported resource 'gpu'"),
        ("featureGates: {Foo: maybe}", "featureGates: must be a map of feature name to true/false"),
        ("enforceNodeAllocatable: [pods, none]", "enforceNodeAllocatable: \"none\" cannot be combined"),
        ("enforceNodeAllocatable: [everything]", "enforceNodeAllocatable: supported values"),
        ("staticPodURL: ftp://x/y", "staticPodURL: must be an http:// or https:// URL"),
        ("staticPodURLHeader: {X-A: b}", "staticPodURLHeader: X-A: must be a list of strings"),
        ("staticPodURLHeader: {'a b': [c]}", "staticPodURLHeader: 'a b' is not a valid HTTP header name"),
        ("staticPodURLHeader: {X-A: [\"b\\r\\nX-Evil: 1\"]}", "staticPodURLHeader: X-A: a value must not hold CR"),
        ("hostnameOverride: Bad_Name!", "hostnameOverride: must be a valid DNS-1123 subdomain"),
        ("podPidsLimit: -2", "podPidsLimit: must be an integer between -1"),
        ("containerLogMaxSize: 0", "containerLogMaxSize: must be a positive quantity"),
        ("containerLogMaxSize: 10 megs", "containerLogMaxSize: must be a positive quantity"),
        ("containerLogMaxSize: '-1Mi'", "containerLogMaxSize: must be a positive quantity"),
        ("containerLogMaxFiles: 1", "containerLogMaxFiles: must be an integer between 2"),
        ("containerLogMaxWorkers: 0", "containerLogMaxWorkers: must be an integer between 1"),
        ("containerLogMonitorInterval: 2s", "containerLogMonitorInterval: must be a positive time duration greater"),
        ("legacyContainerLogsDir: logs", "legacyContainerLogsDir: must be an absolute path"),
    ],
)
def test_invalid_values_name_the_field(tmp_path: Path, body: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, body + "\n"), {})
    assert str(info.value).startswith(message)


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b"\xff\xfe\x00garbage", "not valid UTF-8"),
        (b"a: [unclosed", "not valid YAML"),
        (b"- just\n- a list\n", "must hold a KubeletConfiguration"),
        (b"", "must hold a KubeletConfiguration"),
    ],
)
def test_unparseable_files(tmp_path: Path, content: bytes, needle: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match=needle):
        load_config(str(path), {})


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--config: could not read"):
        load_config(str(tmp_path / "absent.yaml"), {})


def test_a_fifo_or_directory_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match=r"--config: .*fifo.yaml is a named pipe, not a regular file"):
        load_config(str(fifo), {})
    with pytest.raises(ConfigError, match="not a regular file"):
        load_config(str(tmp_path), {})


def test_an_oversized_file_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    path = tmp_path / "huge.yaml"
    path.write_text(HEADER + "# " + "x" * (1 << 20) + "\n")
    with pytest.raises(ConfigError, match=r"is \d+ bytes; the limit is 1048576"):
        load_config(str(path), {})


def test_an_alias_bomb_is_refused(tmp_path: Path) -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}]"
              for i in range(1, 9)]
    with pytest.raises(ConfigError, match="not valid YAML/JSON"):
        load_config(write(tmp_path, "\n".join(lines) + "\n"), {})


def test_only_the_first_document_counts_as_upstream(tmp_path: Path) -> None:
    config, _ = load_config(write(tmp_path, "maxPods: 7\n---\nmaxPods: nonsense\n"), {})
    assert config.max_pods == 7


def test_bad_flag_value_names_the_flag() -> None:
    with pytest.raises(ConfigError, match=r"^--sync-frequency: must be a duration string"):
        load_config(None, {"sync_frequency": "soon"})
    with pytest.raises(ConfigError, match=r"^--max-pods:"):
        load_config(None, {"max_pods": -3})


def test_unknown_override_key_is_rejected() -> None:
    with pytest.raises(ConfigError, match="unknown setting 'bogus'"):
        load_config(None, {"bogus": 1})


def test_bare_socket_path_means_unix_scheme() -> None:
    config, _ = load_config(None, {"container_runtime_endpoint": "/run/docker.sock"})
    assert config.container_runtime_endpoint == "unix:///run/docker.sock"


def test_hostname_override_is_lowercased_and_trimmed() -> None:
    config, _ = load_config(None, {"hostname_override": " Node-1.Example "})
    assert config.hostname_override == "node-1.example"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("20s", 20.0), ("1m30s", 90.0), ("100ms", 0.1), ("1h", 3600.0), ("1.5h", 5400.0), ("0", 0.0),
     ("-2s", -2.0), ("250us", 0.00025), ("10µs", 0.00001), ("3ns", 3e-9), ("2h45m0.5s", 9900.5), (".5s", 0.5)],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "s", "10", "1d", "1.s.", "--1s", "1 s", "99999999999h", "."])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


def test_static_pod_url_header_is_a_map_of_lists(tmp_path: Path) -> None:
    body = "staticPodURL: https://h/p\nstaticPodURLHeader: {Authorization: [Bearer x], Accept: [a, b]}\n"
    config, warnings = load_config(write(tmp_path, body), {})
    assert warnings == []
    assert config.static_pod_url_header == {"Authorization": ("Bearer x",), "Accept": ("a", "b")}


def test_config_fields_cover_every_attribute() -> None:
    rows = config_fields()
    assert {r[0] for r in rows} == set(KubeletConfig.__dataclass_fields__)
    assert ("read_only_port", "readOnlyPort", "--read-only-port", -1) in rows


def test_parser_maps_kubelet_flags_to_config_attributes() -> None:
    ns = build_parser().parse_args([
        "run", "--config", "/etc/k.yaml", "--hostname-override", "n1", "--pod-manifest-path", "/m",
        "--root-dir", "/r", "--kubeconfig", "/k", "--v", "3", "--container-runtime-endpoint", "unix:///s",
        "--pod-infra-container-image", "pause:1", "--read-only-port", "0", "--address", "0.0.0.0",
        "--healthz-port", "0", "--cgroup-driver", "systemd", "--max-pods", "7",
        "--file-check-frequency", "5s", "--sync-frequency=30s",
    ])
    assert ns.command == "run" and ns.config == "/etc/k.yaml"
    overrides = flags_to_overrides(ns)
    assert overrides == {
        "hostname_override": "n1", "static_pod_path": "/m", "root_dir": "/r", "kubeconfig": "/k", "verbosity": 3,
        "container_runtime_endpoint": "unix:///s", "pod_infra_container_image": "pause:1", "read_only_port": 0,
        "address": "0.0.0.0", "healthz_port": 0, "cgroup_driver": "systemd", "max_pods": 7,
        "file_check_frequency": "5s", "sync_frequency": "30s",
    }
    config, _ = load_config(None, overrides)
    assert (config.read_only_port, config.file_check_frequency, config.address) == (0, 5.0, "0.0.0.0")


def test_absent_flags_do_not_override() -> None:
    ns = build_parser().parse_args(["run"])
    assert flags_to_overrides(ns) == {}
    assert ns.config is None


def test_version_subcommand_and_flag_errors_exit_2() -> None:
    assert build_parser().parse_args(["version"]).command == "version"
    for argv in (["run", "--read-only-port", "abc"], ["run", "--max-po", "3"], ["run", "--nope"], []):
        with pytest.raises(SystemExit) as info:
            build_parser().parse_args(argv)
        assert info.value.code == 2


def test_short_v_flag() -> None:
    assert flags_to_overrides(build_parser().parse_args(["run", "-v", "2"])) == {"verbosity": 2}


def test_security_settings(tmp_path: Path) -> None:
    assert (KubeletConfig().allowed_unsafe_sysctls, KubeletConfig().seccomp_default) == ((), False)
    config, warnings = load_config(write(tmp_path, "allowedUnsafeSysctls: ['kernel.msg*', net.core.somaxconn]\n"
                                                   "seccompDefault: true\n"), {})
    assert (config.allowed_unsafe_sysctls, config.seccomp_default, warnings) == (
        ("kernel.msg*", "net.core.somaxconn"), True, [])


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("allowedUnsafeSysctls: kernel.msgmax", "allowedUnsafeSysctls: must be a list of sysctl names"),
        ("allowedUnsafeSysctls: [kernel.panic]", 'allowedUnsafeSysctls: the sysctls "kernel.panic" are not known to be'),
        ("allowedUnsafeSysctls: ['net.*.x']", 'allowedUnsafeSysctls: sysctl "net.*.x" must have at most 253 characters'),
        ("seccompDefault: 1", "seccompDefault: must be true or false"),
    ],
)
def test_invalid_security_settings(tmp_path: Path, body: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, body + "\n"), {})
    assert message in str(info.value)


def test_dns_settings_from_file_and_flags(tmp_path: Path) -> None:
    assert (KubeletConfig().cluster_dns, KubeletConfig().cluster_domain, KubeletConfig().resolv_conf) == (
        (), "", "/etc/resolv.conf")
    path = write(tmp_path, "clusterDNS: [10.96.0.10, 'fd00::0a']\nclusterDomain: cluster.local\nresolvConf: ''\n")
    config, warnings = load_config(path, {})
    assert warnings == []
    assert (config.cluster_dns, config.cluster_domain, config.resolv_conf) == (("10.96.0.10", "fd00::a"), "cluster.local", "")
    config, _ = load_config(path, {"cluster_dns": "10.0.0.10, 10.0.0.11", "resolv_conf": "/run/resolv.conf"})
    assert (config.cluster_dns, config.resolv_conf) == (("10.0.0.10", "10.0.0.11"), "/run/resolv.conf")


@pytest.mark.parametrize(("overrides", "needle"), [
    ({"cluster_dns": "10.0.0.300"}, "--cluster-dns: must be a list of IP addresses"),
    ({"cluster_domain": "Cluster_Local"}, "--cluster-domain: must be a valid DNS-1123 subdomain"),
    ({"resolv_conf": "resolv.conf"}, "--resolv-conf: must be an absolute path"),
])
def test_bad_dns_settings_name_the_flag(overrides: dict[str, object], needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        load_config(None, overrides)


def test_streaming_connection_idle_timeout(tmp_path: Path) -> None:
    assert KubeletConfig().streaming_connection_idle_timeout == 4 * 3600.0
    config, warnings = load_config(write(tmp_path, "streamingConnectionIdleTimeout: 5m\n"), {})
    assert (config.streaming_connection_idle_timeout, warnings) == (300.0, [])
    flags = flags_to_overrides(build_parser().parse_args(["run", "--streaming-connection-idle-timeout", "30s"]))
    assert load_config(None, flags)[0].streaming_connection_idle_timeout == 30.0
    with pytest.raises(ConfigError, match=r"^streamingConnectionIdleTimeout: must be greater than 0"):
        load_config(write(tmp_path, "streamingConnectionIdleTimeout: 0s\n"), {})


def test_pod_network_flags(tmp_path: Path) -> None:
    cfg, _ = load_config(None, {"pod_network": "host-gw", "non_masquerade_cidr": "10.244.0.0/16"})
    assert (cfg.pod_network, cfg.non_masquerade_cidr) == ("host-gw", "10.244.0.0/16")
    default, _ = load_config(None, {})
    assert (default.pod_network, default.non_masquerade_cidr) == ("", "10.0.0.0/8")
    with pytest.raises(ConfigError, match=re.escape('--pod-network: supported values: "", "host-gw", got \'flannel\'')):
        load_config(None, {"pod_network": "flannel"})
    with pytest.raises(ConfigError, match=re.escape("--non-masquerade-cidr: must be a CIDR like 10.0.0.0/8, got '10.0.0.0/33'")):
        load_config(None, {"non_masquerade_cidr": "10.0.0.0/33"})


def test_lock_file_flags_are_kubelet_flags_with_pflags_bool_syntax() -> None:
    """upstream KubeletFlags.LockFilePath / ExitOnLockContention (--lock-file, --exit-on-lock-contention)."""
    def overrides(*args: str) -> dict[str, object]:
        return flags_to_overrides(build_parser().parse_args(["run", *args]))

    assert overrides("--lock-file", "/run/k.lock", "--exit-on-lock-contention") == {
        "lock_file_path": "/run/k.lock", "exit_on_lock_contention": True}
    assert overrides("--lock-file=/run/k.lock", "--exit-on-lock-contention=false") == {
        "lock_file_path": "/run/k.lock", "exit_on_lock_contention": False}
    assert overrides("--exit-on-lock-contention", "T", "--lock-file", "k.lock") == {
        "lock_file_path": "k.lock", "exit_on_lock_contention": True}
    assert overrides() == {}
    with pytest.raises(SystemExit):
        overrides("--exit-on-lock-contention=maybe")
    config, _ = load_config(None, overrides("--lock-file", "/run/k.lock", "--exit-on-lock-contention"))
    assert config.lock_file_path == "/run/k.lock" and config.exit_on_lock_contention is True
    assert (KubeletConfig().lock_file_path, KubeletConfig().exit_on_lock_contention) == ("", False)


def test_exit_on_lock_contention_needs_a_lock_file() -> None:
    """upstream run(): "cannot exit on lock file contention: no lock file specified"."""
    with pytest.raises(ConfigError, match=r"^cannot exit on lock file contention: no lock file specified$"):
        load_config(None, {"exit_on_lock_contention": True})
    load_config(None, {"exit_on_lock_contention": False})


def test_lock_file_settings_are_not_configuration_file_fields(tmp_path: Path) -> None:
    path = write(tmp_path, "lockFile: /run/k.lock\nexitOnLockContention: true\n")
    config, warnings = load_config(path, {})
    assert config.lock_file_path == "" and config.exit_on_lock_contention is False
    assert f"unknown field 'lockFile' in {path}" in warnings
    assert f"unknown field 'exitOnLockContention' in {path}" in warnings
