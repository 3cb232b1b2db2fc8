"""The Raft core's disk: the `quorum-state` file and a file-backed `RaftLog` (KRaft's layout).

`state_file.py` keeps the vote durable; `files.py` holds the atomic-replace and checkpoint formats;
`log.py` stores `__cluster_metadata-0` as RecordBatch v2 segments with snapshots beside them.
"""
