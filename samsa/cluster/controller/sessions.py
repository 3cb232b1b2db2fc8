"""Broker sessions as the active controller sees them: when each broker was last heard from, and
the metadata offset of its registration (what it must have applied before it is unfenced).

This is soft state of the active controller only: it is not in the image and not replicated. A
controller that becomes active gives every registered broker a fresh session (Kafka's behaviour
after a failover) and, not knowing the exact registration offsets, asks brokers to catch up to
its own committed offset instead."""

from __future__ import annotations


class BrokerSessions:
    def __init__(self, timeout_ms: int) -> None:
        self.timeout_ms = timeout_ms
        self._last_contact: dict[int, int] = {}
        self._heard: dict[int, int] = {}  # last time THIS controller heard from the broker
        self._registered_at: dict[int, int] = {}

    def touch(self, broker_id: int, now_ms: int) -> None:
        self._last_contact[broker_id] = now_ms
        self._heard[broker_id] = now_ms

    def alive(self, broker_id: int, now_ms: int) -> bool:
        """True while the broker was heard from, by this controller, within the session timeout.
        The fresh sessions `reset` hands out on activation protect brokers from being fenced;
        they do not make an old incarnation count as alive: a node restarted after `kill -9`
        re-registers at once instead of waiting out a session nobody is heartbeating."""
        last = self._heard.get(broker_id)
        return last is not None and now_ms - last < self.timeout_ms

    def expired(self, broker_id: int, now_ms: int) -> bool:
        """True when the broker has a session and it ran out (a broker never heard from by this
        controller has none: `reset` gives one to every registered broker on activation)."""
        last = self._last_contact.get(broker_id)
        return last is not None and now_ms - last >= self.timeout_ms

    def registered(self, broker_id: int, offset: int) -> None:
        self._registered_at[broker_id] = offset

    def caught_up(self, broker_id: int, metadata_offset: int) -> bool:
        return metadata_offset >= self._registered_at.get(broker_id, 0)

    def reset(self, broker_ids: list[int], now_ms: int, committed_offset: int) -> None:
        """On activation: a full session for every registered broker; registration offsets
        unknown here, so the committed offset stands in for them (it is never earlier)."""
        self._last_contact = {b: now_ms for b in broker_ids}
        self._registered_at = {b: committed_offset for b in broker_ids}

    def remove(self, broker_id: int) -> None:
        self._last_contact.pop(broker_id, None)
        self._heard.pop(broker_id, None)
        self._registered_at.pop(broker_id, None)
