# SPDX-License-Identifier: MIT
"""Callbacks C keeps after the call (issue 36): held by the handle a constructor
returns (``until return``), by a handle parameter per registration, and given back by
an unregister function (``cb: release``); called from a C thread, checked against
NumPy. On 36e677b ``until return`` was refused for callbacks and nothing could release
one."""
from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import tensorffi
from tensorffi import ArgumentTypeError, ContractError, NativeError

SRC = r"""
#include <stdint.h>
#include <stdlib.h>
#include <pthread.h>
typedef void (*listener_fn)(const float *x, int64_t n, void *user);
typedef struct sdk_dev { listener_fn fns[4]; int count; float buf[4]; } sdk_dev;
sdk_dev *dev_open(void) { return calloc(1, sizeof(sdk_dev)); }
sdk_dev *dev_open_with(listener_fn cb, void *user) {
    (void)user;
    sdk_dev *d = dev_open();
    d->fns[d->count++] = cb;
    return d;
}
void dev_close(sdk_dev *d) { free(d); }
int dev_add_listener(sdk_dev *d, listener_fn cb, void *user) {
    (void)user;
    if (d->count == 4) return -1;  /* full: refused */
    d->fns[d->count++] = cb;
    return 0;
}
int dev_remove_listener(sdk_dev *d, listener_fn cb) {
    for (int i = 0; i < d->count; i++)
        if (d->fns[i] == cb) {
            for (int j = i + 1; j < d->count; j++) d->fns[j - 1] = d->fns[j];
            d->count--;
            return 0;
        }
    return -2;
}
int dev_listeners(sdk_dev *d) { return d->count; }
typedef struct { sdk_dev *d; int64_t count; float base; } job;
static void *run(void *arg) {
    job *j = arg;
    for (int64_t k = 0; k < j->count; k++) {
        for (int i = 0; i < 4; i++) j->d->buf[i] = j->base + (float)(k * 4 + i);
        for (int i = 0; i < j->d->count; i++) j->d->fns[i](j->d->buf, 4, NULL);
    }
    return NULL;
}
/* calls every listener `count` times from a thread of its own, joined before it returns */
int dev_fire(sdk_dev *d, int64_t count, float base) {
    pthread_t t;
    job j = {d, count, base};
    if (pthread_create(&t, NULL, run, &j) != 0) return -3;
    pthread_join(t, NULL);
    return 0;
}
"""
CDEF = """
typedef struct sdk_dev sdk_dev;
typedef void (*listener_fn)(const float *x, int64_t n, void *user);
sdk_dev *dev_open(void);
sdk_dev *dev_open_with(listener_fn cb, void *user);
void dev_close(sdk_dev *d);
int dev_add_listener(sdk_dev *d, listener_fn cb, void *user);
int dev_remove_listener(sdk_dev *d, listener_fn cb);
int dev_listeners(sdk_dev *d);
int dev_fire(sdk_dev *d, int64_t count, float base);
"""
CONTRACTS = {
    "dev_open": "return: handle(dev_close)",
    "dev_open_with": "cb: callback(x: [n], copy) until return; user: ?; return: handle(dev_close)",
    "dev_add_listener": "cb: callback(x: [n], copy) until d; user: ?; return: status",
    "dev_remove_listener": "cb: release; return: status",
    "dev_fire": "return: status",
}


@pytest.fixture(scope="module")
def sdk(cache):
    return tensorffi.compile("kept_callbacks", CDEF, source=SRC, contracts=CONTRACTS, cache=cache)


def frames(count: int, base: float) -> list[np.ndarray]:
    """What dev_fire delivers, computed in float64 and rounded as C's float."""
    return [(base + np.arange(k * 4, k * 4 + 4, dtype=np.float64)).astype(np.float32) for k in range(count)]


class Recorder:
    def __init__(self) -> None:
        self.got: list[np.ndarray] = []

    def __call__(self, x) -> None:  # noqa: ANN001
        self.got.append(x.numpy().copy())


def test_listeners_called_from_a_c_thread_after_registration(sdk, rng):
    dev = sdk.dev_open()
    a, b = Recorder(), Recorder()
    wa, wb = weakref.ref(a), weakref.ref(b)
    sdk.dev_add_listener(dev, a)
    sdk.dev_add_listener(dev, b)
    del a, b
    gc.collect()  # held by the handle, per registration
    count, base = int(rng.integers(1, 20)), float(rng.integers(-1000, 1000))
    sdk.dev_fire(dev, count, base)
    for rec in (wa(), wb()):
        assert rec is not None
        np.testing.assert_array_equal(np.array(rec.got), np.array(frames(count, base)))
    del rec
    dev.close()
    gc.collect()
    assert wa() is None and wb() is None  # given up when the handle closed


