"""A small authoritative DNS server for the cluster domain, standing in for CoreDNS in tests.

Answers from a hosts-style zone file (`<ip> <name> [<name>...]` per line, `#` comments), re-read when it
changes (a ConfigMap volume swaps its `..data` link). A name in the zone: its A/AAAA records (an empty
NOERROR answer for a type it has none of); any other name under $DOMAIN: NXDOMAIN, so a resolver goes on to
its next search path; a name outside $DOMAIN: REFUSED (there is no upstream to forward to, unlike CoreDNS).
Every query is logged to stdout as `query <type> <name> -> <rcode> <addresses>`.

Like CoreDNS's `ready` plugin, `GET /ready` on READY_PORT (default 8181) answers 200 once the zone is loaded and
the DNS socket is bound (503 before), for a readinessProbe.

Environment: ZONE_FILE (default /etc/cluster-dns/hosts), DOMAIN (default cluster.local), PORT (default 53),
READY_PORT (default 8181). UDP only: answers here stay far below 512 bytes.
"""

import http.server
import ipaddress
import os
import signal
import socket
import sys
import threading

import dns.exception
import dns.flags
import dns.message
import dns.name
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.rrset

TTL = 30
Records = dict[dns.name.Name, list[tuple[dns.rdatatype.RdataType, str]]]


def load_zone(path: str) -> Records:
    records: Records = {}
    with open(path) as fh:
        for raw in fh:
            fields = raw.split("#", 1)[0].split()
            if len(fields) < 2:
                continue
            address = ipaddress.ip_address(fields[0])
            rdtype = dns.rdatatype.A if address.version == 4 else dns.rdatatype.AAAA
            for name in fields[1:]:
                records.setdefault(dns.name.from_text(name), []).append((rdtype, str(address)))
    return records


class Zone:
    def __init__(self, path: str) -> None:
        self.path = path
        self.stamp: tuple[int, int, int] | None = None
        self.records: Records = {}

    def current(self) -> Records:
        try:
            st = os.stat(self.path)  # follows the ..data symlink of a ConfigMap volume
            stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        except OSError as e:
            if self.stamp is not None:
                print(f"cluster-dns: {self.path}: {e}; keeping the last zone", flush=True)
            return self.records
        if stamp != self.stamp:
            try:
                self.records = load_zone(self.path)
                print(f"cluster-dns: loaded {sum(map(len, self.records.values()))} records from {self.path}",
                      flush=True)
            except (OSError, ValueError) as e:
                print(f"cluster-dns: {self.path}: {e}; keeping the last zone", flush=True)
            self.stamp = stamp
        return self.records


def answer(query: dns.message.Message, records: Records, domain: dns.name.Name) -> tuple[dns.message.Message, list[str]]:
    response = dns.message.make_response(query)
    if not query.question:
        response.set_rcode(dns.rcode.FORMERR)
        return response, []
    question = query.question[0]
    name, rdtype = question.name, question.rdtype
    if not name.is_subdomain(domain):
        response.set_rcode(dns.rcode.REFUSED)
        return response, []
    response.flags |= dns.flags.AA
    entries = records.get(name)
    if entries is None:
        response.set_rcode(dns.rcode.NXDOMAIN)
        return response, []
    addresses = [address for kind, address in entries if kind == rdtype]
    if addresses:
        response.answer.append(dns.rrset.from_text_list(name, TTL, dns.rdataclass.IN, rdtype, addresses))
    return response, addresses


class Readiness(http.server.BaseHTTPRequestHandler):
    ready = threading.Event()

    def do_GET(self) -> None:
        code = 200 if self.path == "/ready" and self.ready.is_set() else 503 if self.path == "/ready" else 404
        body = b"OK" if code == 200 else b""
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


def main() -> None:
    zone = Zone(os.environ.get("ZONE_FILE", "/etc/cluster-dns/hosts"))
    domain = dns.name.from_text(os.environ.get("DOMAIN", "cluster.local"))
    port = int(os.environ.get("PORT", "53"))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("0.0.0.0", port))
    ready = http.server.ThreadingHTTPServer(("0.0.0.0", int(os.environ.get("READY_PORT", "8181"))), Readiness)
    threading.Thread(target=ready.serve_forever, daemon=True).start()
    zone.current()
    Readiness.ready.set()
    print(f"cluster-dns: serving {domain} on udp :{port}", flush=True)
    while True:
        data, peer = sock.recvfrom(4096)
        try:
            query = dns.message.from_wire(data)
        except dns.exception.DNSException as e:
            print(f"cluster-dns: bad query from {peer[0]}: {e}", flush=True)
            continue
        response, addresses = answer(query, zone.current(), domain)
        if query.question:
            q = query.question[0]
            print(f"query {dns.rdatatype.to_text(q.rdtype)} {q.name} -> "
                  f"{dns.rcode.to_text(response.rcode())} {' '.join(addresses)}".rstrip(), flush=True)
        sock.sendto(response.to_wire(), peer)


if __name__ == "__main__":
    main()
