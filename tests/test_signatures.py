# SPDX-License-Identifier: MIT
"""Every bound function's ``__signature__`` is what a stub (.pyi) would say (issue 21
item 6): Python types that evaluate (torch, numpy, tensorffi, typing), the short
calling form, ``None`` defaults for what the bridge fills in, allocates or leaves NULL,
and a return type that matches what a call returns."""
from __future__ import annotations

import ast
import collections.abc
import inspect
import typing

import numpy as np
import pytest
import torch

import tensorffi
import tensorffi.core
from test_handles import CONTRACTS as SDK_CONTRACTS
from test_handles import SDK, sdk_cdef

NAMESPACE = {"torch": torch, "numpy": np, "tensorffi": tensorffi, "typing": typing, "collections": collections}

SOURCE = r"""
#include <stdint.h>
#include <stdbool.h>
#include <string.h>
int scale(const float *x, float *y, int64_t n, double a) { for (int64_t i = 0; i < n; i++) y[i] = (float)(a * x[i]); return 0; }
int64_t count_pos(const double *x, int64_t n) { int64_t c = 0; for (int64_t i = 0; i < n; i++) c += x[i] > 0; return c; }
double mean(const double *x, int64_t n) { double s = 0; for (int64_t i = 0; i < n; i++) s += x[i]; return n ? s / n : 0; }
bool any_zero(const int32_t *x, int n) { for (int i = 0; i < n; i++) if (!x[i]) return true; return false; }
const char *greeting(int formal) { return formal ? "Good day" : "hi"; }
size_t text_len(const char *s) { return strlen(s); }
uint32_t checksum(const void *data, size_t nbytes) { uint32_t h = 0; const unsigned char *p = data;
    for (size_t i = 0; i < nbytes; i++) h = h * 31u + p[i]; return h; }
void fill(float *data, int size, float v) { for (int i = 0; i < size; i++) data[i] = v; }
void pair(const float *x, float *lo, float *hi, int64_t n) { for (int64_t i = 0; i < n; i++) { lo[i] = x[i] - 1; hi[i] = x[i] + 1; } }
void maybe(const float *x, float *w, int64_t n) { if (w) for (int64_t i = 0; i < n; i++) w[i] = x[i]; }
"""
CDEF = """
int scale(const float *x, float *y, int64_t n, double a);
int64_t count_pos(const double *x, int64_t n);
double mean(const double *x, int64_t n);
bool any_zero(const int32_t *x, int n);
const char *greeting(int formal);
size_t text_len(const char *s);
uint32_t checksum(const void *data, size_t nbytes);
void fill(float *data, int size, float v);
void pair(const float *x, float *lo, float *hi, int64_t n);
void maybe(const float *x, float *w, int64_t n);
"""
CONTRACTS = {
    "scale": "x: [n]; y: out [n]; return: status",
    "count_pos": "x: [n]; return: count",
    "mean": "x: [n]",
    "any_zero": "x: [n]",
    "checksum": "data: [nbytes]",
    "fill": "data: inout [size]",
    "pair": "x: [n]; lo: out [n]; hi: out [n]",
    "maybe": "x: [n]; w: ?",
}


@pytest.fixture(scope="module")
def lib(cache):
    return tensorffi.compile("sigs", CDEF, source=SOURCE, contracts=CONTRACTS, cache=cache,
                             preamble="#include <stdbool.h>\n#include <stddef.h>\n#include <stdint.h>\n" + CDEF)


@pytest.fixture(scope="module")
def sdk(cache):
    return tensorffi.compile(
        "simsdk_sigs", sdk_cdef(), sources=[SDK / "simsdk.c"], include_dirs=[str(SDK)], preamble='#include "simsdk.h"',
        contracts=SDK_CONTRACTS, extra_compile_args=["-O2", "-pthread"], cache=cache,
    )


def _evaluates(annotation: str) -> object:
    value = eval(annotation, dict(NAMESPACE))  # noqa: S307 - our own annotation strings
    assert value is None or isinstance(value, (type, typing._GenericAlias, type(int | None), type(tuple[int]))) \
        or typing.get_origin(value) is not None, annotation
    return value