def test_a_removed_listener_is_not_called_and_is_given_up(sdk, rng):
    dev = sdk.dev_open()
    keep, gone = Recorder(), Recorder()
    sdk.dev_add_listener(dev, keep)
    sdk.dev_add_listener(dev, gone)
    sdk.dev_remove_listener(dev, gone)  # C is given the pointer it was registered with
    assert sdk.dev_listeners(dev) == 1
    w = weakref.ref(gone)
    del gone
    gc.collect()
    assert w() is None  # the bridge holds it no more
    base = float(rng.integers(0, 100))
    sdk.dev_fire(dev, 3, base)
    np.testing.assert_array_equal(np.array(keep.got), np.array(frames(3, base)))
    with pytest.raises(ArgumentTypeError, match="not registered with this handle"):
        sdk.dev_remove_listener(dev, Recorder())  # never registered: C would get an unknown pointer
    dev.close()


def test_the_same_callable_twice_is_held_twice_and_released_once_each(sdk):
    dev = sdk.dev_open()
    rec = Recorder()
    sdk.dev_add_listener(dev, rec)
    sdk.dev_add_listener(dev, rec)
    sdk.dev_fire(dev, 1, 0.0)
    assert len(rec.got) == 2  # two registrations, two calls
    sdk.dev_remove_listener(dev, rec)
    sdk.dev_fire(dev, 1, 0.0)
    assert len(rec.got) == 3  # the other registration is still held and called
    sdk.dev_remove_listener(dev, rec)
    sdk.dev_fire(dev, 1, 0.0)
    assert len(rec.got) == 3
    with pytest.raises(ArgumentTypeError, match="not registered"):
        sdk.dev_remove_listener(dev, rec)
    dev.close()


def test_a_registration_c_refuses_holds_nothing(sdk):
    dev = sdk.dev_open()
    held = [Recorder() for _ in range(4)]
    for r in held:
        sdk.dev_add_listener(dev, r)
    refused = Recorder()
    w = weakref.ref(refused)
    with pytest.raises(NativeError, match="dev_add_listener"):
        sdk.dev_add_listener(dev, refused)  # full: C keeps nothing of this call
    del refused
    gc.collect()
    assert w() is None
    sdk.dev_fire(dev, 1, 1.0)
    assert all(len(r.got) == 1 for r in held)
    dev.close()


def test_a_raising_listener_surfaces_at_the_call_that_ran_it(sdk):
    dev = sdk.dev_open()

    def boom(x):  # noqa: ANN001
        raise KeyError(f"listener saw {float(x[0])}")

    sdk.dev_add_listener(dev, boom)
    with pytest.raises(KeyError, match="listener saw 5.0"):
        sdk.dev_fire(dev, 1, 5.0)
    assert sdk.dev_listeners(dev) == 1  # the interpreter and the device are fine
    dev.close()


def test_a_constructor_keeps_its_callback_until_the_handle_closes(sdk, rng):
    rec = Recorder()
    w = weakref.ref(rec)
    dev = sdk.dev_open_with(rec)
    del rec
    gc.collect()
    assert w() is not None
    base = float(rng.integers(-50, 50))
    sdk.dev_fire(dev, 2, base)
    np.testing.assert_array_equal(np.array(w().got), np.array(frames(2, base)))
    assert "kept while the handle it returns lives" in str(tensorffi.describe(sdk.dev_open_with)) or \
        "until return" in str(tensorffi.describe(sdk.dev_open_with))
    dev.close()
    gc.collect()
    assert w() is None


@pytest.mark.parametrize("contract, match", [
    ("cb: callback(x: [n]) until return; user: ?", r"'until return' needs a function that makes one handle"),
    ("cb: callback(x: [n]) until nothing; user: ?", r"'until nothing' names no parameter"),
])
def test_until_return_without_a_handle_is_refused_at_bind_time(cache, contract, match):
    with pytest.raises(ContractError, match=match):
        tensorffi.compile("kept_callbacks", CDEF, source=SRC, cache=cache,
                          contracts={**CONTRACTS, "dev_add_listener": contract.replace("; user: ?", "") + "; user: ?"})


def test_release_needs_a_handle_parameter(cache):
    with pytest.raises(ContractError, match="gives a callback back to a handle"):
        tensorffi.compile("kept_cb_bad", "typedef void (*fn_t)(void); int drop(fn_t f);",
                          source="typedef void (*fn_t)(void); int drop(fn_t f) { (void)f; return 0; }",
                          contracts={"drop": "f: release"}, cache=cache)
