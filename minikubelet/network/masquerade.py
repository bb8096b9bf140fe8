"""The netfilter side of the pod network, with the `iptables` command: pyroute2 speaks rtnetlink, not
nftables/xtables, so it cannot write these rules (docs/decisions.md).

- nat POSTROUTING: pod traffic from the node's pod CIDR to anything outside the cluster CIDR
  (`--non-masquerade-cidr`) is masqueraded; pod-to-pod traffic keeps the pod IP.
- filter DOCKER-USER (FORWARD when Docker has no such chain): new connections to this node's pods from
  other nodes are accepted; Docker's own rules would drop them (its FORWARD policy is DROP and it
  accepts only published ports into a bridge).
Every rule is checked (`-C`) before it is added, so a restart of the agent adds nothing twice.
"""

from __future__ import annotations

import asyncio
import ipaddress

COMMENT = "minikubelet pod network"


class IptablesError(Exception):
    pass


async def _iptables(binary: str, *args: str) -> tuple[int, str]:
    try:
        proc = await asyncio.create_subprocess_exec(binary, "-w", "5", *args, stdout=asyncio.subprocess.PIPE,
                                                    stderr=asyncio.subprocess.STDOUT)
    except FileNotFoundError:
        raise IptablesError(f"{binary} not found") from None
    out, _ = await proc.communicate()
    return proc.returncode or 0, out.decode(errors="replace").strip()


async def _ensure(binary: str, table: str, chain: str, rule: list[str]) -> None:
    code, _ = await _iptables(binary, "-t", table, "-C", chain, *rule)
    if code == 0:
        return
    code, out = await _iptables(binary, "-t", table, "-I", chain, "1", *rule)
    if code != 0:
        raise IptablesError(f"{binary} -t {table} -I {chain} {' '.join(rule)}: {out}")


def rules(pod_cidr: str, non_masquerade_cidr: str) -> list[tuple[str, str, list[str]]]:
    """(table, chain, rule) for one pod CIDR; the chain "FORWARD" stands for DOCKER-USER when it exists."""
    comment = ["-m", "comment", "--comment", COMMENT]
    out = [("filter", "FORWARD", ["-d", pod_cidr, *comment, "-j", "ACCEPT"])]
    masq = ipaddress.ip_network(non_masquerade_cidr)
    if ipaddress.ip_network(pod_cidr).version == masq.version:
        out.append(("nat", "POSTROUTING", ["-s", pod_cidr, "!", "-d", str(masq), *comment, "-j", "MASQUERADE"]))
    return out


async def ensure_rules(pod_cidrs: tuple[str, ...], non_masquerade_cidr: str) -> None:
    for cidr in pod_cidrs:
        binary = "ip6tables" if ":" in cidr else "iptables"
        user_chain = (await _iptables(binary, "-t", "filter", "-S", "DOCKER-USER"))[0] == 0
        for table, chain, rule in rules(cidr, non_masquerade_cidr):
            await _ensure(binary, table, "DOCKER-USER" if chain == "FORWARD" and user_chain else chain, rule)


def enable_forwarding(pod_cidrs: tuple[str, ...]) -> None:
    """The node forwards between its pod bridge and the other nodes (per network namespace)."""
    paths = {"/proc/sys/net/ipv6/conf/all/forwarding" if ":" in c else "/proc/sys/net/ipv4/ip_forward"
             for c in pod_cidrs}
    for path in sorted(paths):
        with open(path) as fh:
            if fh.read().strip() == "1":
                continue
        with open(path, "w") as fh:
            fh.write("1")
