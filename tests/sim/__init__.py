"""A deterministic simulator of the agent: one seed, one run of the real managers on the fake runtime and a virtual
clock, with invariants checked after every step (docs/testing.md, "Deterministic simulation")."""
