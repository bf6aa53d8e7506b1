"""Progress bars for the CLI, fed by loomdb's progress messages (NOTICEs or log records)."""

from __future__ import annotations

import re
import sys
from typing import Any

from tqdm import tqdm

EPOCH = re.compile(r"epoch (\d+)/(\d+)")


class ProgressBars:
    """Turns "… epoch e/E, loss …" messages into a bar; other messages are printed."""

    def __init__(self, enabled: bool = True):
        self.enabled = enabled
        self.bar: Any = None

    def message(self, text: str) -> None:
        match = EPOCH.search(text)
        if not match:
            self.close()
            print(text, file=sys.stderr)
            return
        epoch, total = int(match.group(1)), int(match.group(2))
        if self.bar is None or epoch == 1:
            self.close()
            self.bar = tqdm(
                total=total,
                desc="training",
                unit="epoch",
                disable=not self.enabled,
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
