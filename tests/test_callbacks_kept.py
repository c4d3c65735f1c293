# SPDX-License-Identifier: MIT
"""Callbacks C keeps after the call: ``until return`` (held by the handle the call
returns) and ``cb: release`` (an unregister function gives one registration back),
against a small C library whose listeners are called from a thread it starts."""
from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
import torch

import tensorffi
from tensorffi import ContractError, HandleClosedError, NativeError
from tensorffi._decl import parse_declarations
from tensorffi.contract import parse_contract
from tensorffi.plan import build_plan

CDEF = """
typedef struct ldev ldev_t;
typedef void (*listener_fn)(const float *x, int64_t n, void *user);
ldev_t *dev_open(void);
ldev_t *dev_open_with(listener_fn cb, void *user);
int dev_open_out(ldev_t **out, listener_fn cb, void *user);
int dev_add_listener(ldev_t *dev, listener_fn cb, void *user);
int dev_remove_listener(ldev_t *dev, listener_fn cb);
int dev_remove_listener_buggy(ldev_t *dev, listener_fn cb);
int dev_fire(ldev_t *dev, const float *x, int64_t n, int64_t count);
int dev_listeners(ldev_t *dev);
void dev_close(ldev_t *dev);
ldev_t *dev_open_calling(listener_fn cb, void *user, const float *x, int64_t n);
int dev_closed(void);
int dev_open_buf(ldev_t **out, float *buf, int64_t n);
"""

SOURCE = r"""
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
typedef struct ldev ldev_t;
typedef void (*listener_fn)(const float *x, int64_t n, void *user);
#define MAXL 8
struct ldev { listener_fn fns[MAXL]; void *users[MAXL]; int n; };
ldev_t *dev_open(void) { return calloc(1, sizeof(ldev_t)); }
int dev_add_listener(ldev_t *d, listener_fn cb, void *user) {
    if (cb == NULL || d->n == MAXL) return -1;  /* refused: C keeps nothing */
    d->fns[d->n] = cb; d->users[d->n] = user; d->n++;
    return 0;
}
ldev_t *dev_open_with(listener_fn cb, void *user) {
    ldev_t *d = dev_open();
    if (d && dev_add_listener(d, cb, user)) { free(d); return NULL; }
    return d;
}
int dev_open_out(ldev_t **out, listener_fn cb, void *user) {
    *out = dev_open_with(cb, user);
    return *out ? 0 : -1;
}
int dev_remove_listener(ldev_t *d, listener_fn cb) {
    for (int i = d->n - 1; i >= 0; i--) {
        if (d->fns[i] == cb) {
            for (int j = i; j + 1 < d->n; j++) { d->fns[j] = d->fns[j + 1]; d->users[j] = d->users[j + 1]; }
            d->n--;
            return 0;
        }
    }
    return -2;
}
/* says it removed the listener, but keeps calling it */
int dev_remove_listener_buggy(ldev_t *d, listener_fn cb) { (void)d; (void)cb; return 0; }
int dev_listeners(ldev_t *d) { return d->n; }
struct job { ldev_t *d; const float *x; int64_t n, count; };
static void *run(void *arg) {
    struct job *j = arg;
    float *y = malloc(sizeof(float) * (size_t)(j->n ? j->n : 1));
    for (int64_t r = 0; r < j->count; r++) {
        for (int64_t i = 0; i < j->n; i++) y[i] = j->x[i] * (float)(r + 1);
        for (int k = 0; k < j->d->n; k++) j->d->fns[k](y, j->n, j->d->users[k]);
    }
    free(y);
    return NULL;
}
int dev_fire(ldev_t *d, const float *x, int64_t n, int64_t count) {
    struct job j = {d, x, n, count};
    pthread_t t;
    if (pthread_create(&t, NULL, run, &j)) return -3;
    pthread_join(t, NULL);
    return 0;
}
static int closed;
void dev_close(ldev_t *d) { free(d); __atomic_add_fetch(&closed, 1, __ATOMIC_SEQ_CST); }
int dev_closed(void) { return __atomic_load_n(&closed, __ATOMIC_SEQ_CST); }
int dev_open_buf(ldev_t **out, float *buf, int64_t n) { (void)buf; (void)n; *out = dev_open(); return *out ? 0 : -1; }
/* a constructor that calls its listener once, on the caller's thread, before it returns */
ldev_t *dev_open_calling(listener_fn cb, void *user, const float *x, int64_t n) {
    ldev_t *d = dev_open_with(cb, user);
    if (d) cb(x, n, user);
    return d;
}
"""

