# SPDX-License-Identifier: MIT
"""How tensorffi's objects look: describe(), Library and function reprs, HTML, info(), dir()."""
from __future__ import annotations

import inspect
import json
import pickle
import re
import subprocess
import sys

import numpy as np
import pytest
import torch

import tensorffi

SOURCE = """#include <stdint.h>
void scale_into(const float *x, float *y, int64_t rows, int64_t cols, float a) {
    for (int64_t i = 0; i < rows * cols; i++) y[i] = a * x[i];
}
int safe_div(double a, double b, double *out) {
    if (b == 0) return -1;
    *out = a / b;
    return 0;
}
void fill(float *data, int size) { for (int i = 0; i < size; i++) data[i] = i; }
"""
CONTRACTS = {"scale_into": "x: [rows, cols]; y: out [rows, cols]", "safe_div": "out: out [1]; return: status"}


@pytest.fixture(scope="module")
def lib(cache):
    return tensorffi.compile("display_lib", source=SOURCE, contracts=CONTRACTS, cache=cache)


def test_describe_a_function_gives_roles_dtypes_shapes_and_the_contract(lib):
    d = tensorffi.describe(lib.scale_into)
    text = str(d)
    first = text.splitlines()[0]
    assert first == "scale_into(x, a, *, y=None, rows=None, cols=None) -> y: float32 [rows, cols]"
    assert "C:        void scale_into(const float *x, float *y, int64_t rows, int64_t cols, float a)" in text
    assert "contract: x: [rows, cols]; y: out [rows, cols]" in text
    rows = {line.split()[0]: line for line in text.splitlines()[3:]}
    assert re.search(r"const float \*\s+in\s+float32 \[rows, cols\]$", rows["x"])
    assert re.search(r"float \*\s+out\s+float32 \[rows, cols\], allocated and returned$", rows["y"])
    assert "filled" in rows["rows"] and "filled" in rows["cols"]
    assert re.search(r"float\s+scalar", rows["a"])
    html = d._repr_html_()
    assert "<table>" in html and "const float *" in html and "[rows, cols]" in html


def test_describe_status_and_in_place_functions(lib):
    text = str(tensorffi.describe(lib.safe_div))
    assert text.splitlines()[0] == "safe_div(a, b, *, out=None) -> out: float64 [1]; a non-zero C status raises"
    text = str(tensorffi.describe(lib.fill))
    assert text.splitlines()[0] == "fill(data, size) -> None"
    assert re.search(r"data\s+float \*\s+inout\s+float32, written in place", text)


def test_describe_refuses_what_it_cannot_describe():
    with pytest.raises(TypeError, match="takes a Library or one of its functions"):
        tensorffi.describe(tensorffi.signal.sosfilt)
    with pytest.raises(TypeError):
        tensorffi.describe(3)


def test_bound_functions_carry_their_description_and_stay_plain_functions(lib, rng):
    fn = lib.scale_into
    # what runs is the bound function itself, nothing wraps it: the native call object
    # (or, with the native path off, the generated Python function, held by the one
    # object that makes it picklable: tensorffi._calls.BoundCall)
    assert fn.__wrapped_bridge__.call is fn
    assert getattr(fn, "__native__", False) or inspect.isfunction(getattr(fn, "_tf_call", None))
    sig = inspect.signature(fn)
    A = "torch.Tensor | numpy.ndarray"
    assert str(sig) == (f"(x: '{A}', a: 'float', *, y: '{A} | None' = None, rows: 'int | None' = None, "
                        f"cols: 'int | None' = None) -> '{A}'")  # as a stub writes it (C types: the docstring)

    assert "void scale_into(const float *x" in fn.__doc__
    assert "Also callable as the C declaration reads: scale_into(x, y, rows, cols, a)" in fn.__doc__
    assert "<table>" in fn._repr_html_()
    # and it still computes (short and full calling forms)
    x = torch.from_numpy(rng.standard_normal((3, 4)).astype(np.float32))
    torch.testing.assert_close(fn(x, 2.0), 2 * x)
    y = torch.empty(3, 4)
    fn(x, y, 3, 4, 0.5)
    torch.testing.assert_close(y, 0.5 * x)


def test_library_repr_lists_functions_with_their_c_declarations(lib):
    text = repr(lib)
    assert text.startswith("<tensorffi.Library compile('display_lib'): 3 functions")
    assert "scale_into(x, a, *, y=None, rows=None, cols=None)" in text
    assert "# int safe_div(double a, double b, double *out)  [out: out [1]; return: status]" in text
    html = lib._repr_html_()
    assert html.count("<tr>") == 4 and "void fill(float *data, int size)" in html


def test_an_unopened_handle_displays_without_opening(lib):
    clone = pickle.loads(pickle.dumps(lib))
    assert "not opened yet" in repr(clone) and "not opened yet" in clone._repr_html_()
    assert "not opened yet" in repr(clone)  # still not opened by the display
    assert clone.fill is not None and "3 functions" in repr(clone)


def test_a_misspelled_function_suggests_the_right_one(lib):
    with pytest.raises(AttributeError, match=r"has no function 'scale_int'; did you mean 'scale_into'\?"):
        lib.scale_int


def test_info_is_a_dict_with_html():
    facts = tensorffi.info()
    assert isinstance(facts, dict) and facts == tensorffi.core.info()
    assert json.loads(json.dumps(facts)) == dict(facts)
    html = facts._repr_html_()
    assert "<table>" in html and facts["simd"] in html and facts["version"] in html


def test_handle_html():
    from tensorffi.handles import Handle

    ffi = tensorffi.core.ffi
    closed = []
    h = Handle(ffi.new("int *"), ffi.typeof("int *"), closed.append, name="thing")
    assert "thing" in h._repr_html_() and "open" in h._repr_html_()
    h.close()
    assert "closed" in h._repr_html_() and len(closed) == 1


def test_dir_shows_the_api_only():
    names = dir(tensorffi)
    assert "annotations" not in names and "Any" not in names
    assert not [n for n in names if n.startswith("_") and n != "__version__"]
    assert {"compile", "load", "describe", "info", "signal", "io", "physics", "ops", "handles"} <= set(names)
    assert set(names) == set(tensorffi.__all__)


@pytest.mark.parametrize("module", ["cache", "core", "errors", "io", "ops", "physics", "signal", "handles",
                                    "contract", "library", "byo", "bridge", "plan"])
def test_public_modules_declare_all(module):
    mod = __import__(f"tensorffi.{module}", fromlist=["_"])
    assert isinstance(mod.__all__, list) and mod.__all__
    missing = [n for n in mod.__all__ if not hasattr(mod, n)]
    assert not missing


def test_describe_costs_nothing_per_call(lib):
    """The call path is the generated function: decorating added attributes only."""
    fn = lib.fill
    assert fn.__wrapped_bridge__.call is fn
    assert fn.__wrapped_bridge__.python_call.__code__.co_filename.startswith("<tensorffi call: fill")


def test_import_tensorffi_does_not_import_ipython():
    out = subprocess.run([sys.executable, "-c", "import sys, tensorffi; print('IPython' in sys.modules)"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
