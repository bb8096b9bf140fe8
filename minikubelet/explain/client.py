"""`minikubelet explain NS/NAME` on the node: asks the running agent (its read-only port, or a URL given) and
prints the JSON document, or with `-o wide` a table for people."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

import h11

from minikubelet.base.http1 import URL, connect, insecure_tls

MAX_ANSWER = 4 << 20
TIMEOUT = 10.0


class ExplainError(Exception):
    pass


def explain_url(base: str, namespace: str, name: str) -> URL:
    return URL.parse(f"{base.rstrip('/')}/debug/pods/{quote(namespace, safe='')}/{quote(name, safe='')}/explain")


async def fetch(url: URL, timeout: float = TIMEOUT) -> dict[str, Any]:
    """GET the document; ExplainError with the agent's answer when it has none."""

    async def get() -> tuple[int, bytes]:
        conn = await connect(url, insecure_tls())
        try:
            await conn.send(h11.Request(method="GET", target=url.target,
                                        headers=[("Host", url.authority), ("Accept", "application/json")]),
                            h11.EndOfMessage())
            head = await conn.response()
            return head.status_code, await conn.body(MAX_ANSWER)
        finally:
            conn.close()

    try:
        status, body = await asyncio.wait_for(get(), timeout)
    except (OSError, TimeoutError, h11.ProtocolError) as e:
        raise ExplainError(f"cannot reach the agent at {url}: {e or type(e).__name__}") from e
    if status != 200:
        raise ExplainError(f"{url}: {status}: {body.decode(errors='replace').strip()}")
    doc = json.loads(body)
    if not isinstance(doc, dict):
        raise ExplainError(f"{url}: not a JSON object")
    return doc


def render_wide(doc: dict[str, Any]) -> str:
    """The document as `kubectl describe`-like text: the cause first, then the evidence."""
    pod = doc.get("pod") or {}
    life = doc.get("lifecycle") or {}
    status = doc.get("status") or {}
    lines = [f"Pod:        {pod.get('namespace')}/{pod.get('name')} ({pod.get('uid')})",
             f"Stage:      {life.get('stage')} since {life.get('since', '-')}",
             f"Phase:      {status.get('phase', '-')}"
             + (f" ({status['reason']}: {status.get('message', '')})" if status.get("reason") else "")]
    if (kill := life.get("kill")) is not None:
        lines.append(f"Kill:       {kill['reason']}: {kill.get('message', '')} (grace {kill['gracePeriodSeconds']}s)")
    adm = doc.get("admission") or {}
    if adm.get("admitted") is False:
        lines.append(f"Admission:  REJECTED {adm.get('reason')}: {adm.get('message')}")
    elif adm.get("admitted"):
        lines.append(f"Admission:  admitted at {adm.get('at')}")
    dec = doc.get("decision")
    if dec:
        lines.append(f"Decision:   since {dec['since']} ({dec['syncs']} syncs)" + (f"; {dec['note']}" if dec.get("note")
                                                                                  else ""))
        rows: list[tuple[str, ...]] = [("CONTAINER", "KIND", "ACTION", "REASON", "WHY")]
        for c in dec.get("containers") or []:
            rows.append((c["name"], c["kind"], c["action"], c["reason"], _why(c)))
        lines += _table(rows, indent="  ")
        for c in dec.get("lastKills") or []:
            lines.append(f"  last kill of {c['name']}: {c['reason']}: {c.get('message', '')}")
    probes = doc.get("probes") or []
    if probes:
        lines.append("Probes:")
        rows = [("CONTAINER", "KIND", "RESULT", "SINCE", "RUN", "LAST OUTPUT")]
        for p in probes:
            run = p.get("consecutive") or {}
            last = p.get("lastRun") or {}
            rows.append((p["container"], p["kind"], p.get("result", "-"), p.get("since", "-"),
                         f"{run.get('count', 0)}x{run.get('result', '-')}/{p.get('failureThreshold', '-')}",
                         (last.get("output") or p.get("output") or "").replace("\n", " ")[:60]))
        lines += _table(rows, indent="  ")
    res = doc.get("resources") or {}
    diffs = [(c["name"], d) for c in res.get("containers") or [] for d in c.get("differences") or []]
    diffs += [("<pod cgroup>", d) for d in (res.get("podCgroup") or {}).get("differences") or []]
    lines.append("Resources:  " + ("no difference between what was asked and what is enforced" if not diffs else
                                   "; ".join(f"{n} {d['setting']}: expected {d['expected']}, enforced {d['actual']}"
                                             for n, d in diffs)))
    ev = doc.get("eviction") or {}
    met = [s for s in ev.get("signals") or [] if s.get("met")]
    lines.append("Eviction:   " + (", ".join(f"{s['signal']} {s.get('available')} < {s.get('thresholdAmount')}"
                                             for s in met) or "no threshold met"))
    if (rank := ev.get("rank")) is not None:
        lines.append(f"            ranked {rank['rank']} of {rank['of']} by {rank['resource']} (usage {rank['usage']})")
    if doc.get("deleteWaitsFor") is not None:
        lines.append("Waits for:  " + ("; ".join(doc["deleteWaitsFor"]) or "nothing"))
    events = doc.get("events") or []
    if events:
        lines.append("Events:")
        rows = [("TYPE", "REASON", "COUNT", "LAST", "MESSAGE")]
        rows += [(e["type"], e["reason"], str(e["count"]), e["last"], e["message"][:80]) for e in events]
        lines += _table(rows, indent="  ")
    return "\n".join(lines) + "\n"


def _why(c: dict[str, Any]) -> str:
    parts = [c.get("message", "")]
    if "backoffRemainingSeconds" in c:
        parts.append(f"{c['backoffRemainingSeconds']}s of {c.get('backoffSeconds')}s back-off left")
    if c.get("restartCount"):
        parts.append(f"{c['restartCount']} restarts, exit codes {c.get('exitCodes', [])}")
    if "lastPullError" in c:
        parts.append(f"last pull error: {c['lastPullError']}")
    if (probe := c.get("probe")) is not None:
        parts.append(f"probe {probe.get('result')} since {probe.get('since')}: {probe.get('output', '')}")
    return "; ".join(p for p in parts if p)[:160]


def _table(rows: Sequence[tuple[str, ...]], indent: str = "") -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [indent + "  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in rows]
