# SPDX-License-Identifier: MIT
"""Lowering a contract plan to the bridge's native call path.

The plan (:mod:`tensorffi.plan`) says what every argument of a bound function is.
:func:`lower` turns it into the compact description that ``NativeCall`` objects of
``csrc/bridge_call.c`` run: one C entry point reads the arguments (torch tensors
through PyTorch's DLPack C exchange API, NumPy arrays through their struct, Python
numbers), checks them as the Python path does, allocates outputs, releases the GIL
around the C call and turns a failed status into the library's exception. Whatever
it does not accept as it is, it hands untouched to the Python path generated from the
same plan, which explains the refusal or makes the copy the contract allows.

Why a description and not generated C per function: ``load()`` needs no compiler,
the description costs nothing to build (a ``compile()`` module would otherwise need
a rebuild for every contract change), and the measured cost of interpreting it is a
few nanoseconds per argument against the 50–150 ns each of the torch attribute reads
that no way of calling avoids (``benchmarks/bridge.py``). The C function itself is
called through a *trampoline* compiled beside it (``_tfb_<name>``, see
:mod:`tensorffi._shims`) where a compiler ran (tensorffi's own module, ``compile()``);
for ``load()`` libraries, through cffi's own call of the intptr_t-declared symbol; for
``from_ctypes()`` libraries, by the function's address through a generic register call
(:func:`generic_call`, x86-64 System V only: elsewhere, cffi's call).

Functions the native path does not cover keep the Python path: strings, structs,
handles, callbacks, raw pointers, arrays C keeps after the call, pointer or
``char`` results (see :func:`native_reason`).

The encoding (int64 words; ``tfb_decode`` in bridge_call.c reads it)::

    header  VERSION nparams nsym ninputs npos returns result flags nfree nfill nreq nhidden value_code
    array   1 input dtype role optional rank min_len min_len2 min_bytes { factor nsym sym... } * rank
    int     2 input unsigned lo hi sym alias fill numel [factor nsym sym...]  (fill == 1)
    float   3 input bits
    free    (input sym) * nfree
    fills   param * nfill
    hidden  input * nhidden
"""
from __future__ import annotations

import inspect
import os
import sys
from array import array
from typing import Any, cast

import numpy as np

from .. import _torch as _tt
from .._shims import TRAMPOLINE_PREFIX
from ..plan import Param, Plan, operator_signature, pyname
from . import readonly

RETURN_CODES = {"none": 0, "status": 1, "count": 2, "value": 3}
RES_VOID, RES_INT, RES_UINT, RES_FLOAT, RES_BOOL = range(5)
ROLE_CODES = {"in": 0, "out": 1, "inout": 2}
FILL_DIM, FILL_NUMEL = 1, 2
FLAG_KERNEL = 1
VERSION = 4  # of the encoding (TFB_VERSION in bridge_call.c)
_INT64_MAX = (1 << 63) - 1


class _State:
    """What the native call path can do in this process (set once, at import)."""

    native: Any = None  # the configured module, or None
    torch_ok = False
    numpy_ok = False
    torch_pending = False  # configured for NumPy; torch's part waits for torch's import
    reason = ""  # why the path, or part of it, is off
    numpy_reason = ""
    dtype_codes: dict[str, int] = {}
    limits: dict[str, int] = {}


STATE = _State()


def _torch_facts(torch: Any) -> tuple[Any, ...] | str:
    """The arguments of bridge_configure for torch, or why it cannot be used."""
    Tensor, Parameter = torch.Tensor, torch.nn.Parameter
    cap = getattr(Tensor, "__dlpack_c_exchange_api__", None)
    if cap is None:
        return f"torch {torch.__version__} has no DLPack C exchange API (Tensor.__dlpack_c_exchange_api__)"
    base = torch._C.TensorBase
    attrs = []
    for name in ("is_neg", "is_conj", "untyped_storage", "requires_grad", "_version"):
        d = inspect.getattr_static(Tensor, name, None)
        # read from C directly only where neither Tensor nor Parameter overrides the C one
        if d is None or d is not base.__dict__.get(name) or inspect.getattr_static(Parameter, name, None) is not d:
            return f"torch.Tensor.{name} is not torch's own C attribute here"
        attrs.append(d)
    probe = torch.arange(4, dtype=torch.float32)
    st = probe.untyped_storage()
    sdp = inspect.getattr_static(type(st), "data_ptr", None)
    if sdp is None or len(st) != st.nbytes() or st.data_ptr() != probe.data_ptr():
        return "torch.UntypedStorage does not report its size and address as expected"
    neg, conj, ust, rg, ver = attrs
    return (Tensor, Parameter, type(st), cap, neg, conj, ust, sdp, rg, ver, torch._C._increment_version,
            torch.is_grad_enabled, readonly.overlaps)


