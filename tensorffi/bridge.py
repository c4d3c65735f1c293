# SPDX-License-Identifier: MIT
"""The bridge: the one place where a tensor or an array becomes a C pointer.

A C function is bound through its :class:`~tensorffi.plan.Plan` (its declaration,
parsed with ``const`` kept, plus an optional :mod:`contract <tensorffi.contract>`,
compiled and validated once). From the plan the bridge makes, once per function:

* the **native call** (``csrc/bridge_call.c``, described by ``_bridge/lower.py``): one
  C entry point reads torch tensors through PyTorch's DLPack C exchange API and NumPy
  arrays through their struct, checks them, allocates outputs, releases the GIL around
  the C call (through a trampoline compiled beside the function) and raises the
  library's exception for a failed status;
* the **Python path** (``_bridge/generate.py``): specialised Python code for the same
  call, which the native call hands every argument it does not accept as it is (this
  code explains the refusal, or makes the copy the contract allows), and which is the
  whole call for what the native path does not cover (strings, structs, handles,
  callbacks, arrays C keeps, pointer results; and a torch without the exchange API);
* an operator's body (native too) and its shape rule (Python: fake tensors, symbolic
  sizes) for :mod:`tensorffi.ops`.

The package ``tensorffi._bridge`` holds the parts: ``arrays`` (the rules for array
arguments), ``scalars``, ``structs`` (strings, structs, handles), ``callbacks``,
``generate`` and ``lower``. Every call checks every argument *before* C touches memory:

* element type against the C pointer type (``float *`` is float32, ``void *`` any);
* device: only CPU memory; CUDA, meta and fake tensors are refused and their
  ``data_ptr()`` is never read; sparse and nested tensors are refused;
* memory: the bytes the tensor's storage really holds must cover the tensor (a
  storage resized under a tensor is refused, never handed to C), and the storage
  itself is held for the whole call;
* lazy views whose memory does not hold their values (the negative or conjugate
  bit: ``z.conj().imag``) are resolved where a copy is allowed (a read argument with
  a contract shape) and refused elsewhere, as ``Tensor.numpy()`` refuses them;
* written arguments (non-``const`` pointers, ``out``/``inout`` roles) must be
  contiguous and writable: read-only arrays, tensors over a read-only buffer
  (``torch.frombuffer(bytes)``, a read-only mmap, ``torch.from_numpy`` of a read-only
  array: see :mod:`tensorffi._bridge.readonly` for what is detected), tensors that
  require grad, inference tensors outside inference mode, expanded and
  self-overlapping views are refused,
  never silently copied (a copy would lose the write); written arguments that
  overlap each other, or an input, are refused. After the call the tensor's
  autograd version counter is bumped;
* a read argument that requires grad, with grad mode on, is a ``GradError``: C is
  outside autograd, so its result would silently have no gradient (``x.detach()``,
  ``torch.no_grad()``, or an operator with a backward, :func:`tensorffi.ops.register`,
  whose bodies take such tensors);
* read-only arguments may be copied to contiguous memory only where a contract
  declares their shape; otherwise a non-contiguous input is refused too, because
  the C function may walk its own strides and read past a copy. Pass
  :func:`strided` to hand C a view's own pointer on purpose;
* sizes against the contract's symbolic shapes; length arguments are filled in;
  ``out`` arrays are allocated in the caller's kind (torch in, torch out; the
  native call allocates a tensor's memory itself and torch frees it: like
  ``torch.from_numpy``'s, such a storage cannot be resized);
* scalars against the range of their C type (``OverflowError``, also for a finite
  double that a C ``float`` cannot hold); a float (of any kind) for an integer
  parameter is a ``TypeError``, never truncated;
* strings: ``str`` and ``bytes`` (NUL-terminated by the bridge; an embedded NUL is
  refused), byte arrays only if they hold a NUL; ``None`` only where the contract
  says ``NAME: ?``;
* lifetimes: every object whose memory C sees (including copies, and tensors placed
  in a :class:`Struct`) is referenced until the call returns.

The GIL is released around every C call (by the native call, or by cffi).
"""
from __future__ import annotations

import sys
import warnings
from typing import Any, Callable, Mapping

