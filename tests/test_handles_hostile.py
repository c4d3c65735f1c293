# SPDX-License-Identifier: MIT
"""C that outlives the call, attacked: the sequences a hostile caller tries against
handles, kept buffers and callbacks (issue 20), and random role combinations bound
and called (every call runs or raises a TensorFFIError). Run under ASan + UBSan by
.ci/sanitize: a hold dropped too early is a use-after-free there."""
from __future__ import annotations

import gc
import inspect
import subprocess
import weakref

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tensorffi
from tensorffi import ContractError, HandleClosedError, LayoutError, NativeError, ShapeError, TensorFFIError

# A device that keeps a list of buffers and a list of listeners, as vendor SDKs do;
# it refuses a buffer registered twice and a fifth listener.
SOURCE = r"""
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
typedef struct dev dev;
typedef int (*listener_fn)(void *user, int64_t value);
struct dev { float *bufs[8]; int64_t lens[8]; int nbuf; listener_fn fns[4]; void *users[4]; int nfn; };
dev *dev_open(void) { return calloc(1, sizeof(dev)); }
void dev_close(dev *d) { memset(d, 0xAB, sizeof *d); free(d); }
int dev_register(dev *d, float *buf, int64_t n) {
    for (int i = 0; i < d->nbuf; i++) if (d->bufs[i] == buf) return -2;  /* already registered */
    if (d->nbuf == 8) return -3;
    d->bufs[d->nbuf] = buf; d->lens[d->nbuf] = n; d->nbuf++; return 0;
}
int dev_unregister(dev *d, float *buf) {
    for (int i = 0; i < d->nbuf; i++) if (d->bufs[i] == buf) { d->bufs[i] = d->bufs[--d->nbuf]; d->lens[i] = d->lens[d->nbuf]; return 0; }
    return -1;
}
int dev_fill(dev *d, float v) {  /* C writes every buffer it keeps */
    for (int i = 0; i < d->nbuf; i++) for (int64_t k = 0; k < d->lens[i]; k++) d->bufs[i][k] = v + (float)k;
    return 0;
}
int dev_listen(dev *d, listener_fn fn, void *user) {
    if (d->nfn == 4) return -3;
    d->fns[d->nfn] = fn; d->users[d->nfn] = user; d->nfn++; return 0;
}
int64_t dev_fire(dev *d, int64_t v) {  /* calls every listener, sums their answers */
    int64_t s = 0;
    for (int i = 0; i < d->nfn; i++) s += d->fns[i](d->users[i], v + i);
    return s;
}
void scale(float *data, int size) { for (int i = 0; i < size; i++) data[i] *= 2.0f; }
"""
CDEF = """
typedef struct dev dev;
typedef int (*listener_fn)(void *user, int64_t value);
dev *dev_open(void);
void dev_close(dev *d);
int dev_register(dev *d, float *buf, int64_t n);
int dev_unregister(dev *d, float *buf);
int dev_fill(dev *d, float v);
int dev_listen(dev *d, listener_fn fn, void *user);
int64_t dev_fire(dev *d, int64_t v);
void scale(float *data, int size);
"""
CONTRACTS = {
    "dev_open": "return: handle(dev_close)",
    "dev_register": "buf: keep [n] until d; return: status",
    "dev_unregister": "buf: release; return: status",
    "dev_fill": "d: acquire; return: status",
    "dev_listen": "fn: callback(error=0) until d; user: ?; return: status",
    "dev_fire": "return: value",
}


@pytest.fixture(scope="module", params=["compile", "load"])
def lib(request, cache, tmp_path_factory):
    if request.param == "compile":
        return tensorffi.compile("hostile_dev", CDEF, source=SOURCE, contracts=CONTRACTS, cache=cache)
    d = tmp_path_factory.mktemp("hostile")
    (d / "dev.c").write_text(SOURCE)
    so = d / "libdev.so"
    subprocess.run(["cc", "-O1", "-shared", "-fPIC", str(d / "dev.c"), "-o", str(so)], check=True)
    return tensorffi.load(so, CDEF, CONTRACTS)


def registrations(dev) -> int:
    return len(dev._state.kept)