def _numpy_facts(names: tuple[str, ...]) -> tuple[Any, ...]:
    dtypes: list[np.dtype[Any] | None]
    nums: list[tuple[int, ...]]
    dtypes, nums = [], []
    chars = "?bBhHiIlLqQefdgFDG"
    for name in names:
        if name in ("any", "bfloat16"):
            dtypes.append(None)
            nums.append(())
            continue
        dt = np.dtype(name)
        dtypes.append(dt)
        # every NumPy type number of this dtype (int64 is both 'l' and 'q' on LP64)
        nums.append(tuple(sorted({np.dtype(c).num for c in chars if np.dtype(c) == dt})))
    probe = np.arange(6, dtype=np.float32).reshape(2, 3)
    native = "<" if sys.byteorder == "little" else ">"
    facts = (probe.__array_interface__["data"][0], probe.ndim, probe.shape, probe.strides,
             int(probe.flags.c_contiguous) | int(probe.flags.aligned) << 8 | int(probe.flags.writeable) << 10,
             probe.dtype.num, probe.base)
    return (np.ndarray, np.empty, tuple(dtypes), tuple(nums), native, probe, facts)


def configure() -> None:
    """Install and configure the native call path (TENSORFFI_BRIDGE=python turns it off).

    NumPy arrays are configured at the first call; torch tensors once torch has been
    imported (a tensor cannot exist before): now if it is, else
    (:func:`tensorffi._torch.when_imported`: right after its import completes), so
    NumPy-only use never imports torch."""
    if STATE.native is not None or STATE.reason:
        return
    if os.environ.get("TENSORFFI_BRIDGE", "").lower() == "python":
        STATE.reason = "off (TENSORFFI_BRIDGE=python)"
        return
    try:
        from .. import _native
    except ImportError as exc:  # pragma: no cover - tensorffi._lib explains a broken install
        STATE.reason = f"off (no native module: {exc})"
        return
    if not hasattr(_native, "NativeCall"):
        if _native.lib.tf_bridge_install(_native.__name__.encode()) != 0:  # pragma: no cover
            STATE.reason = "off (" + _native.ffi.string(_native.lib.tf_last_error()).decode() + ")"
            return
    names = _native.bridge_dtypes()
    _, numpy_ok = _native.bridge_configure(None, _numpy_facts(names))
    STATE.numpy_ok = bool(numpy_ok)
    if not numpy_ok:  # pragma: no cover - NumPy's array struct does not look as expected
        STATE.numpy_reason = "NumPy's array struct does not look as expected"
    STATE.native = _native
    STATE.dtype_codes = {n: i for i, n in enumerate(names)}
    STATE.limits = dict(_native.bridge_limits())
    STATE.torch_pending = True
    if not numpy_ok:  # pragma: no cover - then torch's part is all there is
        import torch  # noqa: F401
    _tt.when_imported(_configure_torch)


def _configure_torch(torch: Any) -> None:
    """The torch part of :func:`configure` (torch is imported)."""
    STATE.torch_pending = False
    try:
        tf = _torch_facts(torch)
    except Exception as exc:  # noqa: BLE001 - a torch unlike any we know: its tensors take the Python path
        tf = f"torch's tensors cannot be read from C here ({type(exc).__name__}: {exc})"
    torch_reason = tf if isinstance(tf, str) else ""
    torch_ok = False
    if not torch_reason:
        torch_ok, _ = STATE.native.bridge_configure(tf, None)
        if torch_ok:  # C asks readonly.overlaps only while a read-only buffer is alive
            readonly.on_change(STATE.native.bridge_readonly_count)
    STATE.torch_ok = bool(torch_ok)
    reasons = [torch_reason] if torch_reason else []
    if STATE.numpy_reason:  # pragma: no cover
        reasons.append(STATE.numpy_reason)
    if not (STATE.torch_ok or STATE.numpy_ok):  # pragma: no cover - neither library looks as expected
        STATE.native = None
        STATE.reason = f"off ({'; '.join(reasons)})"
        return
    STATE.reason = "; ".join(reasons)


def describe() -> str:
    """What ``tensorffi.info()`` reports about the call path."""
    configure()
    if STATE.native is None:
        return f"Python ({STATE.reason.removeprefix('off (').removesuffix(')')})"
    kinds = [k for k, ok in (("torch tensors: DLPack exchange API", STATE.torch_ok),
                             ("torch tensors: once torch is imported", STATE.torch_pending),
                             ("NumPy arrays: array struct", STATE.numpy_ok)) if ok]
    text = "native (" + "; ".join(kinds) + ")"
    return text + (f"; Python for the rest: {STATE.reason}" if STATE.reason else "")


