"""The transaction coordinator (exactly-once), persisted in `__transaction_state`."""
