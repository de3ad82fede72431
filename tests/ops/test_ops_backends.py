"""The gather backends ('auto', 'csrc', 'torch'), the build command and the packaged sources."""

import json
import re
from pathlib import Path

import pytest
import torch
from setuptools import find_packages

from graphengine import cli, ops

ROOT = Path(__file__).resolve().parents[2]
DTYPES = [torch.float16, torch.float32, torch.int64]


@pytest.fixture
def broken_build(monkeypatch):
    """The extension as on a machine without a compiler."""

    def broken(verbose):
        raise RuntimeError("ninja is required to load C++ extensions")

    monkeypatch.setattr(ops.build, "_state", {})
    monkeypatch.setattr(ops.backend, "_warned", [True])  # the one warning is test_gather's business
    monkeypatch.setattr(ops.build, "_compile", broken)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64], ids=str)
@pytest.mark.parametrize("cols", [1, 3, 100])
def test_extension_and_fallback_agree(dtype, index_dtype, cols):
    if not ops.build_extension():
        pytest.fail(f"the extension did not build here: {ops.build_error()}")
    generator = torch.Generator().manual_seed(cols)
    src = (torch.rand(257, cols, generator=generator) * 1000).to(dtype)
    index = torch.randint(0, 257, (1000,), generator=generator, dtype=index_dtype)
    expected = torch.index_select(src, 0, index.long())
    for backend in ("auto", "csrc", "torch"):
        assert torch.equal(ops.gather_rows(src, index, backend=backend), expected), backend
        out = torch.empty(1000, cols, dtype=dtype)
        assert ops.gather_rows(src, index, out, backend=backend) is out
        assert torch.equal(out, expected), backend
    slot_of = torch.full((257,), -1, dtype=torch.int32)
    hot = torch.randperm(257, generator=generator)[:40]
    slot_of[hot] = torch.arange(40, dtype=torch.int32)
    cache = src[hot].clone()
    for backend in ("csrc", "torch"):
        result = ops.cached_gather(src, index, cache, slot_of, backend=backend)
        assert torch.equal(result, expected), backend


def test_backend_choice_is_checked_and_process_wide(monkeypatch):
    src, index = torch.arange(12.0).view(6, 2), torch.tensor([5, 0])
    with pytest.raises(ValueError, match=r"'backend' must be one of .*\(got 'cuda'\)"):
        ops.gather_rows(src, index, backend="cuda")
    with pytest.raises(ValueError, match=r"'backend' must be one of .*\(got 'fast'\)"):
        ops.set_backend("fast")
    monkeypatch.setattr(ops.backend, "_backend", ops.get_backend())
    assert ops.set_backend("torch") == "auto"
    assert ops.get_backend() == "torch"
    assert torch.equal(ops.gather_rows(src, index), src[[5, 0]])


def test_backend_from_the_environment_is_read_at_the_first_gather(monkeypatch):
    import subprocess
    import sys

    src, index = torch.arange(12.0).view(6, 2), torch.tensor([5, 0])
    monkeypatch.setattr(ops.backend, "_backend", None)
    monkeypatch.setenv("GRAPHENGINE_OPS_BACKEND", "torch")
    assert ops.get_backend() == "torch"
    monkeypatch.setenv("GRAPHENGINE_OPS_BACKEND", "fast")
    with pytest.raises(ValueError, match=r"\$GRAPHENGINE_OPS_BACKEND must be one of .*'fast'"):
        ops.gather_rows(src, index)
    # A bad value does not break the import.
    done = subprocess.run([sys.executable, "-c", "import graphengine"], capture_output=True)
    assert done.returncode == 0, done.stderr


def test_csrc_backend_raises_when_the_extension_is_missing(broken_build):
    src, index = torch.arange(12.0).view(6, 2), torch.tensor([5, 0])
    with pytest.raises(
        ops.ExtensionUnavailableError, match=r"ninja is required.*graphengine build"
    ):
        ops.gather_rows(src, index, backend="csrc")
    with pytest.raises(ImportError, match="backend='csrc'"):
        ops.cached_gather(
            src, index, src[:1], torch.full((6,), -1, dtype=torch.int32), backend="csrc"
        )
    # 'torch' does not even try to build; 'auto' falls back.
    assert torch.equal(ops.gather_rows(src, index, backend="torch"), src[[5, 0]])
    assert torch.equal(ops.gather_rows(src, index, backend="auto"), src[[5, 0]])


def test_fallback_argument_errors(broken_build):
    src = torch.zeros(6, 2)
    with pytest.raises(TypeError, match=r"'index' must be int32 or int64 \(got torch.float32\)"):
        ops.gather_rows(src, torch.zeros(2), backend="torch")
    with pytest.raises(ValueError, match=r"'index' must be 1-D \(got 2-D\)"):
        ops.gather_rows(src, torch.zeros(2, 1, dtype=torch.int64), backend="torch")
    with pytest.raises(ValueError, match=r"'src' must be 2-D \(got 1-D\)"):
        ops.gather_rows(src[0], torch.tensor([0]), backend="torch")
    with pytest.raises(IndexError, match=r"holds id -3 at position 1, outside \[0, 6\)"):
        ops.gather_rows(src, torch.tensor([1, -3, 9]), backend="torch")
    slot_of = torch.full((6,), -1, dtype=torch.int32)
    slot_of[4] = 2
    with pytest.raises(IndexError, match=r"'slot_of'\[4\] = 2 is outside the cache's \[0, 1\)"):
        ops.cached_gather(src, torch.tensor([0, 4]), src[:1], slot_of, backend="torch")