def reader() -> Any:
    """``read(obj, dtype code, written, grad_ok)``: the native path's reading of one
    argument for the Python path (csrc/bridge_call.c ``bridge_read``), or its Python
    mirror where C cannot read tensors (:func:`tensorffi._bridge.arrays.read_as_is`)."""
    configure()
    if STATE.native is not None and STATE.numpy_ok and (STATE.torch_ok or STATE.torch_pending):
        return STATE.native.bridge_read  # (reads tensors from C once torch is configured)
    from .arrays import read_as_is  # its Python mirror

    return lambda v, code, written, grad_ok: read_as_is(v, _NAMES[code], written, grad_ok)


def tensor_copy() -> Any:
    """``copy(array, code)``: a new torch tensor holding a copy of a C-contiguous NumPy
    array (element type ``code``, see :func:`dtype_code`); None where the native path is off."""
    configure()
    if STATE.native is None or not (STATE.torch_ok and STATE.numpy_ok):
        return None
    return STATE.native.bridge_tensor_copy


def _no_contents(obj: Any) -> None:
    return None


def contents() -> Any:
    """``contents(array)``: ``(dtype code, shape, bytes)`` of a small tensor or array C
    could read as it is (a content key for caches that never go stale), else None."""
    configure()
    return _no_contents if STATE.native is None else STATE.native.bridge_contents


#: element type names in the order of their codes (csrc/bridge_call.c's table; the
#: Python path uses the same codes where the native path is off)
_NAMES = ("any", "float16", "bfloat16", "float32", "float64", "complex64", "complex128", "int8", "uint8", "int16",
          "uint16", "int32", "uint32", "int64", "uint64", "bool")


def dtype_code(name: str) -> int:
    """The code of element type ``name`` ("float32") in the native path's table."""
    configure()
    return (STATE.dtype_codes or {n: i for i, n in enumerate(_NAMES)}).get(name, -1)


# --------------------------------------------------------------------------- #
# Lowering                                                                     #
# --------------------------------------------------------------------------- #


def _param_reason(p: Param) -> str | None:
    if p.kind == "array":
        if p.keep_until is not None or p.release:
            return f"'{p.name}' is kept by C after the call"
        if p.dtype not in STATE.dtype_codes:
            return f"'{p.name}' has element type {p.dtype}"
        if p.shape is not None:
            if p.dtype == "any":
                return f"'{p.name}' is void *, its length counted in bytes"
            if any(d.expr is not None for d in p.shape):
                return f"a dimension of '{p.name}' is an expression of sizes"
            if len(p.shape) > STATE.limits["rank"]:
                return f"'{p.name}' has more than {STATE.limits['rank']} dimensions"
            if any(len(d.symbols) > STATE.limits["dim_symbols"] for d in p.shape):
                return f"a dimension of '{p.name}' is a product of too many sizes"
        return None
    if p.kind == "scalar":
        ct = p.ctype.replace("const ", "").strip()
        if p.fill is not None and p.fill.dim is not None and p.fill.dim.expr is not None:
            return f"'{p.name}' is filled in with an expression of sizes"
        if p.scalar in ("int", "bool") and p.int_range is not None and ct != "char":
            return None
        if p.scalar == "float" and ct in ("float", "double"):
            return None
        return f"'{p.name}' is {p.ctype}"
    return f"'{p.name}' is a {p.kind} parameter ({p.ctype})"


def _result_code(ffi: Any, plan: Plan) -> int | None:
    res = plan.decl.result
    if plan.returns in ("none",) or res.text == "void":
        return RES_VOID
    if res.pointer_depth or res.is_struct or res.is_function_pointer:
        return None
    text = res.text.replace("const ", "").strip()
    if res.resolved in ("float", "double"):
        return RES_FLOAT
    if not res.is_integer or res.resolved == "char":
        return None
    if res.resolved in ("_Bool", "bool") or res.base == "bool":
        return RES_BOOL
    try:
        signed = int(ffi.cast(text, -1)) < 0
        big = ffi.sizeof(text) == 8
    except Exception:
        return None
    return RES_UINT if (not signed and big) else RES_INT