def test_a_registration_c_refuses_keeps_the_first(lib, rng):
    """The same buffer again: C refuses it (it still keeps it from the first call), and
    the first call's hold stays: the buffer is not freed while C writes it."""
    with lib.dev_open() as dev:
        buf = tensorffi.buffer(16)
        lib.dev_register(dev, buf)
        with pytest.raises(NativeError):
            lib.dev_register(dev, buf)
        assert registrations(dev) == 1
        ref = weakref.ref(buf)
        del buf
        gc.collect()
        assert ref() is not None  # still held: C writes it
        v = float(rng.integers(1, 100))
        lib.dev_fill(dev, v)
        np.testing.assert_array_equal(ref().numpy(), v + np.arange(16, dtype=np.float32))
        lib.dev_unregister(dev, ref())  # C gives it back: the bridge stops holding it
        assert registrations(dev) == 0
    gc.collect()
    assert ref() is None


def test_refused_registrations_hold_nothing(lib):
    with lib.dev_open() as dev:
        bufs = [tensorffi.buffer(4) for _ in range(9)]
        for b in bufs[:8]:
            lib.dev_register(dev, b)
        with pytest.raises(NativeError):  # a ninth: C has no room
            lib.dev_register(dev, bufs[8])
        assert registrations(dev) == 8
        ref = weakref.ref(bufs[8])
        del bufs
        gc.collect()
        assert ref() is None  # C did not keep it, so neither does the bridge


def test_every_listener_stays_alive(lib, rng):
    """A second listener through the same function (C keeps a list): the first is
    not freed while C still calls it."""
    with lib.dev_open() as dev:
        offsets = [int(x) for x in rng.integers(0, 1000, size=4)]
        for off in offsets:
            lib.dev_listen(dev, lambda v, off=off: int(v) + off, None)
        gc.collect()
        with pytest.raises(NativeError):  # a fifth: refused by C, and not held
            lib.dev_listen(dev, lambda v: 0, None)
        assert registrations(dev) == 4
        base = int(rng.integers(0, 10**6))
        assert lib.dev_fire(dev, base) == sum(base + i + off for i, off in enumerate(offsets))


def test_memory_whose_owner_can_move_it_is_refused(lib):
    ba = bytearray(64)
    owned = np.zeros(16, np.float32)
    with lib.dev_open() as dev:
        for value in (torch.frombuffer(ba, dtype=torch.float32), owned, torch.from_numpy(owned), torch.zeros(16),
                      torch.zeros(16).share_memory_()):
            with pytest.raises(LayoutError, match="argument 'buf'.*tensorffi.buffer"):
                lib.dev_register(dev, value)
        assert registrations(dev) == 0
    ba.extend(b"\0" * 4096)  # what would have moved it under C


@pytest.mark.parametrize("move", ["share_memory_", "set_"])
def test_a_kept_tensor_whose_memory_torch_swaps_is_an_error_not_silent_loss(lib, move):
    with lib.dev_open() as dev:
        buf = tensorffi.buffer(16)
        lib.dev_register(dev, buf)
        if move == "share_memory_":
            buf.share_memory_()  # torch copies it to shared memory and frees the old block (not ours: held)
        else:
            buf.set_(torch.zeros(16))
        with pytest.raises(LayoutError, match="argument 'd'.*no longer holds the memory C writes"):
            lib.dev_fill(dev, 1.0)
        assert torch.count_nonzero(buf) == 0  # C did not run


def test_the_destructor_called_directly_closes_the_handle(lib):
    dev = lib.dev_open()
    lib.dev_register(dev, tensorffi.buffer(4))
    assert lib.dev_close(dev) is None
    assert dev.closed and registrations(dev) == 0
    with pytest.raises(HandleClosedError):
        lib.dev_fill(dev, 1.0)
    with pytest.raises(HandleClosedError, match="already closed"):
        lib.dev_close(dev)  # never a double free
    dev.close()  # idempotent


def test_the_quick_start_call_cannot_write_past_the_tensor(lib, rng):
    """``void scale(float *data, int size)`` with no contract: data must hold size elements."""
    n = int(rng.integers(2, 50))
    x = torch.from_numpy(rng.standard_normal(n).astype(np.float32))
    ref = x.numpy() * 2
    lib.scale(x, n)
    np.testing.assert_array_equal(x.numpy(), ref)
    lib.scale(x, n - 1)  # fewer is fine: a lower bound
    for kind in (x, x.numpy()):
        with pytest.raises(ShapeError, match=f"argument 'data' holds {n} elements, but 'size' is {n + 1000}"):
            lib.scale(kind, n + 1000)
    assert "at least 'size' elements" in repr(tensorffi.describe(lib.scale))


