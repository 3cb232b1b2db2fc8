"""Produce throughput with the web console open and a browser tailing the topic, against the same
broker with no browser, in the same run (issue 18: within 5 %).

One Samsa broker (its admin HTTP listener serves the console in its own thread). First a
big topic (`--big-records`, 3 partitions) is written and the browser's pages on it are timed. Then
rounds rotate five modes on fresh topics: `off` (no browser), `thread-tail` (headless Chromium on
the broker's console, live tail on the topic being produced), `process-tail` (the same page served
by `python -m samsa.console` in a process of its own), and `thread-search` / `process-search` (a
user running bounded searches on the big topic in a loop). Each run produces `--records` records of
`--size` bytes with confluent-kafka (acks=1, one partition). Reported: median MB/s per mode, the
ratio to `off`, the broker's CPU seconds per MB, and what the tail showed (records shown /
skipped), which proves it was live during the run.

    PYTHONPATH=. python bench/console.py --records 200000 --rounds 3
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.testing import SamsaBroker, free_port

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import process_cpu_seconds as cpu_seconds  # noqa: E402


def process_tree(root: int) -> list[int]:
    """A process and all its descendants (the browser is many processes)."""
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(d.name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def tree_cpu_seconds(root: int) -> float:
    total = 0.0
    for pid in process_tree(root):
        try:
            total += cpu_seconds(pid)
        except (OSError, IndexError, ValueError):
            pass  # gone in between
    return total


def renice_tree(root: int, nice: int) -> None:
    """Lower a process tree's priority: the browser stands in for one on a user's own machine,
    so on this shared host it gets the CPU the broker and the producer leave over."""
    for pid in process_tree(root):
        try:
            os.setpriority(os.PRIO_PROCESS, pid, nice)
        except OSError:
            pass


def produce(bs: str, topic: str, records: int, size: int) -> float:
    p = Producer({"bootstrap.servers": bs, "linger.ms": 5, "batch.size": 1 << 20, "acks": 1,
                  "queue.buffering.max.messages": 1_000_000})
    payload = os.urandom(size // 2).hex().encode()[:size]  # text, so the console shows it as such
    p.list_topics(topic, timeout=30)
    t0 = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                p.produce(topic, payload)
                break
            except BufferError:
                p.poll(0.01)
    left = p.flush(120)
    elapsed = time.perf_counter() - t0
    if left:
        raise RuntimeError(f"{left} records not delivered")
    return records * size / elapsed / 1e6


def browser() -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = shutil.which("chromium") or "chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1280,1000"):
        opts.add_argument(arg)
    return webdriver.Chrome(service=Service(shutil.which("chromedriver") or "chromedriver"), options=opts)


def open_tail(driver: Any, console: str, topic: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(f"{console}/topics/{topic}/messages")
    driver.find_element(By.ID, "tail").click()
    WebDriverWait(driver, 30).until(
        lambda d: d.find_element(By.ID, "tail-status").text.startswith("live"))


class SseReader:
    """The live tail's event stream read by curl with the browser's session cookie: what serving
    a tail costs the broker, without a browser rendering it on the same two cores."""

    def __init__(self, driver: Any, console: str, topic: str) -> None:
        driver.get(f"{console}/topics/{topic}/messages")  # signs in (the cookie) and checks the page
        cookies = "; ".join(f"{c['name']}={c['value']}" for c in driver.get_cookies())
        driver.get("about:blank")
        self.out = tempfile.NamedTemporaryFile(prefix="samsa-bench-sse-", suffix=".txt")
        self.proc = subprocess.Popen(["curl", "-sN", "-H", f"Cookie: {cookies}",
                                      f"{console}/topics/{topic}/tail"], stdout=self.out)
        deadline = time.monotonic() + 30
        while b"tail started" not in Path(self.out.name).read_bytes():
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError("the tail's event stream did not start")
            time.sleep(0.05)

    def close(self) -> str:
        self.proc.terminate()
        self.proc.wait(10)
        text = Path(self.out.name).read_text()
        self.out.close()
        return f"{text.count('event: records')} record events, {text.count('event: skipped')} skip events"


def tail_status(driver: Any) -> str:
    from selenium.webdriver.common.by import By

    return str(driver.find_element(By.ID, "tail-status").text)


def wait_http(url: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not answer")


def big_topic_pages(bs: str, console: str, records: int) -> list[str]:
    """How long the message browser's pages take on a topic of `records` records (3 partitions,
    100-byte values): median of 5 requests each."""
    import httpx

    topic = "bench-console-big"
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(30)
    p = Producer({"bootstrap.servers": bs, "linger.ms": 20, "batch.size": 1 << 20,
                  "queue.buffering.max.messages": 1_000_000, "compression.type": "lz4"})
    t_mid = 0
    for i in range(records):
        if i == records // 2:
            t_mid = int(time.time() * 1000)
        while True:
            try:
                p.produce(topic, key=str(i).encode(), value=b"v%09d" % i + b"." * 90, partition=i % 3)
                break
            except BufferError:
                p.poll(0.01)
    if p.flush(300):
        raise RuntimeError("big topic not fully produced")
    pages = [("topic list", "/topics"), ("topic page", f"/topics/{topic}"),
             ("newest 50", f"/topics/{topic}/messages"),
             ("from the beginning, 50", f"/topics/{topic}/messages?mode=beginning"),
             ("from offset (middle), partition 1", f"/topics/{topic}/messages?mode=offset&value="
                                                   f"{records // 6}&partition=1"),
             ("from a time (middle)", f"/topics/{topic}/messages?mode=timestamp&value={t_mid}"),
             ("search, no match (bounded scan)", f"/topics/{topic}/messages?mode=beginning&search=zzz"),
             ("search, match near the end", f"/topics/{topic}/messages?mode=offset&value="
                                            f"{records // 3 - 2000}&search=v{records - 3:09d}")]
    rows = [f"Message browser on a topic of {records:,} records (3 partitions, 100 B values), "
            "served by the broker's admin listener: median of 5 requests", "",
            "| page | median ms | max ms |", "|---|---:|---:|"]
    with httpx.Client(base_url=console, timeout=60) as client:
        for name, path in pages:
            times = []
            for _ in range(5):
                t0 = time.perf_counter()
                r = client.get(path)
                times.append((time.perf_counter() - t0) * 1000)
                if r.status_code != 200:
                    raise RuntimeError(f"{path}: HTTP {r.status_code}")
            rows.append(f"| {name} | {statistics.median(times):.0f} | {max(times):.0f} |")
            print(rows[-1], file=sys.stderr, flush=True)
    return rows


class Searcher:
    """A user running bounded searches (no match: each scans up to the page's limits) on the big
    topic in a loop, from a thread of this process, while a produce run is timed."""

    def __init__(self, console: str, topic: str) -> None:
        import threading

        self.url = f"{console}/topics/{topic}/messages?mode=beginning&search=zzz"
        self.stop = threading.Event()
        self.count = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        import httpx

        with httpx.Client(timeout=60) as client:
            while not self.stop.is_set():
                client.get(self.url).raise_for_status()
                self.count += 1

    def __enter__(self) -> Searcher:
        self.thread.start()
        time.sleep(0.5)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(60)


MODES = {"off": "no browser",
         "thread-tail": "browser tailing, console in the broker's admin thread",
         "process-tail": "browser tailing, console in its own process",
         "thread-sse": "the tail's event stream read without rendering (curl), console in the admin thread",
         "thread-search": "searches in a loop, console in the broker's admin thread",
         "process-search": "searches in a loop, console in its own process"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--big-records", type=int, default=1_000_000,
                    help="records of the big topic whose pages are timed and searched")
    ap.add_argument("--modes", default=",".join(MODES), help="comma-separated; 'off' always runs")
    ap.add_argument("--out", default="bench/results/console-latest.md")
    ap.add_argument("--warmup", type=int, default=1, help="uncounted rounds first (a new broker is slower)")
    ap.add_argument("--browser-nice", type=int, default=0,
                    help="nice value of the browser's processes (19: it stands in for a browser "
                         "on another machine and gets only the CPU left over)")
    ap.add_argument("--data-parent", default=None,
                    help="where the broker's data dir goes, e.g. /dev/shm to keep disk write-back out")
    args = ap.parse_args()
    modes = ["off"] + [m for m in args.modes.split(",") if m in MODES and m != "off"]
    mb_s: dict[str, list[float]] = {m: [] for m in modes}
    cpu_mb: dict[str, list[float]] = {m: [] for m in modes}
    browser_mb: dict[str, list[float]] = {m: [] for m in modes}
    notes: dict[str, list[str]] = {m: [] for m in modes}
    with tempfile.TemporaryDirectory(prefix="samsa-bench-console-", dir=args.data_parent) as tmp, \
            SamsaBroker(Path(tmp) / "data") as b:
        assert b.proc is not None and b.admin_url
        wait_http(b.admin_url + "/")
        port = free_port()
        standalone = subprocess.Popen([sys.executable, "-m", "samsa.console", "--bootstrap-server",
                                       b.bootstrap, "--listen", f"127.0.0.1:{port}"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        consoles = {"thread": b.admin_url, "process": f"http://127.0.0.1:{port}"}
        driver = browser()
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        try:
            wait_http(consoles["process"] + "/")
            big = big_topic_pages(b.bootstrap, b.admin_url, args.big_records) if args.big_records else []
            for rnd in range(-args.warmup, args.rounds):
                counted = rnd >= 0
                order = modes[rnd % len(modes):] + modes[:rnd % len(modes)]
                for mode in order:
                    topic = f"bench-console-{mode}-{uuid.uuid4().hex[:6]}"
                    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
                    where, _, action = mode.partition("-")
                    driver.get("about:blank")
                    if action == "tail":
                        open_tail(driver, consoles[where], topic)
                    sse = SseReader(driver, consoles[where], topic) if action == "sse" else None
                    searcher = Searcher(consoles[where], "bench-console-big") if action == "search" else None
                    if args.browser_nice:
                        renice_tree(driver.service.process.pid, args.browser_nice)
                    cpu0 = cpu_seconds(b.proc.pid)
                    browser0 = tree_cpu_seconds(driver.service.process.pid)
                    if searcher is not None:
                        with searcher:
                            rate = produce(b.bootstrap, topic, args.records, args.size)
                        note = f"{searcher.count} searches"
                    else:
                        rate = produce(b.bootstrap, topic, args.records, args.size)
                        note = ""
                    cpu = cpu_seconds(b.proc.pid) - cpu0
                    browser_cpu = tree_cpu_seconds(driver.service.process.pid) - browser0
                    if action == "tail":
                        time.sleep(1.0)  # the tail's last tick
                        note = tail_status(driver)
                    if sse is not None:
                        time.sleep(1.0)
                        note = sse.close()
                    admin.delete_topics([topic])[topic].result(60)  # keep the disk use flat
                    print(f"round {rnd + 1} {mode:<15} {rate:7.1f} MB/s  broker CPU "
                          f"{cpu * 1e9 / (args.records * args.size):.2f} ms/MB, browser "
                          f"{browser_cpu * 1e9 / (args.records * args.size):.2f} ms/MB  {note}"
                          + ("" if counted else "  (warm-up, not counted)"), file=sys.stderr, flush=True)
                    if not counted:
                        continue
                    mb_s[mode].append(rate)
                    cpu_mb[mode].append(cpu / (args.records * args.size / 1e6))
                    browser_mb[mode].append(browser_cpu / (args.records * args.size / 1e6))
                    notes[mode].append(note)
        finally:
            driver.quit()
            standalone.terminate()
            standalone.wait(10)
    med = {m: statistics.median(v) for m, v in mb_s.items()}
    # the host's speed drifts between rounds far more than within one, so each mode is also
    # compared with the `off` run of its own round (the median of those paired ratios)
    paired = {m: statistics.median(a / o for a, o in zip(mb_s[m], mb_s["off"], strict=True)) for m in modes}
    lines = [f"{args.records} records x {args.size} B per produce run, {args.rounds} rounds (medians) after "
             f"{args.warmup} warm-up round(s), confluent-kafka, acks=1, one partition; the modes rotate "
             f"within each round; data dir under {args.data_parent or tempfile.gettempdir()}; "
             f"browser at nice {args.browser_nice}", "",
             "| while producing | produce MB/s | vs no browser (medians) | vs no browser (median of "
             "per-round ratios) | broker CPU ms/MB | browser CPU ms/MB | runs (MB/s) |",
             "|---|---:|---:|---:|---:|---:|---|"]
    for m in modes:
        lines.append(f"| {MODES[m]} | {med[m]:.1f} | {med[m] / med['off']:.1%} | {paired[m]:.1%} | "
                     f"{statistics.median(cpu_mb[m]) * 1000:.2f} | "
                     f"{statistics.median(browser_mb[m]) * 1000:.2f} | "
                     f"{', '.join(f'{x:.1f}' for x in mb_s[m])} |")
    lines += ["", "During each run: " + "; ".join(f"{m}: {' / '.join(notes[m])}" for m in modes[1:])]
    lines += [""] + big
    text = "\n".join(lines)
    print("\n" + text)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
