"""The Connect worker: running connectors and tasks (worker), deciding where they run (herders:
standalone and distributed) and keeping configs, offsets and statuses (stores)."""
