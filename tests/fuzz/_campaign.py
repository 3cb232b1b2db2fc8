"""A fuzz campaign against a live broker that survives the broker's death: every distinct failure
(broker died, Traceback in the log, no answer and no close) is recorded once with the frame that
caused it, the broker is restarted, and the campaign goes on. Used by the long run
(SAMSA_FUZZ_LONG=1) and to write findings; the normal suite stops at the first failure instead.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from samsa.testing import SamsaBroker

from ._support import connect, read_answer, start_broker

_DEATH = re.compile(r"(memory allocation of \d+ bytes failed|panicked at[^\n]*|Fatal Python error[^\n]*"
                    r"|Segmentation fault|MemoryError[^\n]*)")


@dataclass
class Finding:
    kind: str  # died, traceback, silent, wrong-correlation
    signature: str
    label: str
    frame: bytes
    count: int = 1
    apis: set[str] = field(default_factory=set)


@dataclass
class Campaign:
    answer_wait: float = 2.0
    may_wait: frozenset[int] = frozenset({0, 1, 11, 14, 68})
    findings: dict[tuple[str, str], Finding] = field(default_factory=dict)
    sent: int = 0
    restarts: int = 0
    outcomes: dict[str, int] = field(default_factory=lambda: {"answered": 0, "closed": 0,
                                                              "silent": 0})

    def _note(self, kind: str, sig: str, label: str, frame: bytes) -> None:
        k = (kind, sig)
        if k in self.findings:
            self.findings[k].count += 1
        else:
            self.findings[k] = Finding(kind, sig, label, frame)
        self.findings[k].apis.add(" ".join(label.split()[:3]))

    def run(self, items: Iterable[tuple[int, str, bytes]], budget_s: float,
            correlation_id: int | None = None) -> None:
        """items: (api key, label, frame). Stops when the budget is spent."""
        broker = start_broker()
        seen_log = 0
        sock = None
        last = ("", b"")
        start = time.monotonic()
        try:
            for key, label, frame in items:
                if time.monotonic() - start > budget_s:
                    break
                if sock is None:
                    try:
                        sock = connect(broker.bootstrap)
                    except OSError:  # the previous frame killed it: wait for the exit
                        if broker.proc is not None:
                            broker.proc.wait(30)
                        broker, seen_log = self._died(broker, seen_log, last)
                        sock = connect(broker.bootstrap)
                last = (label, frame)
                self.sent += 1
                try:
                    sock.sendall(frame)
                    ans = read_answer(sock, self.answer_wait)
                    got = "closed" if ans is None else "answered"
                except TimeoutError:
                    got, ans = "silent", None
                except OSError:
                    got, ans = "closed", None
                self.outcomes[got] += 1
                if got != "answered":
                    sock.close()
                    sock = None
                if got == "silent" and key not in self.may_wait:
                    self._note("silent", f"api {key}", label, frame)
                if (got == "answered" and ans is not None and correlation_id is not None
                        and int.from_bytes(ans[:4], "big", signed=True) != correlation_id):
                    self._note("wrong-correlation", f"api {key}", label, frame)
                if got == "answered":
                    continue
                time.sleep(0.01)
                text = broker.log_text()
                new, seen_log = text[seen_log:], len(text)
                proc = broker.proc
                if proc is None or proc.poll() is not None:
                    seen_log -= len(new)
                    broker, seen_log = self._died(broker, seen_log, last)
                    sock = None
                elif "Traceback" in new:
                    tb = new[new.index("Traceback"):]
                    lines = tb.splitlines()
                    exc = next((ln for ln in lines[1:] if ln and not ln.startswith(" ")), lines[0])
                    files = [ln.strip() for ln in lines if ln.startswith("  File ")]
                    where = re.sub(r'^File ".*/(samsa/[^"]+)", line \d+, ', r"\1 ", files[-1]) \
                        if files else ""
                    sig = f"{exc} at {where}"
                    self._note("traceback", re.sub(r"\d{3,}", "N", sig)[:160], label, frame)
        finally:
            if sock is not None:
                sock.close()
            broker.close()

    def _died(self, broker: SamsaBroker, seen_log: int,
              last: tuple[str, bytes]) -> tuple[SamsaBroker, int]:
        new = broker.log_text()[seen_log:]
        m = _DEATH.search(new)
        proc = broker.proc
        sig = m.group(1) if m else f"exit {proc and proc.returncode}"
        self._note("died", re.sub(r"\d{6,}", "N", sig), last[0], last[1])
        broker.close()
        self.restarts += 1
        return start_broker(), 0

    def report(self) -> str:
        lines = [f"sent {self.sent}, outcomes {self.outcomes}, restarts {self.restarts}, "
                 f"distinct findings {len(self.findings)}"]
        for f in self.findings.values():
            lines.append(f"- [{f.kind}] {f.signature} (x{f.count}) first: {f.label}\n"
                         f"  in: {', '.join(sorted(f.apis))}\n"
                         f"  frame {f.frame[:160].hex()}{'...' if len(f.frame) > 160 else ''}")
        return "\n".join(lines)


