"""Coordinators: consumer groups and (later) transactions, persisted in internal topics."""