def test_build_command_reports_what_it_built(capsys):
    assert cli.main(["build"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["extension"] == "built"
    if ops.with_cuda():
        assert report["kernels"] == "CPU and CUDA"
    elif torch.version.cuda is None:
        assert report["kernels"] == "CPU only (this torch has no CUDA)"
    else:
        assert report["kernels"].startswith("CPU only (no CUDA toolkit found")
    assert Path(report["library"]).is_file()
    assert report["torch"] == torch.__version__


def test_build_command_fails_when_the_extension_does_not_build(broken_build, caplog, capsys):
    assert cli.main(["build"]) == 1
    assert capsys.readouterr().out == ""
    assert "ninja is required" in caplog.text and "graphengine build --verbose" in caplog.text


def test_sources_are_packaged():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    found = {
        name
        for name in find_packages(str(ROOT), include=["graphengine*", "samplers*"])
        if not name.startswith("graphengine._csrc")
    }
    assert found <= listed, f"add to pyproject.toml's packages: {sorted(found - listed)}"
    assert config["package-dir"]["graphengine._csrc"] == "csrc"
    globs = config["package-data"]["graphengine._csrc"]
    csrc = ROOT / "csrc"
    sources = {p.relative_to(csrc) for p in csrc.rglob("*") if p.suffix in (".h", ".cpp", ".cu")}
    shipped = {p.relative_to(csrc) for glob in globs for p in csrc.glob(glob)}
    assert sources and sources == shipped
    # Whatever the build compiles, with or without CUDA, is shipped, in every folder.
    compiled = {p.relative_to(csrc) for p in ops.build.extension_sources(csrc, cuda=True)}
    assert {"cpu", "cuda"} <= {p.parts[0] for p in compiled if len(p.parts) > 1}
    assert compiled <= shipped
    assert (ops.sources_dir() / "gather.cpp").is_file()


def test_the_build_finds_every_source_and_each_registers_itself():
    csrc = ROOT / "csrc"
    cpu_only = ops.build.extension_sources(csrc, cuda=False)
    with_cuda = ops.build.extension_sources(csrc, cuda=True)
    assert cpu_only == sorted(csrc.rglob("*.cpp"))
    assert set(with_cuda) - set(cpu_only) == set(csrc.rglob("*.cu")) != set()
    # pyg-lib's layout: a schema file per op family declares its ops in a fragment, its CPU and
    # CUDA kernels register implementations; no file claims the whole library.
    for path in with_cuda:
        text = path.read_text()
        assert "TORCH_LIBRARY(" not in text, path
        if path.parent == csrc:
            assert "TORCH_LIBRARY_FRAGMENT(graphengine, m)" in text, path
        if path.parent.name in ("cpu", "cuda") and "TORCH_LIBRARY" in text:
            assert path.stem.endswith("_kernel"), path
            assert "TORCH_LIBRARY_IMPL(graphengine," in text, path


def test_every_op_that_takes_a_tensor_has_a_fake_kernel():
    schemas = re.findall(
        r'm\.def\(\s*"([a-z_]+)\(([^"]*)"', "".join(p.read_text() for p in ROOT.glob("csrc/*.cpp"))
    )
    with_tensors = {name for name, arguments in schemas if "Tensor" in arguments}
    assert {"gather_rows", "csr_sum", "gat_attention", "transpose_into"} <= with_tensors
    assert {name for name, _ in schemas} - with_tensors == {
        "host_cache_open",
        "host_cache_close",
        "host_cache_state",
        "host_cache_limit",
        "io_uring_probe",
        "set_intraop_threads",
    }
    assert set(ops.build._fake_kernels) == with_tensors
    if not ops.build_extension():
        pytest.fail(f"the extension did not build here: {ops.build_error()}")
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        rowptr, col = torch.tensor([0, 2, 3]), torch.tensor([0, 1, 1])
        x = torch.empty(4, 5)
        assert ops.csr.csr_sum(rowptr, col, None, x).shape == (2, 5)
        grad, sums = ops.relu.relu_backward_sum(x, x)
        assert grad.shape == (4, 5) and sums.shape == (5,)
        out = ops.gat.gat_attention(
            torch.empty(3, 2, 4), torch.empty(2, 4), torch.empty(2, 4), rowptr, col, 0.2, True
        )
        assert [tuple(t.shape) for t in out] == [(2, 2, 4), (5, 2), (3, 2), (2, 2)]


def test_sources_with_one_file_name_are_refused(tmp_path):
    for folder in ("cpu", "cuda"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "op_kernel.cpp").write_text("")
    with pytest.raises(ValueError, match=r"distinct file names \(got \[\['cpu/op_kernel.cpp'"):
        ops.build.extension_sources(tmp_path, cuda=False)