def native_reason(plan: Plan, ffi: Any, *, trampoline: int | None, pointers_as_int: bool) -> str | None:
    """Why ``plan`` cannot run on the native call path (None: it can)."""
    if STATE.native is None:
        return f"the native call path is {STATE.reason}"
    if plan.returns not in RETURN_CODES or plan.result_is_string:
        return f"it returns {plan.decl.result.text} as {plan.returns}"
    if _result_code(ffi, plan) is None:
        return f"its result is {plan.decl.result.text}"
    for p in plan.params:
        why = _param_reason(p)
        if why is not None:
            return why
    if not trampoline and not pointers_as_int and any(p.kind == "array" for p in plan.params):
        return "its module has no trampoline and no intptr_t shim for it"
    lim = STATE.limits
    inputs = len(plan.positional) + len(plan.keyword_only) + len(plan.free_sizes)
    if len(plan.params) > lim["params"] or len(plan.contract.symbols) > lim["symbols"] or inputs > lim["inputs"]:
        return "it has more parameters or sizes than the native path takes"
    return None


def _dim(d: Any, sym: dict[str, int]) -> list[int]:
    return [d.factor, len(d.symbols), *(sym[s] for s in d.symbols)]


def encode(plan: Plan, ffi: Any, kernel: tuple[list[str], dict[str, Any]] | None = None
           ) -> tuple[bytes, tuple[str, ...], list[Any]]:
    """The description of ``plan`` (see the module docstring), its input names and the
    hidden parameters' callables.

    ``kernel``: ``(operator argument names, hidden)`` for an operator's body: inputs in
    operator order (trailing optional ones may be left out), hidden parameters' values
    from their callables, outputs first and the C result as a 0-d tensor."""
    if kernel is None:
        names = [p.pyname for p in plan.positional] + [p.pyname for p in plan.keyword_only] + [
            pyname(s) for s in plan.free_sizes]
        npos = nreq = len(plan.positional)
        hidden_names: list[str] = []
        flags = value_code = 0
    else:
        op_names, hidden = kernel
        names = list(op_names)
        npos = len(names)
        _, outs = operator_signature(plan, hidden)
        optional = {p.pyname for p in plan.params if p.kind == "array" and p.optional}
        nreq = npos
        while nreq and names[nreq - 1] in optional:
            nreq -= 1  # the dispatcher leaves out trailing arguments equal to their default (None)
        # parameters the operator does not take: computed (fills, outputs) or hidden
        names += ["\0" + p.name for p in plan.params if p.pyname not in op_names]
        hidden_names = ["\0" + name for name in hidden]
        flags = FLAG_KERNEL
        value_code = STATE.dtype_codes[outs[-1].dtype] if plan.returns == "value" else 0
    where = {n: i for i, n in enumerate(names)}
    for p in plan.params:
        where.setdefault(p.pyname, where.get("\0" + p.name, -1))
    sym = {s: i for i, s in enumerate(sorted(plan.contract.symbols))}
    by_name = plan.by_name
    words = [VERSION, len(plan.params), len(sym), len(names), npos, RETURN_CODES[plan.returns],
             cast(int, _result_code(ffi, plan)), flags, len(plan.free_sizes), len(plan.fill_order), nreq, len(hidden_names),
             value_code]
    for p in plan.params:
        if p.kind == "array":
            shape = p.shape
            words += [1, where[p.pyname], STATE.dtype_codes[p.dtype or "any"], ROLE_CODES[p.role], int(p.optional),
                      -1 if shape is None else len(shape)]
            lens = [by_name[n].index for n in p.min_len]
            words += [*(lens + [-1, -1])[:2], int(p.min_len_bytes)]
            for d in shape or ():
                words += _dim(d, sym)
        elif p.scalar == "float":
            words += [3, where[p.pyname], p.float_bits]
        else:
            lo, hi = p.int_range  # type: ignore[misc]
            f = p.fill
            alias = -1
            if f is not None and not p.is_symbol and f.dim is not None and len(f.dim.symbols) == 1 \
                    and f.dim.factor == 1:
                alias = sym[f.dim.symbols[0]]
            kind = 0 if f is None else FILL_DIM if f.dim is not None else FILL_NUMEL
            numel = by_name[f.numel_of].index if kind == FILL_NUMEL else -1  # type: ignore[union-attr, index]
            words += [2, where[p.pyname], int(hi > _INT64_MAX), lo, hi if hi <= _INT64_MAX else hi - (1 << 64),
                      sym[p.name] if p.is_symbol else -1, alias, kind, numel]
            if kind == FILL_DIM:
                words += _dim(f.dim, sym)  # type: ignore[union-attr]
    for s in plan.free_sizes:
        words += [where[pyname(s)], sym[s]]
    words += [by_name[n].index for n in plan.fill_order]
    words += [where[n] for n in hidden_names]
    callables = [] if kernel is None else [kernel[1][n.removeprefix("\0")] for n in hidden_names]
    return array("q", words).tobytes(), tuple(names), callables