def _stub(name: str, sig: inspect.Signature) -> str:
    """The stub line a .pyi would hold for this signature."""
    parts, star = [], False
    for p in sig.parameters.values():
        if p.kind is p.KEYWORD_ONLY and not star:
            parts.append("*")
            star = True
        parts.append(f"{p.name}: {p.annotation}" + (" = None" if p.default is None else ""))
    return f"def {name}({', '.join(parts)}) -> {sig.return_annotation}: ..."


def _functions(lib):
    return [(n, getattr(lib, n)) for n in lib.functions] if hasattr(lib, "functions") else \
        [(n, getattr(lib, n)) for n in dir(lib) if not n.startswith("_") and callable(getattr(lib, n))]


def test_every_signature_is_a_stub_that_evaluates(lib, sdk):
    bound = [(n, f) for n, f in [*_functions(lib), *_functions(sdk)] if hasattr(f, "__wrapped_bridge__")]
    bound += [(n, getattr(tensorffi.core, n)) for n in ("scale_", "axpy_", "iota")]
    assert len(bound) >= 15
    for name, fn in bound:
        sig = inspect.signature(fn)
        plan = fn.__wrapped_bridge__.plan
        ast.parse(_stub(name, sig))
        for p in sig.parameters.values():
            assert isinstance(p.annotation, str), (name, p)
            _evaluates(p.annotation)
            assert p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
            assert (p.default is None) == (p.kind is p.KEYWORD_ONLY)
            if p.kind is p.KEYWORD_ONLY:
                assert p.annotation.endswith("| None"), (name, p)
        _evaluates(sig.return_annotation)
        # the short form's names in declaration order, then everything else by keyword
        assert [p.name for p in sig.parameters.values() if p.kind is p.POSITIONAL_OR_KEYWORD] == \
            [q.pyname for q in plan.positional]


def _is(value: object, annotation: str) -> bool:
    t = eval(annotation, dict(NAMESPACE))  # noqa: S307
    if t is None:
        return value is None
    if typing.get_origin(t) is tuple:
        return isinstance(value, tuple) and len(value) == len(typing.get_args(t)) and all(
            isinstance(v, a) for v, a in zip(value, typing.get_args(t)))
    return isinstance(value, t)


def test_what_a_call_returns_matches_its_return_annotation(lib, rng):
    x32 = rng.standard_normal(11).astype(np.float32)
    x64 = rng.standard_normal(11)
    calls = {
        "scale": [(x32, 2.0), (torch.from_numpy(x32), 0.5)],
        "count_pos": [(x64,)],
        "mean": [(torch.from_numpy(x64),)],
        "any_zero": [(rng.integers(0, 3, 9).astype(np.int32),)],
        "greeting": [(1,), (0,)],
        "text_len": [("tensorffi",), (b"abc",)],
        "checksum": [(b"some bytes",), (np.frombuffer(b"more bytes", np.uint8),)],
        "fill": [(np.zeros(4, np.float32), 3.0)],
        "pair": [(x32,), (torch.from_numpy(x32),)],
        "maybe": [(x32,)],
    }
    for name, arglists in calls.items():
        fn = getattr(lib, name)
        sig = inspect.signature(fn)
        for args in arglists:
            sig.bind(*args)  # the documented calling form binds
            out = fn(*args)
            assert _is(out, sig.return_annotation), (name, type(out), sig.return_annotation)
    # values against independent references
    assert lib.count_pos(x64) == int((x64 > 0).sum())
    assert lib.mean(x64) == pytest.approx(float(np.mean(x64)), rel=1e-12)
    assert lib.greeting(1) == "Good day" and lib.text_len("tensorffi") == len("tensorffi")
    lo, hi = lib.pair(x32)
    np.testing.assert_array_equal(lo, x32 - np.float32(1))
    np.testing.assert_array_equal(hi, x32 + np.float32(1))


def test_handles_and_callbacks_are_typed(sdk):
    sig = inspect.signature(sdk.simsdk_open)
    assert sig.return_annotation == "tensorffi.Handle"
    cb = inspect.signature(sdk.simsdk_set_callback).parameters["fn"]
    assert eval(cb.annotation, dict(NAMESPACE)) == collections.abc.Callable[..., typing.Any]  # noqa: S307
    dev = inspect.signature(sdk.simsdk_start).parameters["dev"]
    assert "tensorffi.Handle" in dev.annotation
