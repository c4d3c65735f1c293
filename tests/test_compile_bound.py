# SPDX-License-Identifier: MIT
"""A plain bound function (``lib.f``) called inside ``torch.compile(fullgraph=True)``.

Dynamo traces it as the operator ``tensorffi.ops.register`` makes of it (registered on
first trace, see tensorffi/library.py); a function no operator can be made of stops the
trace with a message naming ``tensorffi.ops.register``. Results are compared with eager
calls and with NumPy float64 references on fresh random inputs.
"""
from __future__ import annotations

import gc
import subprocess
import sys
import textwrap
import weakref

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tensorffi  # noqa: E402
from tensorffi import library as _library  # noqa: E402

CDEF = """
typedef double (*unary_fn)(double v);
int square(const double *x, double *y, int64_t n);
int scale_(double *x, int64_t n, double a);
int normalize(double *x, double *norm, int64_t n);
void process_data(float *data, int size);
double dot(const double *x, const double *y, int64_t n);
int each(const double *x, double *y, int64_t n, unary_fn f);
"""

SOURCE = r"""
#include <stdint.h>
typedef double (*unary_fn)(double v);
int square(const double *x, double *y, int64_t n) { for (int64_t i = 0; i < n; i++) y[i] = POWER; return 0; }
int scale_(double *x, int64_t n, double a) { for (int64_t i = 0; i < n; i++) x[i] *= a; return 0; }
int normalize(double *x, double *norm, int64_t n) {
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) s += x[i] * x[i];
    s = __builtin_sqrt(s);
    norm[0] = s;
    if (s > 0.0) for (int64_t i = 0; i < n; i++) x[i] /= s;
    return 0;
}
void process_data(float *data, int size) { for (int i = 0; i < size; i++) data[i] = 2.0f * data[i] + 1.0f; }
double dot(const double *x, const double *y, int64_t n) {
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) s += x[i] * y[i];
    return s;
}
int each(const double *x, double *y, int64_t n, unary_fn f) {
    for (int64_t i = 0; i < n; i++) y[i] = f(x[i]);
    return 0;
}
"""

CONTRACTS = {
    "square": "x: [n]; y: out [n]; return: status",
    "scale_": "x: inout [n]; return: status",
    "normalize": "x: inout [n]; norm: out [1]; return: status",
    "process_data": "data: [n]; size = n",
    "dot": "x: [n]; y: [n]",
    "each": "x: [n]; y: out [n]; f: callback(); return: status",
}


def make_lib(name, cache, power="x[i] * x[i]"):
    return tensorffi.compile(name, CDEF, source=SOURCE.replace("POWER", power), contracts=CONTRACTS, cache=cache)


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("compile_bound")


@pytest.fixture(scope="module")
def lib(cache):
    return make_lib("compile_bound_a", cache)


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def f64(rng, *shape):
    return torch.from_numpy(rng.standard_normal(shape))


def model_for(lib):
    def model(x, z, data, buf):
        y = lib.square(x)  # an out array, allocated and returned
        lib.scale_(z, 3.0)  # an inout array and a scalar
        norm = lib.normalize(z)  # inout, and an out array returned
        lib.process_data(data, data.numel())  # the C declaration's own calling form
        lib.square(x, y=buf)  # an out array the caller gives
        return y + 1.0, norm * 2.0

    return model


def reference(x, z, data):
    z3 = 3.0 * z
    norm = np.linalg.norm(z3)
    return x * x + 1.0, np.array([2.0 * norm]), z3 / norm, 2.0 * data.astype(np.float64) + 1.0


@pytest.mark.parametrize("backend,dynamic", [("eager", False), ("aot_eager", False), ("aot_eager", True),
                                             ("inductor", False)])
