"""The options that several commands take, each declared once here: the dataset, the
model, the fanouts, the subgraph samplers' options, the benchmarks' batches and peers
(``--vs``), the out-of-core store, precision and the workers. A command module adds the
groups it takes to its parser, passing the default or help that differ between commands."""

from __future__ import annotations

import argparse
from pathlib import Path

from graphengine.data.disk_io import ACCESS
from graphengine.datasets import CATALOG
from graphengine.datasets.catalog import PAPERS_SCALE, is_heterogeneous
from graphengine.datasets.dataset import CACHE_POLICIES, DEFAULT_CACHE_POLICY, FEATURE_READS
from graphengine.parallel.select import PARALLEL_MODES

from . import values

ROOT_HELP = "data root (default: $GRAPHENGINE_DATA or datasets/)"
FANOUTS_HELP = (
    "neighbors sampled per hop, comma-separated, first hop (the seeds' neighbors) first; "
    "-1 takes all neighbors; one hop per model layer (e.g. 15,10,5 or -1,-1)"
)
DEFAULT_FANOUTS = [15, 10, 5]
# The dataset the benchmarks default to: products-sized, generated on first use.
BENCH_DATASET = "synthetic-products"
# DGL is a benchmark peer, never a dependency: the hint says what makes it importable.
DGL_HINT = "benchmark only: DGL 2.1 importable, e.g. pip install dgl or its directory on PYTHONPATH"
PEERS = ["dgl", "pyg"]
PRECISIONS = ("fp32", "bf16")


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions and epilogs kept as written; each option's default after its help
    (lists comma-separated as typed; none for flags, empty lists and options without one)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text, default = action.help or "", action.default
        if not action.option_strings or default is None or default is False or default == []:
            return text
        if default is argparse.SUPPRESS or "%(default)" in text:
            return text
        if not isinstance(default, list):
            return f"{text} (default: %(default)s)"
        # argparse %-formats the help: a list's "5%" must reach it as "5%%".
        shown = ",".join(map(str, default)).replace("%", "%%")
        return f"{text} (default: {shown})"


def add_command(commands, name: str, help: str, **kwargs) -> argparse.ArgumentParser:
    """A subcommand of ``commands`` (an argparse subparsers action) with the shared
    :class:`HelpFormatter`."""
    return commands.add_parser(name, help=help, formatter_class=HelpFormatter, **kwargs)


def add_root(parser: argparse.ArgumentParser) -> None:
    """``--root``: the data root."""
    parser.add_argument("--root", help=ROOT_HELP)


def add_dataset(
    parser: argparse.ArgumentParser, default: str = "synthetic-small", heterogeneous: bool = False
) -> None:
    """``--dataset``, ``--root`` and ``--scale`` (synthetic-papers' size; the command line
    is checked and ``--dataset`` renamed to the scaled store by :func:`apply_scale`). The help
    lists the heterogeneous catalog datasets only for a command that takes them."""
    names = [name for name in CATALOG if heterogeneous or not is_heterogeneous(name)]
    parser.add_argument(
        "--dataset",
        default=default,
        help=f"a catalog name ({', '.join(names)}), the folder of a store graphengine wrote "
        "(generate, convert, reorder), or the path of a gnn-benchmark .npz file",
    )
    add_root(parser)
    add_scale(
        parser,
        help=f"synthetic-papers' size: 2^S nodes (default {PAPERS_SCALE}); its store is "
        "generated on first use (disk: about 600 bytes a node)",
    )


def add_scale(parser: argparse.ArgumentParser, help: str) -> None:
    """``--scale S``: synthetic-papers with 2^S nodes (see :func:`apply_scale`)."""
    parser.add_argument("--scale", type=values.papers_scale, help=help)


def add_model(parser: argparse.ArgumentParser, choices: list[str], help: str) -> None:
    """``--model``: the GNN, GraphSAGE by default."""
    parser.add_argument("--model", choices=choices, default="sage", help=help)


def add_clusters_per_batch(
    parser: argparse.ArgumentParser, help: str, default: int | None = None
) -> None:
    """``--clusters-per-batch``: Cluster-GCN's METIS clusters merged into one batch."""
    parser.add_argument("--clusters-per-batch", type=values.at_least(1), default=default, help=help)


def add_walk_length(
    parser: argparse.ArgumentParser, help: str, default: int | None = None, shortest: int = 1
) -> None:
    """``--walk-length``: the steps of each GraphSAINT random walk, at least ``shortest``
    and at most :data:`~graphengine.cli.values.MAX_WALK_LENGTH`."""
    parser.add_argument(
        "--walk-length",
        type=values.between(shortest, values.MAX_WALK_LENGTH, f"[{shortest}, 2^16]"),
        default=default,
        help=help,
    )


def add_fanouts(parser: argparse.ArgumentParser, help: str = FANOUTS_HELP) -> None:
    """``--fanouts``: neighbors per hop (a list of ints, ``-1`` for all)."""
    parser.add_argument("--fanouts", type=values.fanouts, default=DEFAULT_FANOUTS, help=help)


def add_peers(parser: argparse.ArgumentParser, help: str) -> None:
    """``--vs``: the other libraries a benchmark also times (a list, empty by default)."""
    parser.add_argument("--vs", nargs="+", choices=PEERS, default=[], help=help)


