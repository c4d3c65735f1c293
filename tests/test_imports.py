# SPDX-License-Identifier: MIT
"""The package's import structure: no cycles, public namespaces that hold only their
API, and no torch import for NumPy-only use (issue 21 items 8-9, issue 23 step 1)."""
from __future__ import annotations

import ast
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tensorffi

PACKAGE = Path(tensorffi.__file__).parent

# --------------------------------------------------------------------------- #
# the import graph                                                             #
# --------------------------------------------------------------------------- #


def _modules() -> dict[str, Path]:
    mods = {}
    for p in PACKAGE.rglob("*"):
        if p.suffix == ".py" or (p.suffix == ".so" and p.name.startswith("_native.")):
            parts = list(p.relative_to(PACKAGE.parent).parts)
            parts[-1] = parts[-1].split(".")[0]
            if parts[-1] == "__init__":
                parts.pop()
            mods[".".join(parts)] = p
    return mods


def import_graph() -> dict[str, set[str]]:
    """module -> the tensorffi modules it imports (see test_import_graph_has_no_cycle)."""
    mods = _modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for name, path in mods.items():
        if path.suffix != ".py":
            continue
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]

        def visit(node: ast.AST, name: str = name, package: str = package) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                    continue  # annotations only: never runs
                if isinstance(child, ast.ImportFrom):
                    if child.level:
                        base = package.split(".")[: len(package.split(".")) - child.level + 1]
                        target = ".".join(base + ([child.module] if child.module else []))
                    else:
                        target = child.module or ""
                    subs = {f"{target}.{a.name}" for a in child.names} & mods.keys()
                    graph[name] |= subs
                    if target in mods and len(subs) < len(child.names):
                        graph[name].add(target)  # a name the module itself defines
                elif isinstance(child, ast.Import):
                    graph[name] |= {a.name for a in child.names} & mods.keys()
                visit(child)

        visit(ast.parse(path.read_text()))
        graph[name].discard(name)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    found: list[list[str]] = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def dfs(u: str) -> None:
        state[u] = 1
        stack.append(u)
        for v in sorted(graph[u]):
            if state.get(v) == 1:
                found.append(stack[stack.index(v):] + [v])
            elif v not in state:
                dfs(v)
        stack.pop()
        state[u] = 2

    for m in sorted(graph):
        if m not in state:
            dfs(m)
    return found


def test_import_graph_has_no_cycle():
    """No module of tensorffi/ imports, directly or through others, a module that imports it.

    The rule: every ``import`` / ``from ... import`` statement of tensorffi/**/*.py is an
    edge, at module level and inside functions alike (a function-level import only
    delays a dependency; "display code imported by the objects it displays" is a circle
    either way), except those under ``if TYPE_CHECKING:`` (annotations: never run).
    ``from . import io`` is an edge to the submodule ``tensorffi.io``; an edge to a
    package's ``__init__`` is counted only for a name that ``__init__`` defines itself.
    The compiled ``tensorffi._native`` is a node. ``importlib.import_module`` of a
    computed name is not seen: the lazy attributes of ``tensorffi/__init__.py`` and
    ``tensorffi._torch.OPERATOR_MODULES`` (both point down, into modules that do not
    import the package's own names back).
    """
    graph = import_graph()
    assert {"tensorffi", "tensorffi.core", "tensorffi._display", "tensorffi._native"} <= graph.keys()
    assert "tensorffi._lib" in graph["tensorffi.core"]  # the parser sees edges at all
    assert _cycles(graph) == []


def test_cycle_finder_finds_one():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c", "a"]]


def test_display_and_ops_import_no_kernel_or_bridge_module():
    graph = import_graph()
    assert not graph["tensorffi._display"]  # it renders plain objects (duck-typed)
    kernels = {"tensorffi.core", "tensorffi.signal", "tensorffi.physics", "tensorffi.io"}
    assert not graph["tensorffi.ops"] & kernels
    assert "tensorffi.__main__" not in graph["tensorffi.magic"] and "tensorffi.magic" not in graph["tensorffi.__main__"]


# --------------------------------------------------------------------------- #
# public namespaces                                                           #
# --------------------------------------------------------------------------- #

