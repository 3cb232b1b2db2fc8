"""Server-side partition assignors for the KIP-848 consumer protocol: `uniform` (balanced and
sticky) and `range` (contiguous ranges per topic, like the client-side range assignor)."""

from __future__ import annotations

TP = tuple[str, int]  # (topic name, partition)


def uniform(members: dict[str, set[str]], partitions: dict[str, int],
            current: dict[str, set[TP]]) -> dict[str, set[TP]]:
    """Spread every subscribed partition evenly, keeping each member's current partitions where
    the balance allows (fewer moves, fewer revocations)."""
    out: dict[str, set[TP]] = {m: set() for m in members}
    if not members:
        return out
    all_tps = sorted((t, p) for t in {t for subs in members.values() for t in subs}
                     for p in range(partitions.get(t, 0)))
    eligible = {tp: sorted(m for m, subs in members.items() if tp[0] in subs) for tp in all_tps}
    # quotas: floor share for everyone, the remainder to the first members (sorted)
    order = sorted(members)
    base, extra = divmod(len(all_tps), len(order))
    quota = {m: base + (1 if i < extra else 0) for i, m in enumerate(order)}
    taken: set[TP] = set()
    for m in order:  # stickiness first
        for tp in sorted(current.get(m, set())):
            if tp in eligible and m in eligible[tp] and tp not in taken and len(out[m]) < quota[m]:
                out[m].add(tp)
                taken.add(tp)
    for tp in all_tps:
        if tp in taken:
            continue
        candidates = [m for m in eligible[tp]] or []
        if not candidates:
            continue
        m = min(candidates, key=lambda x: (len(out[x]) - quota[x] >= 0, len(out[x]), x))
        out[m].add(tp)
        taken.add(tp)
    return out


def range_assign(members: dict[str, set[str]], partitions: dict[str, int],
                 current: dict[str, set[TP]]) -> dict[str, set[TP]]:
    out: dict[str, set[TP]] = {m: set() for m in members}
    topics = sorted({t for subs in members.values() for t in subs})
    for t in topics:
        subs = sorted(m for m, s in members.items() if t in s)
        n = partitions.get(t, 0)
        if not subs:
            continue
        per, extra = divmod(n, len(subs))
        start = 0
        for i, m in enumerate(subs):
            count = per + (1 if i < extra else 0)
            out[m] |= {(t, p) for p in range(start, start + count)}
            start += count
    return out


ASSIGNORS = {"uniform": uniform, "range": range_assign}