def test_a_contract_replaces_the_inferred_length(cache):
    src = "void fill(float *buf, int size) { for (int i = 0; i < size / 4; i++) buf[i] = 1.0f; }"
    lib = tensorffi.compile("hostile_unsized", "void fill(float *buf, int size);", source=src,
                            contracts={"fill": "buf: unsized"}, cache=cache)
    x = torch.zeros(4)
    lib.fill(x, 16)  # size counts bytes here: the contract says the names do not tell
    assert torch.equal(x, torch.ones(4))
    with pytest.raises(ContractError, match="'n: unsized' needs a pointer"):
        tensorffi.compile("hostile_unsized2", "void g(float *buf, int n);", source="void g(float *b, int n) {(void)b;(void)n;}",
                          contracts={"g": "n: unsized"}, cache=cache)


# --------------------------------------------------------------------------- #
# Random role combinations: bound and called, never a raw Python error        #
# --------------------------------------------------------------------------- #

ROLE_SOURCE = r"""
#include <stdint.h>
#include <stdlib.h>
typedef struct obj obj;
typedef int (*cb_fn)(void *user, const float *x, int64_t n);
struct obj { int x; };
obj *o_open(void) { return calloc(1, sizeof(obj)); }
int o_close(obj *o) { free(o); return 0; }
/* none of these touch their pointers: the test is about the bridge, not C */
int f_arrays(obj *o, float *a, const float *b, int64_t n, int m) { (void)o; (void)a; (void)b; return (int)((n + m) & 1); }
int f_callback(obj *o, cb_fn fn, void *user, int64_t n) { (void)o; (void)fn; (void)user; return (int)(n & 1); }
int64_t f_value(void *p, double *y, int64_t count) { (void)p; (void)y; return count; }
"""
ROLE_CDEF = """
typedef struct obj obj;
typedef int (*cb_fn)(void *user, const float *x, int64_t n);
obj *o_open(void);
int o_close(obj *o);
int f_arrays(obj *o, float *a, const float *b, int64_t n, int m);
int f_callback(obj *o, cb_fn fn, void *user, int64_t n);
int64_t f_value(void *p, double *y, int64_t count);
"""
CLAUSES = {
    "f_arrays": ["a: [n]", "a: out [n]", "a: keep [n] until o", "a: keep [n] until b", "a: release", "a: ?",
                 "a: in? [m]", "a: [n, m]", "a: unsized", "b: [m]", "b: out [n]", "b: [k]", "b: release",
                 "n = numel(a)", "n = 99999999999999999999", "n = 4", "m = n", "n = m*2", "m = 2147483648",
                 "o: acquire", "o: ?", "o: release", "return: status", "return: count", "return: none",
                 "return: handle(o_close)", "a: keep [n] until q"],
    "f_callback": ["fn: callback(x: [n]) until o", "fn: callback(x: [n], error=7)", "fn: callback(error=99999999999)",
                   "fn: callback(x: [q])", "fn: callback(x: [n], copy) until user", "user: ?", "o: ?", "o: acquire",
                   "n = 3", "return: count", "return: status", "fn: release"],
    "f_value": ["y: [count]", "y: out [count]", "y: keep [count] until p", "p: ?", "count = numel(y)",
                "count = -1", "p: acquire", "y: release", "return: value", "return: status"],
}


@pytest.fixture(scope="module")
def role_so(tmp_path_factory):
    d = tmp_path_factory.mktemp("roles")
    (d / "roles.c").write_text(ROLE_SOURCE)
    so = d / "libroles.so"
    subprocess.run(["cc", "-O1", "-shared", "-fPIC", str(d / "roles.c"), "-o", str(so)], check=True)
    return so