PUBLIC = ["tensorffi", "tensorffi.io", "tensorffi.signal", "tensorffi.physics", "tensorffi.ops",
          "tensorffi.errors", "tensorffi.core", "tensorffi.cache", "tensorffi.handles", "tensorffi.bridge",
          "tensorffi.contract", "tensorffi.library", "tensorffi.byo", "tensorffi.plan", "tensorffi.magic"]


@pytest.mark.parametrize("name", PUBLIC)
def test_dir_of_a_public_module_is_its_api(name):
    if name == "tensorffi.magic":
        pytest.importorskip("IPython")
    module = importlib.import_module(name)
    documented = sorted(module.__all__)
    assert len(set(documented)) == len(documented)
    assert dir(module) == documented
    for attr in documented:  # every documented name exists (a lazy one resolves)
        getattr(module, attr)
    leaked = {"np", "torch", "math", "os", "sys", "Path", "Any", "lru_cache", "annotations"} & set(dir(module))
    assert not leaked


def test_lazy_attribute_is_the_defining_modules():
    from tensorffi import byo, library

    assert tensorffi.compile is byo.compile and tensorffi.describe is library.describe
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        tensorffi.nope  # noqa: B018


# --------------------------------------------------------------------------- #
# no torch for NumPy-only use                                                  #
# --------------------------------------------------------------------------- #


