"""Adversarial inputs shared by the unit tests and the integration tests against the real agent."""