CONTRACTS = {
    "dev_open": "return: handle(dev_close)",
    "dev_open_with": "cb: callback(x: [n]) until return; user: ?; return: handle(dev_close)",
    "dev_open_out": "out: out handle(dev_close); cb: callback(x: [n]) until return; user: ?; return: status",
    "dev_add_listener": "cb: callback(x: [n]) until dev; user: ?; return: status",
    "dev_remove_listener": "cb: release; return: status",
    "dev_remove_listener_buggy": "cb: release; return: status",
    "dev_fire": "x: [n]; return: status",
    "dev_listeners": "return: count",
    "dev_open_calling": "cb: callback(x: [n]) until return; user: ?; x: [n]; return: handle(dev_close)",
    "dev_closed": "return: count",
    "dev_open_buf": "out: out handle(dev_close); buf: keep [n] until return; return: status",
}


@pytest.fixture(scope="module")
def lib(cache):
    return tensorffi.compile("listeners", CDEF, source=SOURCE, contracts=CONTRACTS, cache=cache,
                             extra_compile_args=["-pthread"])


def recorder(seen: list, tag: str):
    def on(x):
        seen.append((tag, x.numpy().copy()))  # x views C memory only while the call runs
    return on


def fired(x: np.ndarray, count: int) -> list[np.ndarray]:
    return [x * np.float32(r + 1) for r in range(count)]


