"""Progress of long CLI work, on stderr: a bar redrawn in place on a terminal, plain lines (one
every few seconds, and a last one) when stderr is a file or a pipe, so logs stay readable.

    p = Progress("producing", total=size, unit="bytes")
    p.update(done, note="1,000 messages")    # cheap: redraws at most every `interval` seconds
    p.finish()

Settings (environment): SAMSA_PROGRESS=off hides it; SAMSA_PROGRESS_INTERVAL=<seconds> sets how
often plain lines are written (default 5; a terminal redraws every 0.2 s).
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from typing import TextIO

TTY_INTERVAL_S = 0.2
PLAIN_INTERVAL_S = 5.0


def _human(n: float, unit: str) -> str:
    if unit == "bytes":
        for u in ("B", "KiB", "MiB", "GiB"):
            if abs(n) < 1024 or u == "GiB":
                return f"{n:.0f} {u}" if u == "B" else f"{n:.1f} {u}"
            n /= 1024
    return f"{int(n):,}"


def _clock(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


class Progress:
    def __init__(self, label: str, total: float | None = None, unit: str = "",
                 stream: TextIO | None = None, tty: bool | None = None,
                 interval: float | None = None) -> None:
        self.label = label
        self.total = total if total and total > 0 else None
        self.unit = unit
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = os.environ.get("SAMSA_PROGRESS", "on").lower() not in ("off", "0", "false",
                                                                              "no")
        self.tty = self.stream.isatty() if tty is None else tty
        if interval is None:
            env = os.environ.get("SAMSA_PROGRESS_INTERVAL")
            try:
                interval = TTY_INTERVAL_S if self.tty and env is None else \
                    float(env) if env is not None else PLAIN_INTERVAL_S
            except ValueError:
                interval = PLAIN_INTERVAL_S
        self.interval = interval
        self.start = time.monotonic()
        # plain lines: the first only once the work has lasted `interval` (short runs stay quiet)
        self.last = self.start if not self.tty else 0.0
        self.done = 0.0
        self.note = ""
        self.lines = 0  # plain lines written
        self.drawn = False  # a bar is on the terminal's current line
        self.finished = False

    def update(self, done: float, note: str = "", force: bool = False) -> None:
        """`force`: draw now (a step worth a line of its own), whatever the interval."""
        self.done = done
        if note:
            self.note = note
        if not self.enabled:
            return
        now = time.monotonic()
        if force or now - self.last >= self.interval:
            self.last = now
            self._draw(now)

    def finish(self, note: str = "") -> None:
        """The last state: the bar completed (and a newline) on a terminal; a last plain line if
        any was written before."""
        if self.finished:
            return
        self.finished = True
        if note:
            self.note = note
        if not self.enabled:
            return
        if self.tty:
            self._draw(time.monotonic())
            self.stream.write("\n")
            self.stream.flush()
        elif self.lines:
            self._draw(time.monotonic())

    def text(self, now: float) -> str:
        elapsed = max(now - self.start, 1e-9)
        parts = []
        count = f"{_human(self.done, self.unit)}"
        if self.total is not None:
            count += f"/{_human(self.total, self.unit)}"
        if self.unit and self.unit != "bytes":
            count += f" {self.unit}"
        parts.append(count)
        if self.total is not None:
            parts.append(f"{min(100.0, 100 * self.done / self.total):.0f}%")
        rate = self.done / elapsed
        if self.done and elapsed >= 0.5:
            unit = "B" if self.unit == "bytes" else ""
            parts.append(f"{_human(rate, self.unit)}{unit}/s" if unit else f"{rate:,.0f}/s")
        parts.append(_clock(elapsed))
        if self.total is not None and rate > 0 and self.done < self.total:
            parts.append(f"ETA {_clock((self.total - self.done) / rate)}")
        if self.note:
            parts.append(self.note)
        return "  ".join(parts)

    def _draw(self, now: float) -> None:
        body = self.text(now)
        label = f"{self.label} " if self.label else ""
        if self.tty:
            width = shutil.get_terminal_size((100, 20)).columns
            bar = ""
            if self.total is not None:
                n = 24
                filled = int(n * min(1.0, self.done / self.total))
                bar = "[" + "#" * filled + "." * (n - filled) + "] "
            line = (label + bar + body)[: max(10, width - 1)]
            self.stream.write("\r" + line + "\x1b[K")
            self.drawn = True
        else:
            self.stream.write(f"{label.rstrip()}{': ' if label else ''}{body}\n")
            self.lines += 1
        self.stream.flush()
