"""Tiered storage (KIP-405): closed segments copied to a remote store, read back from it."""