def test_two_listeners_called_from_the_c_thread_with_the_data(lib, rng):
    x = rng.standard_normal(37).astype(np.float32)
    seen: list = []
    with lib.dev_open() as dev:
        lib.dev_add_listener(dev, recorder(seen, "a"), None)
        lib.dev_add_listener(dev, recorder(seen, "b"), None)
        gc.collect()  # the bridge, not the caller, keeps both callbacks alive
        lib.dev_fire(dev, x, 3)
    want = fired(x, 3)
    assert [t for t, _ in seen] == ["a", "b"] * 3
    for k, (_, got) in enumerate(seen):
        np.testing.assert_array_equal(got, want[k // 2])


def test_a_removed_listener_is_not_called_and_its_hold_is_released(lib, rng):
    x = rng.standard_normal(5).astype(np.float32)
    seen: list = []
    a, b = recorder(seen, "a"), recorder(seen, "b")
    with lib.dev_open() as dev:
        lib.dev_add_listener(dev, a, None)
        lib.dev_add_listener(dev, b, None)
        assert len(dev._state.kept) == 2
        lib.dev_remove_listener(dev, a)
        assert lib.dev_listeners(dev) == 1 and len(dev._state.kept) == 1
        lib.dev_fire(dev, x, 2)
        assert [t for t, _ in seen] == ["b", "b"]
        with pytest.raises(tensorffi.ArgumentTypeError, match="dev_remove_listener.*'cb'.*not registered"):
            lib.dev_remove_listener(dev, a)  # C never sees a pointer it does not know
        assert lib.dev_listeners(dev) == 1
        gone = weakref.ref(a)
        del a
        gc.collect()
        assert gone() is None  # the handle let the removed callable go


def test_the_same_callable_twice_is_held_twice_and_released_once_each(lib, rng):
    x = rng.standard_normal(4).astype(np.float32)
    seen: list = []
    f = recorder(seen, "f")
    with lib.dev_open() as dev:
        lib.dev_add_listener(dev, f, None)
        lib.dev_add_listener(dev, f, None)
        lib.dev_fire(dev, x, 1)
        assert len(seen) == 2
        lib.dev_remove_listener(dev, f)
        gc.collect()
        lib.dev_fire(dev, x, 1)
        assert len(seen) == 3  # the other registration still lives
        lib.dev_remove_listener(dev, f)
        lib.dev_fire(dev, x, 1)
        assert len(seen) == 3 and len(dev._state.kept) == 0
    for _, got in seen:
        np.testing.assert_array_equal(got, x)


def test_a_bound_method_passed_again_matches_its_registration(lib, rng):
    x = rng.standard_normal(3).astype(np.float32)

    class Meter:
        def __init__(self):
            self.total = 0.0

        def on(self, x):
            self.total += float(x.numpy().astype(np.float64).sum())

    m = Meter()
    with lib.dev_open() as dev:
        lib.dev_add_listener(dev, m.on, None)  # a new bound-method object each time
        lib.dev_fire(dev, x, 2)
        lib.dev_remove_listener(dev, m.on)
        lib.dev_fire(dev, x, 2)
        assert lib.dev_listeners(dev) == 0
    np.testing.assert_allclose(m.total, 3 * x.astype(np.float64).sum(), rtol=1e-6, atol=1e-6)


def test_releasing_a_callable_registered_on_another_handle_is_refused(lib):
    f = lambda x: None  # noqa: E731
    with lib.dev_open() as a, lib.dev_open() as b:
        lib.dev_add_listener(a, f, None)
        with pytest.raises(tensorffi.ArgumentTypeError, match="'cb'.*not registered on the handle"):
            lib.dev_remove_listener(b, f)
        lib.dev_remove_listener(a, f)


def test_a_registration_c_refuses_drops_its_hold(lib):
    with lib.dev_open() as dev:
        for _ in range(8):
            lib.dev_add_listener(dev, lambda x: None, None)
        with pytest.raises(NativeError, match="dev_add_listener"):
            lib.dev_add_listener(dev, lambda x: None, None)  # the C list is full
        assert len(dev._state.kept) == 8


def test_a_raising_listener_surfaces_at_the_next_call_that_takes_the_handle(lib, rng):
    """Raised on C's thread: the next call that takes the handle raises it (a call
    during which C called back on the caller's own thread raises it at its return,
    see test_gallery.py's libsamplerate tests)."""
    x = rng.standard_normal(3).astype(np.float32)
    seen: list = []

    def boom(x):
        raise KeyError("listener failed")

    with lib.dev_open() as dev:
        lib.dev_add_listener(dev, boom, None)
        lib.dev_add_listener(dev, recorder(seen, "ok"), None)
        lib.dev_fire(dev, x, 1)
        assert len(seen) == 1  # C went on to the next listener
        with pytest.raises(KeyError, match="listener failed"):
            lib.dev_listeners(dev)
        assert lib.dev_listeners(dev) == 2  # raised once
        lib.dev_remove_listener(dev, boom)
        lib.dev_fire(dev, x, 1)  # nothing left waiting
        assert len(seen) == 2


def test_close_with_listeners_registered(lib, rng):
    x = rng.standard_normal(3).astype(np.float32)
    seen: list = []
    dev = lib.dev_open()
    lib.dev_add_listener(dev, recorder(seen, "a"), None)
    dev.close()
    assert dev._state.kept == {}
    with pytest.raises(HandleClosedError, match="dev_fire"):
        lib.dev_fire(dev, x, 1)
    assert seen == []


def test_until_return_holds_the_callback_on_the_returned_handle(lib, rng):
    x = rng.standard_normal(11).astype(np.float32)
    seen: list = []
    dev = lib.dev_open_with(recorder(seen, "r"), None)  # nothing else refers to the callback
    gc.collect()
    lib.dev_fire(dev, x, 2)
    want = fired(x, 2)
    assert len(seen) == 2
    for k, (_, got) in enumerate(seen):
        np.testing.assert_array_equal(got, want[k])
    assert len(dev._state.kept) == 1
    dev.close()
    assert dev._state.kept == {}


def test_until_return_holds_the_callback_on_the_out_handle(lib, rng):
    x = rng.standard_normal(6).astype(np.float32)
    seen: list = []
    dev = lib.dev_open_out(recorder(seen, "o"))
    gc.collect()
    lib.dev_fire(dev, x, 1)
    np.testing.assert_array_equal(seen[0][1], x)
    dev.close()


def test_an_array_kept_until_return_is_held_by_the_out_handle(lib):
    buf = tensorffi.buffer(8)
    dev = lib.dev_open_buf(buf)
    assert len(dev._state.kept) == 1
    with pytest.raises(tensorffi.LayoutError, match="'buf'"):
        lib.dev_open_buf(torch.zeros(8))  # memory that could move is refused, as for 'until H'
    dev.close()
    assert dev._state.kept == {}


def test_a_raising_callback_kept_until_return(lib, rng):
    x = rng.standard_normal(2).astype(np.float32)

    def boom(x):
        raise ValueError("kept callback failed")

    dev = lib.dev_open_with(boom, None)
    lib.dev_fire(dev, x, 1)
    with pytest.raises(ValueError, match="kept callback failed"):
        lib.dev_fire(dev, x, 0)
    lib.dev_fire(dev, x, 0)  # raised once
    lib.dev_fire(dev, x, 1)
    with pytest.raises(ValueError, match="kept callback failed"):
        dev.close()  # or by close()
    assert dev.closed


def test_a_callback_raising_while_its_constructor_runs(lib, rng):
    """C called it before the handle existed: the handle is destroyed (once) and the
    exception raised when the constructor returns."""
    x = rng.standard_normal(4).astype(np.float32)
    seen: list = []
    dev = lib.dev_open_calling(recorder(seen, "c"), x)
    np.testing.assert_array_equal(seen[0][1], x)
    dev.close()

    def boom(x):
        raise LookupError("refused the first frame")

    before = lib.dev_closed()
    with pytest.raises(LookupError, match="refused the first frame"):
        lib.dev_open_calling(boom, x)
    assert lib.dev_closed() == before + 1


def test_a_call_into_a_released_callback_does_not_crash(lib, rng):
    """C that calls a listener after it said it removed it: the bridge keeps the C
    trampoline until the handle closes, does not call the Python function, and the
    next call that takes the handle says what happened."""
    x = rng.standard_normal(2).astype(np.float32)
    seen: list = []
    with lib.dev_open() as dev:
        late = recorder(seen, "late")
        lib.dev_add_listener(dev, late, None)
        lib.dev_remove_listener_buggy(dev, late)  # returns 0, keeps calling it
        assert len(dev._state.kept) == 0 and len(dev._state.retired) == 1  # its C entry point stays
        gc.collect()
        lib.dev_fire(dev, x, 1)
        with pytest.raises(NativeError, match="'cb' after it was released"):
            lib.dev_listeners(dev)
    assert seen == []


# --------------------------------------------------------------------------- #
# contracts refused at bind time                                               #
# --------------------------------------------------------------------------- #


def plan(decl: str, contract: str):
    d = parse_declarations("typedef struct ldev ldev_t; typedef void (*listener_fn)(const float *x, int64_t n);\n"
                           + decl).functions
    (f,) = d.values()
    return build_plan(None, f, parse_contract(contract))


def test_until_return_needs_a_returned_handle():
    with pytest.raises(ContractError, match="dev_add.*until return.*handle.*cb: callback"):
        plan("int dev_add(ldev_t *dev, listener_fn cb);", "cb: callback(x: [n]) until return; return: status")


def test_until_return_with_two_handles_is_ambiguous():
    with pytest.raises(ContractError, match="dev_pair.*ambiguous.*'other'.*cb: callback"):
        plan("ldev_t *dev_pair(ldev_t **other, listener_fn cb);",
             "other: out handle(dev_close); cb: callback(x: [n]) until return; return: handle(dev_close)")


def test_release_needs_a_handle_parameter():
    with pytest.raises(ContractError, match="dev_rm.*'cb: release'.*no handle parameter"):
        plan("int dev_rm(listener_fn cb);", "cb: release")


def test_describe_says_the_callback_is_kept_until_return():
    p = plan("ldev_t *dev_open_with(listener_fn cb);",
             "cb: callback(x: [n]) until return; return: handle(dev_close)")
    rows = {name: what for name, _, what in p.describe()}
    assert "kept while the handle it returns lives" in rows["cb"]
    bare = plan("int dev_make(ldev_t **out, listener_fn cb);", "out: out handle(dev_close); cb: callback(x: [n])")
    assert "kept while the handle given through 'out' lives" in {n: w for n, _, w in bare.describe()}["cb"]
    r = plan("int dev_rm(ldev_t *dev, listener_fn cb);", "cb: release")
    assert "releases" in {name: what for name, _, what in r.describe()}["cb"]


def test_a_callback_clause_on_a_number_is_refused():
    with pytest.raises(ContractError, match="'rate' .double. is not a function pointer"):
        plan("ldev_t *dev_rate(double rate);", "rate: callback() until return; return: handle(dev_close)")
