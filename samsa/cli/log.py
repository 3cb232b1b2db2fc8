"""`samsa log cleaner`: the log cleaner's state as the broker last wrote it (cleaner-stats.json in
each log dir): per compacted partition the dirty ratio and clean/dirty boundary, and the cleaner's
last run and counters. Reads files, so it works with the broker stopped too."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from samsa.storage.cleaner import STATS_FILE

from ._common import CliError, guarded


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("log", help="inspect partition logs on disk (log cleaner state)",
                       description="Inspect a broker's log directories.")
    lsub = p.add_subparsers(dest="log_command", required=True, metavar="ACTION")
    c = lsub.add_parser("cleaner", help="dirty ratios of compacted partitions and the cleaner's "
                                        "last run")
    c.add_argument("--log-dirs", default="./samsa-data",
                   help="the broker's log.dirs, comma-separated (default ./samsa-data)")
    c.add_argument("--topic", help="only this topic's partitions")
    c.add_argument("--all", action="store_true", help="also list empty partitions")
    c.add_argument("--json", action="store_true", help="print the raw stats as JSON")
    c.set_defaults(func=guarded("samsa log cleaner", cleaner))


def _when(ms: int | None) -> str:
    if not ms:
        return "never"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000))


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


def cleaner(args: argparse.Namespace) -> int:
    stats: list[dict[str, Any]] = []
    for d in [Path(p) for p in args.log_dirs.split(",") if p]:
        f = d / STATS_FILE
        if not d.is_dir():
            raise CliError(f"{d} is not a directory")
        if f.exists():
            stats.append(json.loads(f.read_text()))
    if not stats:
        raise CliError(f"no {STATS_FILE} under {args.log_dirs}: the log cleaner has not run there "
                       "yet (it writes the file on its first check)")
    parts: dict[str, dict[str, Any]] = {}
    for s in stats:
        parts.update(s.get("partitions", {}))
    if args.topic:
        parts = {k: v for k, v in parts.items() if k.rpartition("-")[0] == args.topic}
    if not args.all:
        parts = {k: v for k, v in parts.items() if v["log_end_offset"] > v["log_start_offset"]}
    head = max(stats, key=lambda s: s.get("updated_ms", 0))
    if args.json:
        print(json.dumps({**head, "partitions": parts}, indent=2, sort_keys=True))
        return 0
    m = head.get("metrics", {})
    print(f"log cleaner: {'enabled' if head.get('enabled') else 'disabled'} ({head.get('mode')}), "
          f"state as of {_when(head.get('updated_ms'))}")
    print(f"  runs {m.get('runs', 0)} (aborted {m.get('aborted', 0)}), time spent "
          f"{m.get('time_spent_s', 0):.2f}s, read {_mb(m.get('bytes_read', 0))}, written "
          f"{_mb(m.get('bytes_written', 0))}, records kept {m.get('records_retained', 0)} of "
          f"{m.get('records_read', 0)}")
    last = head.get("last_run")
    if last:
        print(f"  last run: {last['partition']} at {_when(last['started_ms'])}, {last['outcome']}, "
              f"{last['duration_s']:.2f}s, {_mb(last['dirty_bytes'])} dirty at "
              f"{last['dirty_mb_per_s']:.1f} MB/s, {last['segments_in']} -> {last['segments_out']} "
              f"segments")
    if not parts:
        print("no compacted partitions")
        return 0
    rows = [("PARTITION", "DIRTY-RATIO", "MIN-RATIO", "FIRST-DIRTY", "UNCLEANABLE-FROM",
             "LOG-START", "LOG-END", "CLEAN", "DIRTY", "LAST-CLEANED")]
    for name, p in sorted(parts.items()):
        rows.append((name + (" (uncleanable)" if p.get("uncleanable") else ""),
                     f"{p['dirty_ratio']:.3f}", f"{p['min_cleanable_ratio']:g}",
                     str(p["first_dirty_offset"]), str(p["first_uncleanable_offset"]),
                     str(p["log_start_offset"]), str(p["log_end_offset"]), _mb(p["clean_bytes"]),
                     _mb(p["cleanable_bytes"]), _when(p.get("last_cleaned_ms"))))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    return 0
