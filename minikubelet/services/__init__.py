"""The node services: each long-lived part of the agent (eviction, node shutdown, the pod network, the API pods and
their statuses, the event sink, housekeeping and GC, the HTTP servers, the runtime's health) behind one small
protocol (`service.NodeService`). `minikubelet/agent.py` builds them, starts them in order and stops them in reverse.
"""
