"""Where the broker's time goes under produce/consume load, PLAINTEXT vs SSL (py-spy samples).

One broker with a PLAINTEXT and an SSL listener (as bench/tls.py); for each protocol a producer
sends `--records` records of `--size` bytes and a consumer reads them back while
`py-spy record --native` samples the broker process. Prints, per protocol, the functions with the
most samples (self time, and inclusive time for a few of interest) and the broker's CPU per MB.

    PYTHONPATH=. python bench/tls_profile.py --records 200000 --phase produce
"""

from __future__ import annotations

import argparse
import collections
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tls import consume, cpu_seconds, produce  # noqa: E402

from samsa.testing import SamsaBroker, free_port  # noqa: E402
from samsa.testing.tls import TlsFiles, ssl_listener_overrides  # noqa: E402


def summarize(raw: Path, top: int) -> None:
    """py-spy's raw (collapsed) output -> the functions with the most self and inclusive samples."""
    own: collections.Counter[str] = collections.Counter()
    incl: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack:
            continue
        k = int(n)
        total += k
        frames = [f.split(" (")[0] + " " + f.rsplit("/", 1)[-1].split(":")[0].rstrip(")")
                  for f in stack.split(";")]
        own[frames[-1]] += k
        for f in set(frames):
            incl[f] += k
    print(f"  {total} samples")
    print("  self:")
    for f, k in own.most_common(top):
        print(f"    {k / total:6.1%}  {f}")
    print("  inclusive:")
    for f, k in incl.most_common(top + 10):
        print(f"    {k / total:6.1%}  {f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--phase", choices=("produce", "consume", "both"), default="both")
    ap.add_argument("--protocols", default="PLAINTEXT,SSL")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--rate", type=int, default=100, help="py-spy samples per second")
    ap.add_argument("--tool", choices=("py-spy", "perf"), default="py-spy")
    ap.add_argument("--out", default=None, help="keep py-spy's raw files in this directory")
    args = ap.parse_args()
    pyspy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    with tempfile.TemporaryDirectory(prefix="samsa-tls-profile-") as tmp:
        out = Path(args.out or tmp)
        out.mkdir(parents=True, exist_ok=True)
        tls = TlsFiles.create(Path(tmp) / "certs")
        plain = free_port()
        overrides, ssl_port = ssl_listener_overrides(tls, plain)
        overrides["listeners"] = f"SSL://127.0.0.1:{ssl_port},PLAINTEXT://127.0.0.1:{plain}"
        protocols = {"PLAINTEXT": (f"127.0.0.1:{plain}", {}),
                     "SSL": (f"127.0.0.1:{ssl_port}", tls.confluent())}
        with SamsaBroker(Path(tmp) / "data", port=plain, overrides=overrides) as b:
            assert b.proc is not None
            for proto in args.protocols.split(","):
                bs, conf = protocols[proto]
                topic = f"prof-{proto.lower()}-{uuid.uuid4().hex[:6]}"
                if args.phase == "consume":  # load the topic first, unprofiled
                    produce(bs, conf, topic, args.records, args.size)
                raw = out / f"{proto}.raw"
                if args.tool == "perf":
                    cmd = ["perf", "record", "-F", str(args.rate), "-g", "-p", str(b.proc.pid),
                           "-o", str(out / f"{proto}.perf")]
                else:
                    cmd = [pyspy, "record", "--pid", str(b.proc.pid), "--native", "--rate",
                           str(args.rate), "--format", "raw", "--output", str(raw)]
                spy = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                time.sleep(1.0)
                cpu0 = cpu_seconds(b.proc.pid)
                mb = args.records * args.size / 1e6
                rates = []
                if args.phase in ("produce", "both"):
                    rates.append(f"produce {produce(bs, conf, topic, args.records, args.size):.1f}")
                if args.phase in ("consume", "both"):
                    rates.append(f"consume {consume(bs, conf, topic, args.records, args.size):.1f}")
                cpu = cpu_seconds(b.proc.pid) - cpu0
                spy.send_signal(signal.SIGINT)
                spy.wait(60)
                moved = mb * (2 if args.phase == "both" else 1)
                print(f"\n== {proto}: {', '.join(rates)} MB/s; broker CPU "
                      f"{cpu / moved * 1000:.2f} ms/MB", flush=True)
                if args.tool == "perf":
                    report = subprocess.run(
                        ["perf", "report", "-i", str(out / f"{proto}.perf"), "--no-children",
                         "--sort", "dso,sym", "--stdio", "-g", "none", "--percent-limit", "0.7"],
                        capture_output=True, text=True)
                    print("\n".join(ln for ln in report.stdout.splitlines()
                                    if ln.strip() and not ln.startswith("#")))
                elif raw.exists():
                    summarize(raw, args.top)


if __name__ == "__main__":
    main()
