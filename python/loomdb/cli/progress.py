"""Progress bars for the CLI, fed by loomdb's progress messages (NOTICEs or log records).
No paper section."""

from __future__ import annotations

import re
import sys
from typing import Any

EPOCH = re.compile(r"epoch (\d+)/(\d+)")


class ProgressBars:
    """Turns "… epoch e/E, loss …" messages into a bar on a terminal; other messages, and
    every message when stderr is not a terminal (a log, CI), are printed as plain lines."""

    def __init__(self, enabled: bool = True, bars: bool = True):
        self.enabled = enabled
        self.bars = bars
        self.bar: Any = None

    def message(self, text: str) -> None:
        if not self.enabled:
            return
        if not self.bars:
            print(text, file=sys.stderr, flush=True)
            return
        match = EPOCH.search(text)
        if not match:
            self.close()
            print(text, file=sys.stderr)
            return
        epoch, total = int(match.group(1)), int(match.group(2))
        if self.bar is None or epoch == 1:
            from tqdm import tqdm  # only where a bar is drawn: its import costs every start

            self.close()
            self.bar = tqdm(
                total=total,
                desc="training",
                unit="epoch",
                file=sys.stderr,
                leave=False,
            )
        self.bar.set_postfix_str(text.split(", ", 1)[1] if ", " in text else "")
        self.bar.update(epoch - self.bar.n)
        if epoch >= total:
            self.close()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
