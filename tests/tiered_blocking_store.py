"""A remote store for tests, loaded by the broker through remote.log.storage.manager.class.name
(`tests.tiered_blocking_store:BlockingStore`): the local-directory store whose uploads wait until
the file `rsm.config.gate` exists (bounded), leaving a `copy-waiting-<id>` marker beside it."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path

from samsa.storage.remote.local_store import LocalDirectoryRemoteStorageManager
from samsa.storage.remote.rsm import LogSegmentData, RemoteLogSegmentMetadata


class BlockingStore(LocalDirectoryRemoteStorageManager):
    def configure(self, configs: Mapping[str, str]) -> None:
        super().configure(configs)
        self.gate = Path(configs["gate"])

    def copy_log_segment_data(self, meta: RemoteLogSegmentMetadata,
                              data: LogSegmentData) -> bytes | None:
        (self.gate.parent / f"copy-waiting-{meta.id.hex}").touch()
        deadline = time.monotonic() + 120
        while not self.gate.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        return super().copy_log_segment_data(meta, data)