def _pools(opener, dtypes):
    """Per parameter name: values a caller would pass (arrays of the declared element
    type), and the hostile ones."""
    arrays = {name: [lambda dt=dt: torch.zeros(4, dtype=dt), lambda dt=dt: tensorffi.buffer(4, dt),
                     lambda dt=dt: torch.zeros(4, dtype=dt).numpy()] for name, dt in dtypes.items()}
    sizes = [lambda: 4, lambda: 2, lambda: 0]
    likely = {"o": [opener], "p": [opener], "fn": [lambda: (lambda *a: 0)], "user": [lambda: None],
              "n": sizes, "m": sizes, "count": sizes, "k": sizes, **arrays}
    hostile = [lambda: None, lambda: -1, lambda: 2**70, lambda: 2.5, lambda: "text", lambda: (lambda *a: 0), opener,
               lambda: torch.zeros(2, 2), lambda: np.zeros(3, np.float32)]
    return likely, hostile


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_every_role_combination_binds_and_calls_cleanly(role_so, data):
    fname = data.draw(st.sampled_from(sorted(CLAUSES)))
    clauses = data.draw(st.lists(st.sampled_from(CLAUSES[fname]), max_size=4, unique=True))
    contracts = {"o_open": "return: handle(o_close)", fname: "; ".join(clauses)}
    try:
        lib = tensorffi.load(role_so, ROLE_CDEF, contracts)
    except TensorFFIError:
        return  # refused at bind time, with a typed error
    fn = getattr(lib, fname)
    plan = fn.__wrapped_bridge__.plan
    dtypes = {p.name: {"float32": torch.float32, "float64": torch.float64}[p.dtype] for p in plan.params
              if p.kind == "array" and p.dtype in ("float32", "float64")}
    likely, hostile = _pools(lib.o_open, dtypes)

    def value(name: str):
        pool = likely.get(name.rstrip("_"), hostile)
        if data.draw(st.integers(0, 5)) == 0:
            pool = hostile
        return data.draw(st.sampled_from(pool))()

    for _ in range(3):
        params = inspect.signature(fn).parameters.values()
        args = [value(p.name) for p in params if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]
        kwargs = {p.name: value(p.name) for p in params
                  if p.kind is inspect.Parameter.KEYWORD_ONLY and data.draw(st.booleans())}
        try:
            fn(*args, **kwargs)
        except TensorFFIError:
            pass  # a typed error: the documented outcome of a bad argument
        for a in args:
            if isinstance(a, tensorffi.Handle):
                a.close()


@pytest.mark.parametrize("fname, contract, match", [
    ("f_value", "y: release; p: ?", None),  # fine: p is the handle it goes back to
    ("f_arrays", "n = 99999999999999999999", "'n' \\(int64_t\\) cannot hold"),
    ("f_arrays", "m = 2147483648", "'m' \\(int\\) cannot hold"),
    ("f_callback", "fn: callback(error=99999999999)", "error=99999999999' must be in"),
    ("f_callback", "fn: callback(x: [n]) until o; o: ?", "cannot then be optional"),
    ("f_arrays", "a: keep [n] until o; o: ?", "cannot then be optional"),
])
def test_contracts_the_call_could_not_honour_are_refused_at_bind_time(role_so, fname, contract, match):
    contracts = {"o_open": "return: handle(o_close)", fname: contract}
    if match is None:
        tensorffi.load(role_so, ROLE_CDEF, contracts)
        return
    with pytest.raises(ContractError, match=match):
        tensorffi.load(role_so, ROLE_CDEF, contracts)


@pytest.mark.parametrize("contract", ["p: ?; p: acquire", "p: ?; p: acquire; y: release",
                                      "p: ?; y: release; return: value"])
def test_an_optional_handle_left_out_is_no_handle(role_so, contract):
    # found by the role-combination property test: an absent optional void * handle
    # reached the kept-memory check as an unbound name
    lib = tensorffi.load(role_so, ROLE_CDEF, {"o_open": "return: handle(o_close)", "f_value": contract})
    n = int(np.random.default_rng().integers(1, 9))
    y = torch.zeros(n, dtype=torch.float64)
    assert lib.f_value(y=y, count=n, p=None) == n
    with lib.o_open() as h:
        assert lib.f_value(y=y, count=n, p=h) == n


def test_release_needs_a_handle_to_give_back_to(cache):
    with pytest.raises(ContractError, match="has no handle parameter"):
        tensorffi.compile("hostile_release", "int give(float *buf, int64_t n);",
                          source="#include <stdint.h>\nint give(float *b, int64_t n) { (void)b; return (int)n; }",
                          contracts={"give": "buf: release"}, cache=cache)