def add_plot(parser: argparse.ArgumentParser, help: str) -> None:
    """``--plot FILE.png``: also draw the benchmark's results to a file (needs matplotlib)."""
    parser.add_argument("--plot", type=Path, metavar="FILE.png", help=help)


def add_timed_batches(
    parser: argparse.ArgumentParser, default: int, help: str = "batches timed"
) -> None:
    """``--batches``: how many batches (or steps) a benchmark times."""
    parser.add_argument("--batches", type=values.at_least(1), default=default, help=help)


def add_threads(
    parser: argparse.ArgumentParser, default: int = 1, help: str = "sampling threads"
) -> None:
    """``--threads``: the threads a benchmark runs its work on."""
    parser.add_argument("--threads", type=values.at_least(1), default=default, help=help)


def add_batch_size(parser: argparse.ArgumentParser, help: str = "seeds per batch") -> None:
    """``--batch-size``: seeds per batch."""
    parser.add_argument("--batch-size", type=values.at_least(1), default=1024, help=help)


def add_hidden(parser: argparse.ArgumentParser, default: int) -> None:
    """``--hidden``: the model's hidden channels."""
    parser.add_argument(
        "--hidden", type=values.hidden, default=default, help="hidden channels, in [1, 2^20]"
    )


def add_precision(parser: argparse.ArgumentParser, help: str) -> None:
    """``--precision``: fp32, or training steps under autocast to bf16."""
    parser.add_argument("--precision", choices=PRECISIONS, default="fp32", help=help)


def add_out_of_core(parser: argparse.ArgumentParser) -> None:
    """``--feature-cache``, ``--feature-reads``, ``--cache-policy`` and ``--access``: reading
    a store larger than memory."""
    parser.add_argument(
        "--feature-cache",
        type=values.cache_size,
        help="keep the feature rows of the highest in-degree nodes in memory (rows, a share "
        "of the nodes like 5%%, or bytes like 2GiB), for a store read from disk; with rows "
        "read from disk, the size of their row cache (default: sized from the memory this "
        "process may use)",
    )
    parser.add_argument(
        "--feature-reads",
        choices=FEATURE_READS,
        default="auto",
        help="how feature rows are read from a store on disk: disk (many reads in flight, "
        "direct I/O, through a row cache this process manages), mmap (page faults on the "
        "memory map, the page cache holding them) or auto (disk when the store takes more "
        "than half the memory this process may use)",
    )
    parser.add_argument(
        "--cache-policy",
        choices=CACHE_POLICIES,
        default=DEFAULT_CACHE_POLICY,
        help="the row cache's policy for rows read from disk, both seeded with the highest "
        "in-degree rows: static (keeps them; the default) or sieve (admits the rows batches "
        "read, evicting by SIEVE)",
    )
    parser.add_argument(
        "--access",
        choices=ACCESS,
        help="tell the kernel how the memory-mapped features and graph are read: random "
        "turns off read-ahead (a fault reads its page, not 128 KiB around it) and reads each "
        "batch's feature rows at once; for a store larger than memory",
    )


def add_nproc(parser: argparse.ArgumentParser, help: str) -> None:
    """``--nproc``: worker processes on this machine."""
    parser.add_argument("--nproc", type=values.at_least(1), default=1, help=help)


def add_dist_timeout(parser: argparse.ArgumentParser) -> None:
    """``--dist-timeout``: how long a worker waits for the others before it fails."""
    parser.add_argument(
        "--dist-timeout",
        type=values.dist_timeout,
        default=300.0,
        help="seconds a worker waits for the others before failing, in [1, 604800] (a week)",
    )


def add_parallel(parser: argparse.ArgumentParser, help: str) -> None:
    """``--parallel``: how the workers share the training (data or hybrid)."""
    parser.add_argument("--parallel", choices=PARALLEL_MODES, default="data", help=help)


def join_negative_values(argv: list[str]) -> list[str]:
    """``argv`` with ``--fanouts -1,-1`` written as ``--fanouts=-1,-1``: argparse would
    otherwise read a value starting with ``-`` as an option."""
    out, i = [], 0
    while i < len(argv):
        if argv[i] == "--":
            return out + argv[i:]
        value = argv[i + 1] if i + 1 < len(argv) else ""
        if argv[i] == "--fanouts" and value[:1] == "-" and value[1:2].isdigit():
            out.append(f"--fanouts={value}")
            i += 2
        else:
            out.append(argv[i])
            i += 1
    return out


def apply_scale(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """With ``--scale S``, point ``args.dataset`` at synthetic-papers' store of that size
    (what every command and child process opens); ``--scale`` with another dataset is a
    usage error (exit code 2)."""
    from graphengine.datasets.papers import store_name

    if getattr(args, "scale", None) is None:
        return
    if args.dataset != "synthetic-papers":
        parser.error(f"--scale sizes --dataset synthetic-papers (got {args.dataset!r})")
    args.dataset = store_name(args.scale)


def choices_of(allowed: tuple[str, ...]):
    """An argparse type: comma-separated names, each one of ``allowed``."""

    def parse(text: str) -> list[str]:
        chosen = [name.strip() for name in text.split(",") if name.strip()]
        unknown = [name for name in chosen if name not in allowed]
        if not chosen or unknown:
            raise argparse.ArgumentTypeError(
                f"expected comma-separated names among {', '.join(allowed)} (got {text!r})"
            )
        return chosen

    return parse
