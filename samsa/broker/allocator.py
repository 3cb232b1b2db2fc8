"""glibc malloc settings for the broker process.

Every produce request allocates and frees a few MiB (its frame, the decoded request, the batch
views). With glibc's defaults the heap grows for it and its free top is trimmed back to the
kernel afterwards, so the next request faults in and zeroes fresh pages again: about 460 page
faults per MB produced, and twice the broker CPU per MB (`bench/tls_compare.py --perf-stat`: 1.5
against 0.6-0.75 ms/MB on the 2-core test host; `tests/integration/test_allocator.py`). Fixed
thresholds keep the heap's free top mapped (TRIM_THRESHOLD, TOP_PAD: the part that matters) and
blocks below 32 MiB in the heap, so every request reuses warm pages. The price is resident
memory: up to TRIM_THRESHOLD + TOP_PAD of freed memory may stay mapped.

Set `SAMSA_MALLOC_TUNING=off` in the environment to keep glibc's defaults.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import platform

log = logging.getLogger(__name__)

# mallopt parameter numbers from glibc's malloc.h
M_TRIM_THRESHOLD = -1
M_TOP_PAD = -2
M_MMAP_THRESHOLD = -3

MMAP_THRESHOLD = 32 << 20  # glibc's maximum on 64-bit; larger blocks are still mmap'ed
TRIM_THRESHOLD = 32 << 20  # 16 MiB already stops the churn; the RSS cost stays small
TOP_PAD = 8 << 20


def tune_allocator() -> bool:
    """Apply the settings above to this process (glibc only); True if they were applied."""
    if os.environ.get("SAMSA_MALLOC_TUNING", "").lower() in ("off", "0", "false", "no"):
        return False
    if platform.libc_ver()[0] != "glibc":
        return False
    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    ok = all([mallopt(param, value) == 1 for param, value in (
        (M_MMAP_THRESHOLD, MMAP_THRESHOLD), (M_TRIM_THRESHOLD, TRIM_THRESHOLD), (M_TOP_PAD, TOP_PAD))])
    if not ok:
        log.warning("glibc refused a malloc setting: large request buffers may be re-mapped")
    return ok