def test_out_and_inout_under_fullgraph_match_eager_and_reference(lib, rng, backend, dynamic):
    model = model_for(lib)
    compiled = torch.compile(model, fullgraph=True, backend=backend, dynamic=dynamic)
    for n in (7, 12):  # a second size: dynamic shapes, or a recompile
        x, z = f64(rng, n), f64(rng, n)
        data = torch.from_numpy(rng.standard_normal(n).astype(np.float32))
        ref = reference(x.numpy(), z.numpy(), data.numpy())
        args_e = (x.clone(), z.clone(), data.clone(), torch.empty(n, dtype=torch.float64))
        args_c = (x.clone(), z.clone(), data.clone(), torch.empty(n, dtype=torch.float64))
        eager = model(*args_e)
        got = compiled(*args_c)
        for g, e in zip(got, eager):
            torch.testing.assert_close(g, e)
        for a_c, a_e in zip(args_c, args_e):  # the arrays C wrote in place
            torch.testing.assert_close(a_c, a_e)
        np.testing.assert_allclose(got[0].numpy(), ref[0], rtol=1e-12)  # (x*x + 1 >= 1: no cancellation)
        np.testing.assert_allclose(got[1].numpy(), ref[1], rtol=1e-12)
        np.testing.assert_allclose(args_c[1].numpy(), ref[2], rtol=1e-12)
        np.testing.assert_allclose(args_c[2].numpy(), ref[3], rtol=1e-6, atol=1e-6)  # float32
        np.testing.assert_allclose(args_c[3].numpy(), x.numpy() ** 2, rtol=1e-12)


def test_value_result_and_short_form_lengths(lib, rng):
    def f(x, y):
        return lib.dot(x, y) * x + lib.square(x, n=x.shape[0])

    x, y = f64(rng, 9), f64(rng, 9)
    got = torch.compile(f, fullgraph=True, backend="aot_eager")(x, y)
    torch.testing.assert_close(got, f(x, y))
    np.testing.assert_allclose(got.numpy(), np.dot(x.numpy(), y.numpy()) * x.numpy() + x.numpy() ** 2,
                               rtol=1e-12, atol=1e-12)


def test_a_wrong_length_is_refused(lib, rng):
    def f(x):
        return lib.square(x, n=3)

    x = f64(rng, 5)
    with pytest.raises(tensorffi.ShapeError, match="'n'"):
        f(x)
    with pytest.raises(Exception, match="argument 'n'"):
        torch.compile(f, fullgraph=True, backend="eager")(x)


def test_traced_as_an_operator_with_the_contracts_schema(lib):
    from tensorffi import ops

    def f(x):
        return lib.square(x)

    torch.compile(f, fullgraph=True, backend="eager")(torch.ones(3, dtype=torch.float64))
    qualname = next(q for q in ops.operators() if q.startswith(_library.AUTO_NAMESPACE) and q.endswith("::square")
                    and ops.get(q).overload is lib.square._tf_compiled_form.__globals__["_op"])
    assert ops.get(qualname).schema.endswith("::square(Tensor x) -> Tensor")


def test_second_library_with_the_same_function_names_does_not_collide(lib, cache, rng):
    cubes = make_lib("compile_bound_b", cache, power="x[i] * x[i] * x[i]")

    def f(x):
        return lib.square(x), cubes.square(x)

    x = f64(rng, 6)
    sq, cu = torch.compile(f, fullgraph=True, backend="aot_eager")(x)
    np.testing.assert_allclose(sq.numpy(), x.numpy() ** 2, rtol=1e-12)
    np.testing.assert_allclose(cu.numpy(), x.numpy() ** 3, rtol=1e-12)


def test_a_function_no_operator_can_be_made_of_names_ops_register(lib, rng):
    def f(x):
        return lib.each(x, lambda v: 2.0 * v + 1.0) * 3.0

    x = f64(rng, 5)
    with pytest.raises(Exception, match=r"tensorffi\.ops\.register\(lib\.each, 'mylib::each'") as info:
        torch.compile(f, fullgraph=True, backend="eager")(x)
    assert "'f' (unary_fn) cannot be an operator argument" in str(info.value)  # why, from ops.register
    torch._dynamo.reset()
    # without fullgraph the call runs eagerly (a graph break), as outside torch.compile
    got = torch.compile(f, backend="eager")(x)
    np.testing.assert_allclose(got.numpy(), 3.0 * (2.0 * x.numpy() + 1.0), rtol=1e-12, atol=1e-12)


