"""Server-side assignors: balance, coverage, stickiness."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from samsa.coordinator.group.assignors import range_assign, uniform


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 6), st.dictionaries(st.sampled_from("abc"), st.integers(0, 9), min_size=1))
def test_uniform_covers_everything_once_and_balances(n_members: int, parts: dict[str, int]) -> None:
    members = {f"m{i}": set(parts) for i in range(n_members)}
    out = uniform(members, parts, {})
    flat = [tp for s in out.values() for tp in s]
    assert sorted(flat) == sorted((t, p) for t, n in parts.items() for p in range(n))
    sizes = [len(s) for s in out.values()]
    assert max(sizes) - min(sizes) <= 1


def test_uniform_is_sticky_when_a_member_joins() -> None:
    parts = {"t": 6}
    first = uniform({"a": {"t"}, "b": {"t"}}, parts, {})
    second = uniform({"a": {"t"}, "b": {"t"}, "c": {"t"}}, parts, first)
    assert all(len(s) == 2 for s in second.values())
    assert second["a"] <= first["a"] and second["b"] <= first["b"]  # only moves to the newcomer


def test_range_gives_contiguous_ranges() -> None:
    out = range_assign({"a": {"t"}, "b": {"t"}}, {"t": 5}, {})
    assert out == {"a": {("t", 0), ("t", 1), ("t", 2)}, "b": {("t", 3), ("t", 4)}}