from ._bridge import lower as _lower
from ._bridge.arrays import NUMPY_DTYPES, TORCH_DTYPES, prepare_array, strided
from ._bridge.callbacks import _callback_factory
from ._bridge.generate import _Gen
from ._bridge.structs import Struct, _typeof
from ._decl import CFunction
from .contract import Contract
from .errors import ContractError, NativeError, UncheckedWarning, error_for_status
from .handles import Handle
from .plan import OpArg, OpOutput, Param, Plan, build_plan, operator_signature, python_signature

# --------------------------------------------------------------------------- #
# Bound functions                                                              #
# --------------------------------------------------------------------------- #


def _unchecked_warning(plan: Plan, unchecked: list[Param], fields: list[str] | None = None) -> Callable[[], None]:
    """What a bound function says at its first call when some of its arrays have no
    length the bridge can check (``Param.unchecked``), or some pointer fields of its
    struct arguments (``StructFields.unchecked``): one UncheckedWarning naming them,
    with the contract to write, attributed to the caller's line."""
    texts = []
    if unchecked:
        names = ", ".join(f"'{p.name}' ({p.ctype})" for p in unchecked)
        ints = [p.name for p in plan.params if p.kind == "scalar" and p.scalar == "int"]
        first = unchecked[0].name
        example = f"'{first}: [{ints[0] if ints else 'n'}]'"
        texts.append(f"{plan.name}(): argument{'s' if len(unchecked) > 1 else ''} {names} "
                     f"{'have' if len(unchecked) > 1 else 'has'} no length the bridge can check, so C may read or write "
                     f"past {'their' if len(unchecked) > 1 else 'its'} end. Give the shape in the contract "
                     f"({{'{plan.name}': {example}}}), or '{first}: unsized' where no length applies; "
                     f"tensorffi.describe() shows what is checked")
    if fields:
        type_name, _, field_name = fields[0].partition(".")
        texts.append(f"{plan.name}(): struct field{'s' if len(fields) > 1 else ''} {', '.join(fields)} "
                     f"{'have' if len(fields) > 1 else 'has'} no length the bridge can check, so C may read or write "
                     f"past the array{'s' if len(fields) > 1 else ''} assigned there. Give the shape in the struct's "
                     f"contract (contracts={{'{type_name}': '{field_name}: [n]'}}, with n an integer field), or "
                     f"'{field_name}: unsized' where no length applies")
    text = "; ".join(texts)

    def warn() -> None:
        level, frame = 2, sys._getframe(1)
        while frame is not None and frame.f_globals.get("__name__", "").startswith("tensorffi"):
            level, frame = level + 1, frame.f_back  # type: ignore[assignment]
        warnings.warn(UncheckedWarning(text), stacklevel=level)

    return warn


def _first_call(call: Callable[..., Any], hook: Callable[[], None]) -> Callable[..., Any]:
    """``call`` that runs ``hook()`` before its first call (the Python path's form of
    NativeCall._first_call)."""
    pending = [hook]

    def first(*args: Any, **kwargs: Any) -> Any:
        if pending:
            hook()  # under -W error it raises, and the next call asks again
            pending.clear()
        return call(*args, **kwargs)

    return first