def test_dropped_libraries_leave_no_stale_registration(cache, rng):
    tables = _dynamo_tables()
    sizes = [len(t) for t in tables]
    for _ in range(3):
        dropped = make_lib("compile_bound_a", cache)  # the same module, opened again
        x = f64(rng, 4)

        def f(x):
            return dropped.square(x) + 1.0

        np.testing.assert_allclose(torch.compile(f, fullgraph=True, backend="eager")(x).numpy(),
                                   x.numpy() ** 2 + 1.0, rtol=1e-12)
        del dropped, f  # (a traced library stays alive with its operator; its name is not reused)
        untraced = make_lib("compile_bound_a", cache)
        refs_untraced = weakref.ref(untraced)
        del untraced
        gc.collect()
        assert refs_untraced() is None  # a library never traced is collected as before
    torch._dynamo.reset()
    assert [len(t) for t in tables] == sizes  # registered by type, once: nothing per library
    # something else compiled afterwards: a new library with the same names, other C
    fresh = make_lib("compile_bound_b", cache, power="x[i] * x[i] * x[i]")
    x = f64(rng, 8)

    def g(x):
        return fresh.square(x) - 1.0

    np.testing.assert_allclose(torch.compile(g, fullgraph=True, backend="eager")(x).numpy(),
                               x.numpy() ** 3 - 1.0, rtol=1e-12, atol=1e-12)


def test_eager_calls_are_untouched(lib, cache):
    fresh = make_lib("compile_bound_a", cache)
    fn = fresh.__dict__["square"]
    assert type(fn).__name__ in ("NativeCall", "BoundCall") and not hasattr(fn, "_tf_compiled_form")
    assert fresh.square is fn  # an instance attribute: no __getattr__ on the call path


def test_library_made_before_dynamo_is_imported(cache):
    """A fresh interpreter: the library exists before torch._dynamo does (torch.compile
    imports it on first use); the post-import hook registers the handlers."""
    script = textwrap.dedent(f"""
        import sys
        import numpy as np, torch, tensorffi
        sys.path.insert(0, {str(__import__('pathlib').Path(__file__).parent)!r})
        from test_compile_bound import make_lib
        lib = make_lib("compile_bound_a", {str(cache)!r})
        assert "torch._dynamo" not in sys.modules, "torch._dynamo was imported early"
        def f(x):
            y = lib.square(x)
            lib.scale_(y, 0.5)
            return y
        x = torch.from_numpy(np.random.default_rng().standard_normal(10))
        got = torch.compile(f, fullgraph=True, backend="eager")(x)
        np.testing.assert_allclose(got.numpy(), 0.5 * x.numpy() ** 2, rtol=1e-12)
        assert not any(type(f).__name__ == "_DynamoFinder" for f in sys.meta_path), "the hook stayed"
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stdout + out.stderr


def _dynamo_tables():
    from torch._dynamo.variables.builder import VariableBuilder

    return [VariableBuilder._type_dispatch_impl(flag) for flag in (False, True)]


def test_a_torch_whose_internals_differ_keeps_dynamos_own_behaviour(monkeypatch):
    from torch._dynamo.variables.builder import VariableBuilder

    def gone(cls, flag):
        raise AttributeError("_type_dispatch_impl")

    tables = _dynamo_tables()
    sizes = [len(t) for t in tables]
    monkeypatch.setattr(VariableBuilder, "_type_dispatch_impl", classmethod(gone))
    _library._register_with_dynamo()  # no exception: it runs at the end of `import torch._dynamo`
    monkeypatch.undo()
    assert [len(t) for t in _dynamo_tables()] == sizes
