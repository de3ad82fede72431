"""The documentation's examples work as written: every ``graphengine`` command in the README and
the site's pages parses, the cheap ones run, and the Python examples of the README and the
getting-started page train."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from graphengine import cli
from graphengine.cli import main
from graphengine.cli.options import join_negative_values
from graphengine.datasets import CATALOG
from tests.conftest import SHARED_DATASETS

REPO = Path(__file__).resolve().parents[2]
# The archive records commands as they were when each run was made; the rest is current.
PAGES = [
    REPO / "README.md",
    *sorted(p for p in (REPO / "docs").rglob("*.md") if p.name != "benchmarks-archive.md"),
]
# Examples a user runs top to bottom, each page's blocks in one namespace.
PYTHON_PAGES = [REPO / "README.md", REPO / "docs" / "getting-started.md"]
# Datasets small enough to train an epoch of in a test; commands on others only parse.
SMALL_DATASETS = {
    "synthetic-small",
    "synthetic-hetero",
    "synthetic-hetero-s",
    "cora",
    "citeseer",
    "pubmed",
    "synthetic-papers",
}
PLANETOID = {"cora", "citeseer", "pubmed"}


def doc_commands() -> list[tuple[str, str]]:
    """``(page, command)`` for every ``graphengine ...`` line of the pages' bash blocks,
    continuations joined."""
    commands = []
    for page in PAGES:
        text = page.read_text()
        for block in re.findall(r"```(?:bash|console|sh)\n(.*?)```", text, flags=re.S):
            for line in block.replace("\\\n", " ").splitlines():
                line = line.strip().removeprefix("$ ")
                if line.startswith("graphengine "):
                    commands.append((str(page.relative_to(REPO)), line))
    return commands


def doc_argv(command: str) -> list[str]:
    """``command`` as argv for :func:`main`: no comment, optional ``[...]`` parts taken."""
    return shlex.split(re.sub(r"\[([^\]]*)\]", r"\1", command), comments=True)[1:]


def dataset_of(argv: list[str]) -> str:
    return argv[argv.index("--dataset") + 1] if "--dataset" in argv else "synthetic-small"


def is_cheap(argv: list[str]) -> bool:
    """A command that runs in seconds: ``datasets``, or ``train`` in one process on a small
    dataset or a real dataset's file."""
    if argv[0] == "datasets":
        return True
    if argv[0] != "train" or "--nproc" in argv or "--partitions" in argv:
        return False
    dataset = dataset_of(argv)
    return dataset in SMALL_DATASETS or dataset.endswith(".npz")


def with_real_data(argv: list[str]) -> list[str]:
    """``argv`` with the pages' placeholder folder ``DIR`` of a real dataset's files (a
    Planetoid root, a gnn-benchmark ``.npz``) replaced by the shared copy; skips the test
    where there is none."""
    dataset = dataset_of(argv)
    if dataset in PLANETOID and "--root" in argv:
        root = SHARED_DATASETS / "planetoid"
        argv[argv.index("--root") + 1] = str(root)
        files = CATALOG[dataset].location(root)
    elif dataset.startswith("DIR/") and dataset.endswith(".npz"):
        files = SHARED_DATASETS / "gnn-benchmark" / dataset[4:]
        argv[argv.index("--dataset") + 1] = str(files)
    else:
        return argv
    if not files.exists():  # never downloaded: the tests run offline
        pytest.skip(f"real dataset files not found at {files}")
    return argv


def test_the_pages_show_commands():
    commands = [command for _, command in doc_commands()]
    assert len(commands) >= 10
    assert any(command.startswith("graphengine train") for command in commands)


@pytest.mark.parametrize("page, command", doc_commands())
def test_doc_command_parses(page, command):
    args = cli.build_parser().parse_args(join_negative_values(doc_argv(command)))
    assert args.run is not None


CHEAP = [(page, command) for page, command in doc_commands() if is_cheap(doc_argv(command))]


@pytest.mark.parametrize("page, command", CHEAP)
def test_doc_command_runs(page, command, tmp_path, monkeypatch, capsys):
    argv = doc_argv(command)
    if "--scale" in argv:  # the pages' papers are several GB: the same command, smaller
        argv[argv.index("--scale") + 1] = "14"
    if argv[0] == "train":
        if "--epochs" in argv:
            argv[argv.index("--epochs") + 1] = "1"
        else:
            argv += ["--epochs", "1"]
        argv += ["--no-progress"]
    argv = with_real_data(argv)
    if "--root" not in argv and not dataset_of(argv).endswith(".npz"):
        argv += ["--root", str(tmp_path)]
    argv = [str(tmp_path / a) if a in ("DIR", "FILE") else a for a in argv]
    monkeypatch.chdir(tmp_path)  # what the command writes by a relative path lands there
    assert main(join_negative_values(argv)) == 0
    json.loads(capsys.readouterr().out.splitlines()[-1])


def python_blocks(page: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S)


@pytest.mark.parametrize("page", [p for p in PYTHON_PAGES if p.exists()], ids=lambda p: p.name)
def test_python_examples_train(page, tmp_path, monkeypatch, capsys):
    blocks = python_blocks(page)
    assert blocks, f"{page} has no Python example"
    monkeypatch.setenv("GRAPHENGINE_DATA", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    exec(compile("\n".join(blocks), str(page), "exec"), {"__name__": "example"})
    out = capsys.readouterr().out
    losses = re.findall(r"loss ([0-9.]+)", out)
    assert losses, "the example printed no loss"
    # synthetic-small's classes are learnable: the last loss far below chance (ln 8 = 2.08),
    # and the last accuracy printed (if any) far above chance (1/8).
    assert float(losses[-1]) < 1.0
    accuracies = re.findall(r"accuracy ([0-9.]+)\s*$", out, re.M)
    assert not accuracies or float(accuracies[-1]) > 0.8


# The guides' examples each run on their own; those needing a GPU or several processes are
# run by .ci/gpu-check and the distributed tests instead. The extension guide's are pieces of
# a recipe for adding an op (a process-wide backend switch, a kernel for an op not built).
GUIDE_BLOCKS = [
    pytest.param(block, id=f"{page.name}-{i}")
    for page in sorted((REPO / "docs" / "guide").glob("*.md"))
    if page.name != "extension.md"
    for i, block in enumerate(python_blocks(page))
    if not re.search(r"cuda|torchrun|init_process_group|DistData|synthetic-products", block)
]


@pytest.mark.parametrize("block", GUIDE_BLOCKS)
def test_guide_example_runs(block, tmp_path, monkeypatch):
    monkeypatch.setenv("GRAPHENGINE_DATA", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    exec(compile(block, "guide", "exec"), {"__name__": "example"})