class BoundFunction:
    """One C function bound through its plan; ``call`` is its generated wrapper."""

    def __init__(
        self,
        ffi: Any,
        cfunc: Callable[..., Any],
        decl: CFunction,
        contract: Contract,
        *,
        pointers_as_int: bool = False,
        default_returns: str = "value",
        error_message: Callable[[], str] | None = None,
        name: str | None = None,
        resolve: Callable[[str], Any] | None = None,
        native: bool = False,
        trampoline: int | None = None,
        keepalive: Any = None,
        destructor: bool = False,
        address: int | None = None,
        structs: Mapping[str, Any] | None = None,
        struct_contracts: Mapping[str, Any] | None = None,
    ) -> None:
        self.ffi = ffi
        self.cfunc = cfunc
        self.decl = decl
        self.contract = contract
        self.error_message = error_message
        self.resolve = resolve
        self.native = native
        #: the address of the function's trampoline (see tensorffi._shims), if its module has one
        self.trampoline = trampoline
        self.keepalive = keepalive  # what keeps the trampoline's code loaded
        #: the function's address, where no trampoline was compiled (from_ctypes): the native
        #: path may call it directly (tensorffi._bridge.lower.generic_call)
        self.address = address
        self.plan = build_plan(
            ffi, decl, contract, name=name, default_returns=default_returns, pointers_as_int=pointers_as_int,
            destructor=destructor, structs=structs, struct_contracts=struct_contracts,
        )
        self._message_fn = self.library_function(self.plan.status_message, "return: status(...)")
        self.name = self.plan.name
        self.pointers_as_int = pointers_as_int
        #: the Python path: the whole call where the native one cannot run, and every
        #: call the native one does not accept as it is (it explains or copies)
        self.python_call = _Gen(self, "call").generate_call()
        native_call, self.native_reason = _lower.lower(self, self.python_call)
        self.call = native_call if native_call is not None else self.python_call
        unchecked = [p for p in self.plan.params if p.unchecked] if not native else []
        fields = [] if native else [f for p in self.plan.params if p.fields is not None for f in p.fields.unchecked]
        if unchecked or fields:  # said once, at the first call, pointing at the caller's line
            warn = _unchecked_warning(self.plan, unchecked, fields)
            if native_call is not None:
                native_call._first_call(warn)
            else:
                self.call = _first_call(self.python_call, warn)
        signature = python_signature(self.plan)  # as a stub (.pyi) would write it
        for fn in {id(self.call): self.call, id(self.python_call): self.python_call}.values():
            fn.__qualname__ = fn.__name__ = self.name
            fn.__doc__ = self.doc()
            fn.__wrapped_bridge__ = self  # type: ignore[union-attr]
            fn.__signature__ = signature  # type: ignore[union-attr]
        if native_call is not None:
            native_call.__python_path__ = self.python_call

    @property
    def params(self) -> list[Param]:
        return self.plan.params

    @property
    def returns(self) -> str:
        return self.plan.returns

    @property
    def safe_name(self) -> str:
        return "_tf_" + "".join(ch if ch.isalnum() else "_" for ch in self.name)

    def doc(self) -> str:
        lines = [f"Bound C function: {self.decl.text};", f"Python: {self.plan.signature_text()}"]
        if self.contract.source:
            lines.append(f"contract: {self.contract.source}")
        lines.append(f"returns: {self.plan.returns}")
        return "\n".join(lines)

    def string(self, result: Any) -> str | None:
        return None if result == self.ffi.NULL else self.ffi.string(result).decode("utf-8", "replace")

    def library_function(self, name: str | None, clause: str) -> Any:
        """A function of the same library named by the contract (a destructor, a message)."""
        if name is None:
            return None
        fn = None
        if self.resolve is not None:
            try:
                fn = self.resolve(name)
            except (AttributeError, KeyError):
                fn = None
        if fn is None:
            raise ContractError(f"{self.name}: '{clause}' names {name!r}, which the library does not declare")
        return fn

    def message_for(self, code: int) -> str:
        if self._message_fn is not None:
            text = self._message_fn(int(code))
            return "" if text == self.ffi.NULL else self.ffi.string(text).decode("utf-8", "replace")
        return self.error_message() if self.error_message is not None else ""

    def raise_status(self, code: int) -> None:
        message = self.message_for(code)
        raise error_for_status(int(code), self.name, message or f"{self.name}() returned status {code}",
                               native=self.native)

    def status_out_checker(self, p: Param) -> Callable[[int, Any], None]:
        """``check(code, result)`` for error out-parameter ``p`` (``error: out status(MSGFN)``):
        raises the library's error for a non-zero ``code``, destroying the handle
        ``result`` first if C returned one anyway."""
        msgfn = self.library_function(p.message, f"{p.name}: out status({p.message})")
        destroy = (self.library_function(self.plan.returns_handle, f"handle({self.plan.returns_handle})")
                   if self.plan.returns == "handle" else None)
        ffi, fname, native = self.ffi, self.name, self.native

        def check(code: int, result: Any) -> None:
            code = int(code)
            if destroy is not None and result is not None and result != ffi.NULL:
                destroy(result)  # C reported an error: what it returned is not the caller's to use
            if msgfn is not None:
                text = msgfn(code)
                message = "" if text == ffi.NULL else ffi.string(text).decode("utf-8", "replace")
            else:
                message = self.message_for(code)
            what = "returned no handle" if destroy is not None and (result is None or result == ffi.NULL) else "failed"
            raise error_for_status(code, fname, f"{fname}() {what}: error {code} in '{p.name}'"
                                   + (f": {message}" if message else ""), native=native)

        return check

    def handle_maker(self, ptr_type: str, destroy_name: str) -> Callable[[Any], Handle]:
        """A function turning the C pointer of type ``ptr_type`` into a Handle."""
        destroy = self.library_function(destroy_name, f"handle({destroy_name})")
        ffi, fname = self.ffi, self.name
        ctype = _typeof(ffi, ptr_type)
        label = ptr_type.replace("*", "").replace("struct ", "").strip() or "handle"

        def check(result: Any) -> None:
            if isinstance(result, int) and result != 0:
                raise error_for_status(result, destroy_name, self.message_for(result)
                                       or f"{destroy_name}() returned status {result}", native=self.native)

        def make(ptr: Any) -> Handle:
            if ptr == ffi.NULL:
                raise NativeError(f"{fname}() returned no handle (NULL)", 0, fname)
            return Handle(ptr, ctype if ctype is not None else ffi.typeof(ptr), destroy, name=label,
                          check_status=check)

        return make

    def callback_factory(self, p: Param) -> Callable[[Any, Callable[[BaseException], None]], Any]:
        """``factory(python_callable, error_sink) -> cffi callback`` for parameter ``p``."""
        return _callback_factory(self.ffi, p, self.name)

    def kernel(
        self, hidden: Mapping[str, Callable[[], Any]] | None = None, grad_guard: Callable[..., None] | None = None
    ) -> Callable[..., Any]:
        """The body of an operator (see :func:`tensor_kernel`)."""
        fn = _Gen(self, "kernel", hidden, grad_guard).generate_kernel()
        native_fn, _ = _lower.lower_kernel(self, fn, dict(hidden or {}), grad_guard)
        fn.__qualname__ = fn.__name__ = self.name
        if native_fn is None:
            return fn
        native_fn.__qualname__ = native_fn.__name__ = self.name
        native_fn.__python_path__ = fn  # what it hands the calls it does not accept as they are
        out: Callable[..., Any] = native_fn
        return out

    def shape_rule(self, hidden: Mapping[str, Callable[[], Any]] | None = None) -> Callable[..., Any]:
        """The operator's shape rule (see :func:`shape_rule`)."""
        fn = _Gen(self, "shape", hidden).generate_shape_rule()
        fn.__qualname__ = fn.__name__ = self.name + "_shape"
        return fn


