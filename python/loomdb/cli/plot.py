"""``loomdb plot MODEL [MODEL …]``: the loss per epoch of trained models, as a PNG.

No paper section.  The curves are ``loom_training_info`` rows read through SQL from either
engine: the training loss (solid), the validation loss where one was held out (dashed), and,
for a model that read an mlweaving index at changing precision (the adaptive schedule), a
second panel with the bits read per epoch.  Several models share the axes, so runs at 2, 4 and
32 bits compare at a glance.  Needs matplotlib (``pip install 'loomdb[plot]'``).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from loomdb.errors import LoomNotFoundError, LoomOptionError, LoomStateError

QUERY = "SELECT epoch, loss, validation_loss, precision FROM {function}('{model}') ORDER BY epoch"


@dataclass
class Curve:
    model: str
    epochs: list[int]
    loss: list[float]
    validation: list[float | None]
    precision: list[int | None]

    @property
    def varying_precision(self) -> bool:
        return len({p for p in self.precision if p is not None}) > 1


def curves(
    rows_of: Any, models: Sequence[str], function: str = "loom_training_info"
) -> list[Curve]:
    """``rows_of(sql)`` runs a query on the chosen engine; one curve per model, read with
    ``function`` (loom_training_info as the engine must call it: PostgreSQL's named with the
    extension's schema)."""
    from loomdb.store.names import check_name

    out = []
    for model in models:
        rows = rows_of(QUERY.format(function=function, model=check_name(model, "model")))
        if not rows:
            raise LoomStateError(
                f"model '{model}' has no recorded epochs", hint="train it with loom_train"
            )
        epochs, loss, validation, precision = (list(c) for c in zip(*rows))
        out.append(Curve(model, epochs, loss, validation, precision))
    return out


def draw(found: list[Curve], path: str, title: str | None = None) -> None:
    try:
        import matplotlib
    except ImportError:
        raise LoomStateError(
            "loomdb plot needs matplotlib", hint="pip install 'loomdb[plot]'"
        ) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    bits = any(c.varying_precision for c in found)
    fig, axes = plt.subplots(
        2 if bits else 1, 1, sharex=True, figsize=(8, 6 if bits else 4.5), squeeze=False
    )
    ax = axes[0][0]
    colours = {}
    for c in found:
        (line,) = ax.plot(c.epochs, c.loss, label=c.model)
        colours[c.model] = line.get_color()
        if any(v is not None for v in c.validation):
            ax.plot(c.epochs, c.validation, "--", color=colours[c.model], label=f"{c.model} (val)")
    ax.set_ylabel("loss")
    if max(max(c.loss) for c in found) > 10 * min(min(c.loss) for c in found):
        ax.set_yscale("log")
    ax.set_title(title or "loss per epoch")
    ax.legend()
    ax.grid(alpha=0.3)
    if bits:
        bx = axes[1][0]
        for c in found:
            if c.varying_precision:
                bx.step(c.epochs, c.precision, where="post", color=colours[c.model], label=c.model)
        bx.set_ylabel("bits read")
        bx.legend()
        bx.grid(alpha=0.3)
    axes[-1][0].set_xlabel("epoch")
    fig.tight_layout()
    try:
        _save(fig, path)
    finally:
        plt.close(fig)


def _save(fig: Any, path: str) -> None:
    """The figure at exactly ``path`` (a PNG where it has no suffix; matplotlib alone would
    write ``path.png``), written beside it first and renamed, so a write that fails leaves no
    half-written image and an older one there unharmed; a failure is a LoomStateError."""
    import tempfile

    suffix = os.path.splitext(path)[1][1:].lower() or "png"
    partial = None
    try:
        fd, partial = tempfile.mkstemp(
            prefix=".loomdb-plot-", suffix=f".{suffix}", dir=os.path.dirname(path) or "."
        )
        os.close(fd)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(partial, 0o666 & ~umask)  # as a file the process made itself would be
        fig.savefig(partial, dpi=100, format=suffix)
        os.replace(partial, path)
    except OSError as e:
        if partial is not None and os.path.exists(partial):
            os.unlink(partial)
        raise LoomStateError(
            f"cannot write {path}: {e.strerror or e}",
            hint="check the free space and the rights in -o's folder, or give another -o",
        ) from None


def writable_image(path: str) -> str:
    """``path``, refused before anything is read where the PNG could not be written there: a
    folder that does not exist or is not writable, a folder's own path, or a name whose suffix
    matplotlib cannot draw."""
    folder = os.path.dirname(path) or "."
    if not os.path.isdir(folder):
        raise LoomNotFoundError(
            f"cannot write {path}: there is no folder {folder}",
            hint="give -o in a folder that exists",
        )
    if not os.access(folder, os.W_OK):
        raise LoomStateError(
            f"cannot write {path}: the folder {folder} is not writable by this user",
            hint="give -o in a folder you may write to",
        )
    if os.path.isdir(path):
        raise LoomStateError(
            f"cannot write {path}: it is a folder",
            hint=f"give -o a file's name, e.g. {os.path.join(path, 'loss.png')}",
        )
    suffix = os.path.splitext(path)[1][1:].lower()
    if suffix:
        try:
            from matplotlib.backend_bases import FigureCanvasBase
        except ImportError:
            return path  # draw says what is missing
        known = FigureCanvasBase.get_supported_filetypes()
        if suffix not in known:
            raise LoomOptionError(
                f"cannot draw {path}: matplotlib writes no '.{suffix}' files",
                hint=f"end -o with one of {', '.join('.' + k for k in sorted(known))}",
            )
    return path


def run_plot(args: argparse.Namespace) -> int:
    path = writable_image(args.output or f"{args.models[0]}-loss.png")
    if args.duckdb is not None:
        from loomdb.cli.connect import duckdb, existing_duckdb

        con = duckdb(existing_duckdb(args.duckdb), progress=False)
        try:
            found = curves(lambda sql: con.execute(sql).fetchall(), args.models)
        finally:
            con.close()
    else:
        from loomdb.cli.connect import postgres
        from loomdb.engines.postgres.client import PsycopgDatabase, extension_schema
        from loomdb.store.names import quote_ident

        with postgres(args.dsn) as conn:
            db = PsycopgDatabase(conn)
            function = f"{quote_ident(extension_schema(db))}.loom_training_info"
            found = curves(db.query, args.models, function)
    draw(found, path, args.title)
    print(path)
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("models", nargs="+", metavar="MODEL", help="trained models to draw")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--duckdb", metavar="PATH", help="a DuckDB database file")
    where.add_argument("--dsn", help="a PostgreSQL connection string")
    parser.add_argument("-o", "--output", metavar="PNG", help="default: <first model>-loss.png")
    parser.add_argument("--title", help="the chart's title")
