# SPDX-License-Identifier: MIT
"""The %%tensorffi cell magic and the %tensorffi line magic, in an in-process IPython shell."""
from __future__ import annotations

import re

import numpy as np
import pytest
import torch

pytest.importorskip("IPython")

import tensorffi  # noqa: E402

SCALE_C = """#include <stdint.h>
void scale(const float *x, float *y, int64_t n, float a) {
    for (int64_t i = 0; i < n; i++) y[i] = a * x[i];
}
void twice_plus_one(float *data, int size) {
    for (int i = 0; i < size; i++) data[i] = FACTOR * data[i] + 1.0f;
}
static float helper(float v) { return v; }
"""


@pytest.fixture(scope="module")
def ip(tmp_path_factory):
    """An IPython shell with the extension loaded, building into a private cache."""
    from IPython.testing.globalipapp import start_ipython

    mp = pytest.MonkeyPatch()
    mp.setenv("TENSORFFI_CACHE_DIR", str(tmp_path_factory.mktemp("magic-cache")))
    shell = start_ipython()
    shell.run_line_magic("load_ext", "tensorffi")
    yield shell
    mp.undo()


def run(ip, text: str):
    """Run a cell; (result, stdout, stderr, outputs displayed)."""
    from IPython.utils.capture import capture_output

    with capture_output() as cap:
        result = ip.run_cell(text)
    return result, cap.stdout, cap.stderr, cap.outputs


def test_a_cell_binds_its_functions_and_the_library(ip, rng):
    cell = "%%tensorffi mylib -D FACTOR=2.0f -c \"scale: x: [n]; y: out [n]\"\n" + SCALE_C
    result, out, err, shown = run(ip, cell)
    assert result.success, (out, err)
    ns = ip.user_ns
    assert isinstance(ns["mylib"], tensorffi.Library)
    assert ns["scale"] is ns["mylib"].scale and ns["twice_plus_one"] is ns["mylib"].twice_plus_one
    assert "helper" not in ns["mylib"].functions  # static: not bound
    # the contract: y allocated, n filled in; const float * is an input (read-only arrays are fine)
    x = rng.standard_normal(50).astype(np.float32)
    x.setflags(write=False)
    y = ns["scale"](x, 1.5)
    np.testing.assert_array_equal(y, np.float32(1.5) * x)
    t = torch.from_numpy(rng.standard_normal(7).astype(np.float32))
    expect = t.double() * 2 + 1
    ns["twice_plus_one"](t, t.numel())
    torch.testing.assert_close(t.double(), expect)
    # what the cell shows: the functions with their C declarations
    assert shown  # (a terminal shell formats text only; the notebook test sees the HTML)
    text = shown[0].data["text/plain"]
    assert "scale(x, a, *, y=None, n=None)" in text and "void scale(const float *x, float *y, int64_t n, float a)" in text


def test_an_unchanged_cell_is_a_cache_hit_and_keeps_its_functions(ip):
    cell = "%%tensorffi hitlib -D FACTOR=3.0f -c \"scale: x: [n]; y: out [n]\"\n" + SCALE_C
    assert run(ip, cell)[0].success
    first = ip.user_ns["scale"]
    result, out, err, shown = run(ip, cell)
    assert result.success
    assert ip.user_ns["scale"] is first
    assert "from the cache" in shown[0].data["text/plain"]


def test_an_edited_cell_is_rebuilt_and_rebound(ip):
    base = "%%tensorffi -q\nvoid bump(float *x, int n) { for (int i = 0; i < n; i++) x[i] += STEP; }\n"
    assert run(ip, base.replace("STEP", "1.0f"))[0].success
    t = torch.zeros(3)
    ip.user_ns["bump"](t, 3)
    assert t.tolist() == [1.0, 1.0, 1.0]
    assert run(ip, base.replace("STEP", "10.0f"))[0].success
    ip.user_ns["bump"](t, 3)
    assert t.tolist() == [11.0, 11.0, 11.0]


def test_compiler_errors_point_at_the_cells_own_lines_without_a_traceback(ip):
    cell = "%%tensorffi\nvoid f(float *x, int n) {\n    x[0] = undefined_name;\n}\n"
    result, out, err, _ = run(ip, cell)
    assert not result.success
    assert isinstance(result.error_in_exec, tensorffi.BuildError)
    rendered = "\n".join(result.error_in_exec._render_traceback_())
    # line 3 of the cell (the %%tensorffi line is line 1), the line itself, a caret
    assert re.search(r"<cell>:3:\d+: error: .*undefined_name", rendered), rendered
    assert "x[0] = undefined_name;" in rendered and "^" in rendered
    assert "Traceback" not in rendered and "magic.py" not in rendered and "byo.py" not in rendered


def test_contract_mistakes_name_the_function(ip):
    result, *_ = run(ip, "%%tensorffi -c 'f: x: [m'\nvoid f(float *x, int n) { x[0] = n; }\n")
    assert isinstance(result.error_in_exec, tensorffi.ContractError)
    assert "contract of f" in result.error_in_exec._render_traceback_()[0]
    result, *_ = run(ip, "%%tensorffi -c 'g: x: [n]'\nvoid f(float *x, int n) { x[0] = n; }\n")
    assert isinstance(result.error_in_exec, tensorffi.ContractError)
    assert "g" in str(result.error_in_exec) and "declared: f" in str(result.error_in_exec)
    result, out, err, _ = run(ip, "%%tensorffi -c 'no colon here'\nvoid f(float *x, int n) { x[0] = n; }\n")
    assert not result.success and "FUNC: CONTRACT" in err + out