def bind_function(
    ffi: Any,
    cfunc: Callable[..., Any],
    decl: CFunction,
    contract: Contract,
    **options: Any,
) -> Callable[..., Any]:
    """Bind one C function through the bridge; returns the checked Python callable."""
    return BoundFunction(ffi, cfunc, decl, contract, **options).call


def tensor_signature(bound: BoundFunction, hidden: Any = ()) -> tuple[list[OpArg], list[OpOutput]]:
    """The arguments and results of ``bound`` as an operator (see :func:`tensorffi.plan.operator_signature`)."""
    return operator_signature(bound.plan, hidden)


def tensor_kernel(
    bound: BoundFunction,
    hidden: Mapping[str, Callable[[], Any]] | None = None,
    *,
    grad_guard: Callable[..., None] | None = None,
) -> Callable[..., Any]:
    """A function that calls ``bound`` on CPU tensors in :func:`tensor_signature` order.

    It is the body of an operator (tensorffi.ops), generated from the same plan as
    the direct call: the dispatcher guarantees CPU tensors, so it checks dtype,
    layout, storage and the contract's sizes, allocates the ``out`` tensors and calls
    C. Unlike a bound function, it writes tensors that require grad: the operator
    layer decides (autograd cannot see C, so it refuses such writes while grad mode
    is on). ``hidden`` maps parameters left out of the signature to functions
    returning their value at each call. ``grad_guard(*tensor_args)``, if given, is
    called first whenever grad mode is on and a tensor argument requires grad.
    """
    return bound.kernel(hidden, grad_guard)


def shape_rule(bound: BoundFunction, hidden: Mapping[str, Callable[[], Any]] | None = None) -> Callable[..., Any]:
    """The shape rule (fake/meta kernel) of :func:`tensor_kernel`, from the same plan."""
    return bound.shape_rule(hidden)


__all__ = [
    "bind_function", "BoundFunction", "tensor_signature", "tensor_kernel", "shape_rule", "Struct", "strided",
    "prepare_array", "TORCH_DTYPES", "NUMPY_DTYPES", "NativeError", "ContractError",
]



def __dir__() -> list[str]:
    return sorted(__all__)  # the API only: tab completion does not offer imports (np, torch, ...)