#: struct-module codes of integer results by (size, signed) for the generic register call
_GENERIC_INT = {(1, True): "b", (1, False): "B", (2, True): "h", (2, False): "H", (4, True): "i", (4, False): "I",
                (8, True): "q", (8, False): "Q"}


def generic_call(plan: Plan, ffi: Any, address: int | None) -> tuple[int, bytes, bytes] | None:
    """``(address, classes, result)`` for calling ``plan``'s function by its address
    alone through csrc/bridge_call.c's generic register call (``tfb_generic_call``:
    x86-64 System V, every argument in a register), or None where it cannot: no
    address, another platform, a signature with more than 6 integer or 8 floating
    arguments, or a type the call does not place."""
    if address is None or not STATE.limits.get("generic"):
        return None
    classes = []
    for p in plan.params:
        if p.kind == "array":
            classes.append("i")
        elif p.kind == "scalar" and p.scalar == "float":
            classes.append("f" if p.float_bits == 32 else "d")
        elif p.kind == "scalar" and p.int_range is not None:
            classes.append("i")
        else:
            return None
    if classes.count("i") > STATE.limits["generic_int"] or len(classes) - classes.count("i") > STATE.limits["generic_sse"]:
        return None
    res = plan.decl.result
    if res.text == "void":
        code = "v"
    elif res.pointer_depth or res.is_struct or res.is_function_pointer:
        return None
    elif res.resolved in ("float", "double"):
        code = "f" if res.resolved == "float" else "d"
    elif res.is_integer:
        text = res.text.replace("const ", "").strip()
        if res.resolved in ("_Bool", "bool") or res.base == "bool":
            code = "?"
        else:
            try:
                code = _GENERIC_INT[(ffi.sizeof(text), int(ffi.cast(text, -1)) < 0)]
            except Exception:
                return None
    else:
        return None
    return address, "".join(classes).encode(), code.encode()


def trampoline_address(ffi: Any, lib: Any, name: str) -> int | None:
    """The address of function ``name``'s trampoline in API-mode library ``lib``, if any."""
    tname = TRAMPOLINE_PREFIX + name
    try:
        getattr(lib, tname)
    except AttributeError:
        return None
    return int(ffi.cast("intptr_t", ffi.addressof(lib, tname)))


def lower(bound: Any, fallback: Any) -> tuple[Any, str | None]:
    """``(native_call, None)`` for ``bound`` (a BoundFunction), or ``(None, reason)``.

    ``fallback`` is the Python path: the native call hands it every call it does not
    accept as it is, with the same arguments."""
    configure()
    plan = bound.plan
    why = native_reason(plan, bound.ffi, trampoline=bound.trampoline, pointers_as_int=bound.pointers_as_int)
    if why is not None:
        return None, why
    spec, names, _ = encode(plan, bound.ffi)
    generic = None if bound.trampoline else generic_call(plan, bound.ffi, getattr(bound, "address", None))
    call = STATE.native.NativeCall(spec, names, bound.trampoline or 0, None if bound.trampoline else bound.cfunc,
                                   fallback, bound.raise_status, bound.keepalive, None, generic)
    return call, None


def lower_kernel(bound: Any, fallback: Any, hidden: dict[str, Any], grad_guard: Any) -> tuple[Any, str | None]:
    """The native body of ``bound`` as an operator (see :func:`tensorffi.bridge.tensor_kernel`),
    or ``(None, reason)``; ``fallback`` is the generated Python body."""
    configure()
    plan = bound.plan
    why = native_reason(plan, bound.ffi, trampoline=bound.trampoline, pointers_as_int=bound.pointers_as_int)
    if why is None and not bound.trampoline:
        why = "an operator's body needs the function's trampoline"
    for name in hidden:
        p = plan.by_name.get(name)
        if why is None and (p is None or p.kind != "scalar" or p.fill is not None or p.is_symbol):
            why = f"hidden parameter '{name}' is not a plain scalar"
    if why is not None:
        return None, why
    args, _ = operator_signature(plan, hidden)
    spec, names, callables = encode(plan, bound.ffi, ([a.name for a in args], dict(hidden)))
    import torch

    call = STATE.native.NativeCall(spec, names, bound.trampoline, None, fallback, bound.raise_status, bound.keepalive,
                                   (tuple(callables), grad_guard, torch.is_grad_enabled))
    return call, None


__all__ = ["configure", "describe", "lower", "lower_kernel", "reader", "native_reason", "encode", "trampoline_address",
           "generic_call", "tensor_copy",
           "contents", "dtype_code", "STATE"]