def _run(code: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(PACKAGE.parent) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_cli_version_and_help_import_neither_torch_nor_numpy():
    got = _run(
        "import contextlib, io, json, sys\n"
        "from tensorffi.__main__ import main\n"
        "outs = []\n"
        "for argv in (['--version'], ['--help']):\n"
        "    buf = io.StringIO()\n"
        "    with contextlib.redirect_stdout(buf), contextlib.suppress(SystemExit):\n"
        "        main(argv)\n"
        "    outs.append(buf.getvalue())\n"
        "print(json.dumps({'outs': outs, 'torch': 'torch' in sys.modules, 'numpy': 'numpy' in sys.modules}))\n"
    )
    assert got["outs"][0].strip() == f"tensorffi {tensorffi.__version__}"
    assert "usage: tensorffi" in got["outs"][1]
    assert not got["torch"] and not got["numpy"]


def test_numpy_only_read_csv_never_imports_torch():
    rng = np.random.default_rng()
    table = rng.standard_normal((5, 3))
    text = "\n".join(",".join(repr(float(v)) for v in row) for row in table) + "\n"
    got = _run(
        "import json, sys\n"
        "import tensorffi, numpy\n"
        f"a = tensorffi.io.read_csv({text.encode()!r}, header=None, like=numpy, dtype='float64')\n"
        f"b = list(tensorffi.io.iter_csv({text.encode()!r}, 2, header=None, like='numpy', dtype=numpy.float64))\n"
        "print(json.dumps({'kind': type(a).__module__, 'values': a.tolist(), 'chunks': [c.tolist() for c in b],\n"
        "                  'torch': 'torch' in sys.modules}))\n"
    )
    assert got["kind"] == "numpy" and not got["torch"]
    np.testing.assert_array_equal(np.array(got["values"]), table)
    np.testing.assert_array_equal(np.concatenate([np.array(c) for c in got["chunks"]]), table)


def test_numpy_only_signal_never_imports_torch():
    scipy_signal = pytest.importorskip("scipy.signal")
    rng = np.random.default_rng()
    sos = scipy_signal.butter(4, rng.uniform(0.05, 0.45), output="sos")
    x = rng.standard_normal((2, 300))
    got = _run(
        "import json, sys\n"
        "import numpy as np, tensorffi.signal as ts\n"
        f"sos = np.array({sos.tolist()!r}); x = np.array({x.tolist()!r})\n"
        "y, zf = ts.sosfilt(sos, x, zi=np.zeros((sos.shape[0], 2, 2)))\n"
        "yy = ts.sosfiltfilt(sos, x)\n"
        "zi = ts.sosfilt_zi(sos)\n"
        "names = dir(ts)\n"
        "print(json.dumps({'y': y.tolist(), 'yy': yy.tolist(), 'zi': zi.tolist(), 'names': names,\n"
        "                  'torch': 'torch' in sys.modules}))\n"
    )
    assert not got["torch"]
    np.testing.assert_allclose(got["y"], scipy_signal.sosfilt(sos, x, zi=np.zeros((sos.shape[0], 2, 2)))[0],
                               rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got["yy"], scipy_signal.sosfiltfilt(sos, x), rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(got["zi"], scipy_signal.sosfilt_zi(sos), rtol=1e-10, atol=1e-12)
    assert "SOSFilter" in got["names"]  # the API, though the class is made when first named


def test_torch_imported_after_numpy_only_use_gets_the_native_path_and_every_check():
    """NumPy-only calls first (the native call path configured for NumPy alone), then
    torch: tensors are read from C from then on, with every check of the bridge
    (a storage shrunk under a view is refused), and torch's API is all there."""
    rng = np.random.default_rng()
    x = rng.standard_normal(9)
    table = rng.standard_normal((4, 2)).astype(np.float32)
    text = "\n".join(",".join(repr(float(v)) for v in row) for row in table) + "\n"
    got = _run(
        "import json, sys\n"
        "import numpy as np, tensorffi, tensorffi.io as tio, tensorffi.core as core\n"
        f"x = np.array({x.tolist()!r})\n"
        "core.axpy_(x, x.copy(), 2.0)\n"  # NumPy: configures the native path for NumPy
        "import tensorffi.signal as ts\n"
        "sos = np.array([[0.5, 0.25, 0.0, 1.0, -0.3, 0.0]])\n"
        "y_np = ts.sosfilt(sos, x)\n"  # type tests made (and kept) before torch exists
        "before = 'torch' in sys.modules\n"
        "import torch\n"
        "from tensorffi._torch import T\n"
        "y_t = ts.sosfilt(torch.tensor(sos), torch.tensor(x))\n"
        "same = T.Tensor is torch.Tensor and type(y_t) is torch.Tensor and y_t.tolist() == y_np.tolist()\n"
        "from tensorffi._bridge import lower\n"
        "t = torch.tensor(x)\n"
        "y = torch.zeros_like(t)\n"
        "core.axpy_(t, y, 0.5)\n"
        "big = torch.zeros(8, dtype=torch.float64)\n"
        "view, other = big[2:], torch.zeros(6, dtype=torch.float64)\n"
        "big.untyped_storage().resize_(0)\n"  # (torch itself must not touch view now: clone() would crash)
        "try:\n"
        "    core.axpy_(view, other, 1.0)\n"
        "    refused = None\n"
        "except tensorffi.TensorFFIError as e:\n"
        "    refused = type(e).__name__\n"
        f"r = tio.read_csv({text.encode()!r}, header=None)\n"
        "ds = issubclass(tio.CSVDataset, torch.utils.data.IterableDataset)\n"
        "print(json.dumps({'before': before, 'torch_ok': lower.STATE.torch_ok, 'y': y.tolist(), 'refused': refused,\n"
        "                  'r': r.tolist(), 'rkind': type(r).__module__, 'ds': ds,\n"
        "                  'ops': hasattr(torch.ops.tensorffi, 'sosfilt'), 'same': same}))\n"
    )
    assert not got["before"] and got["torch_ok"] and got["ops"] and got["same"]
    np.testing.assert_array_equal(got["y"], 0.5 * x)
    assert got["refused"] == "LayoutError"
    assert got["rkind"] == "torch"
    np.testing.assert_array_equal(np.array(got["r"], dtype=np.float32), table)
    assert got["ds"] is True


def test_operators_are_registered_when_torch_is_imported_later():
    x = np.random.default_rng().standard_normal(7).astype(np.float32)
    got = _run(
        "import json, sys\n"
        "import tensorffi\n"
        "before = 'torch' in sys.modules\n"
        "import torch\n"
        f"x = torch.tensor({x.tolist()!r}, dtype=torch.float32)\n"
        "y = torch.ops.tensorffi.scaled(x, 3.0)\n"
        "names = sorted(n for n in dir(torch.ops.tensorffi) if not n.startswith('_'))\n"
        "print(json.dumps({'before': before, 'y': y.tolist(), 'names': names}))\n"
    )
    assert not got["before"]
    np.testing.assert_array_equal(np.array(got["y"], dtype=np.float32), np.float32(3.0) * x)
    assert {"scale_", "axpy_", "iota", "scaled", "sosfilt", "sosfiltfilt", "nbody", "energy"} <= set(got["names"])