def test_contracts_from_a_dict_in_the_namespace(ip, rng):
    ip.user_ns["my_contracts"] = {"mean": "x: [n]"}
    cell = ("%%tensorffi -q -c my_contracts\n#include <stdint.h>\n"
            "double mean(const double *x, int64_t n) { double s = 0; for (int64_t i = 0; i < n; i++) s += x[i];"
            " return s / n; }\n")
    assert run(ip, cell)[0].success
    x = rng.standard_normal(101)
    assert ip.user_ns["mean"](x) == pytest.approx(float(np.mean(x)), rel=1e-12)


def test_include_dirs_and_libraries(ip, tmp_path):
    (tmp_path / "consts.h").write_text("#define OFFSET 7.0\n")
    cell = (f"%%tensorffi -q -I {tmp_path} -l m\n#include <math.h>\n#include \"consts.h\"\n"
            "double hyp(double a, double b) { return hypot(a, b) + OFFSET; }\n")
    assert run(ip, cell)[0].success
    assert ip.user_ns["hyp"](3.0, 4.0) == 12.0


def test_op_registers_a_torch_operator(ip, rng):
    cell = ("%%tensorffi -q -c 'square: x: [n]; y: out [n]' --op magic_test::square\n#include <stdint.h>\n"
            "void square(const double *x, double *y, int64_t n) { for (int64_t i = 0; i < n; i++) y[i] = x[i] * x[i]; }\n")
    assert run(ip, cell)[0].success
    x = torch.from_numpy(rng.standard_normal(9))
    torch.testing.assert_close(torch.ops.magic_test.square(x), x * x)
    result, out, err, shown = run(ip, cell)  # unchanged: nothing to register again
    assert result.success and not shown
    edited = cell.replace("x[i] * x[i]", "x[i] * x[i] * 2")
    result, out, err, shown = run(ip, edited)
    assert result.success
    assert "still runs the earlier build" in shown[0].data["text/plain"]
    torch.testing.assert_close(ip.user_ns["square"](x), 2 * x * x)  # the function is rebound


def test_op_that_names_no_function_is_a_usage_error(ip):
    result, out, err, _ = run(ip, "%%tensorffi --op magic_test::nothing\nvoid f(float *x, int n) { x[0] = n; }\n")
    assert not result.success and "defines no function 'nothing'" in err + out


def test_bound_functions_raise_from_their_own_frame(ip):
    assert run(ip, "%%tensorffi -q\nvoid fill1(float *x, int n) { for (int i = 0; i < n; i++) x[i] = 1; }\n")[0].success
    result, *_ = run(ip, "import torch\nfill1(torch.zeros(3, dtype=torch.float64), 3)")
    exc = result.error_in_exec
    assert isinstance(exc, tensorffi.DTypeError) and "fill1()" in str(exc) and "'x'" in str(exc)
    frames = []
    tb = exc.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame.f_code.co_filename)
        tb = tb.tb_next
    assert all("magic.py" not in f and "bridge.py" not in f for f in frames), frames


def test_line_magic(ip):
    result, out, err, _ = run(ip, "%tensorffi info")
    assert isinstance(result.result, dict) and result.result["version"] == tensorffi.__version__
    assert "<table>" in result.result._repr_html_()
    result, out, err, _ = run(ip, "%tensorffi cache")
    assert result.success and "module(s)" in out
    result, out, err, _ = run(ip, "%tensorffi nonsense")
    assert not result.success and "%tensorffi info" in err + out



def test_a_cpp_cell_binds_its_extern_c_functions_and_raises_what_cpp_throws(ip, rng):
    cell = ('%%tensorffi cppcell --cpp -c "clip: x: [n]; y: out [n]"\n'
            "#include <algorithm>\n#include <stdexcept>\n#include <cstdint>\n"
            'extern "C" void clip(const double *x, double *y, int64_t n, double lo, double hi) {\n'
            '    if (lo > hi) throw std::invalid_argument("clip: lo > hi");\n'
            "    for (int64_t i = 0; i < n; i++) y[i] = std::clamp(x[i], lo, hi);\n"
            "}\n")
    result, out, err, shown = run(ip, cell)
    assert result.success, (out, err)
    clip = ip.user_ns["clip"]
    x = rng.standard_normal(64)
    np.testing.assert_array_equal(clip(x, -0.5, 0.5), np.clip(x, -0.5, 0.5))
    with pytest.raises(tensorffi.NativeError, match=r"clip\(\) threw std::invalid_argument: clip: lo > hi") as info:
        clip(x, 1.0, -1.0)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("value", [{"mean": 3}, {"mean": ["x: [n]"]}, {3: "x: [n]"}])
def test_a_contract_dict_with_a_value_that_is_not_a_string_is_a_usage_error(ip, value):
    ip.user_ns["bad_contracts"] = value
    result, out, err, _ = run(ip, "%%tensorffi -q -c bad_contracts\ndouble mean(const double *x, long n) { return 0; }\n")
    assert not result.success and "must map a function (or struct type) name to a contract string" in err + out
