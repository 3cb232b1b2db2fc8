"""KRaft's controller quorum: an I/O-free Raft core (`node.py`) and what drives it.

The core takes messages and the current time in and hands back messages, a quorum-state record
to persist and log writes to flush, so a network/disk driver or the deterministic simulator
(`sim.py`) can run it unchanged.
"""
