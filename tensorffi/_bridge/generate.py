# SPDX-License-Identifier: MIT
"""The Python call path, generated from the plan: the direct call, an operator's body
and its shape rule (see :class:`_Gen`).

Where the native call path (csrc/bridge_call.c, lowered by :mod:`.lower`) runs a
function, the generated call is what it hands every argument it does not take as it
is: the generated code explains the refusal or makes the copy the contract allows. It
is the whole call for what the native path does not cover (strings, structs, handles,
callbacks, arrays C keeps, pointer results) and where PyTorch has no DLPack exchange
API. The shape rule (fake and meta tensors, symbolic sizes) is always this code.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy as np

from .. import _codegen
from .._torch import T
from ..contract import Dim
from ..errors import (
    AllocationError,
    ArgumentOverflowError,
    ArgumentTypeError,
    DTypeError,
    HandleClosedError,
    LayoutError,
    ShapeError,
    TensorFFIError,
)
from ..handles import Handle, Kept, LateSink, kept_block
from ..contract import eval_dim
from ..plan import OpArg, Param, Plan, operator_signature, pyname
from . import lower as _lower
from .callbacks import _release_finder
from .arrays import (
    _FLT_MAX,
    _FLT_NORMAL,
    ITEMSIZE,
    NUMPY_DTYPES,
    TORCH_DTYPES,
    _ndarray,
    _numpy_address,
    prepare_array,
    strided,
)
from .scalars import _MAX_SIZE, _checked_float, _checked_int, _named_size, _size_value
from .structs import _string_arg, _struct_arg, _typeof, field_checker

if TYPE_CHECKING:
    from ..bridge import BoundFunction

# --------------------------------------------------------------------------- #
# Helpers the generated code calls (errors are built here, raised there)       #
# --------------------------------------------------------------------------- #


def _bump(tensors: tuple[Any, ...]) -> None:
    """Bump the autograd version counter of tensors C wrote (torch is loaded: they exist)."""
    T._C._increment_version(tensors)


def _bumps(*tensors: Any) -> None:
    """Bump the autograd version counter of the tensors C wrote (None entries skipped)."""
    ts = tuple(t for t in tensors if t is not None)
    if ts:
        T._C._increment_version(ts)


def _closer(want: Any, where: str, fname: str) -> Callable[[Handle], None]:
    """A handle's destructor called on the handle: closes it (C's destructor runs once,
    after the calls using it return); a closed handle is a HandleClosedError."""

    def close(h: Handle) -> None:
        st = h._state
        if want is not None and st.ctype is not want:
            raise ArgumentTypeError(f"{where} expects a handle of type {want.cname}, got {h!r}")
        if st.closed:
            raise HandleClosedError(f"{where}: the handle {st.name} is already closed ({fname} ran on it)")
        h.close()

    return close


def _sym_check(ok: Any, make: Callable[[], Exception]) -> None:
    """A shape-rule check: ``ok`` is a bool or a SymBool (dynamic shapes)."""
    if ok is True:
        return
    if isinstance(ok, bool):
        raise make()
    T._check_with(ShapeError, ok, lambda: str(make()))


def _numel(v: Any) -> int:
    if isinstance(v, strided):
        v = v.obj
    if isinstance(v, T.Tensor):
        return int(v.numel())
    if isinstance(v, _ndarray):
        return int(v.size)
    return len(v)


def _overlap(ranges: Sequence[tuple[str, int, int, bool]], fname: str) -> LayoutError | None:
    """Written arguments that overlap each other or an input: (name, address, nbytes, written)."""
    spans = sorted((a, a + n, name, w) for name, a, n, w in ranges if n > 0 and a)
    for i in range(len(spans)):
        a0, e0, n0, w0 = spans[i]
        for j in range(i + 1, len(spans)):
            a1, e1, n1, w1 = spans[j]
            if a1 >= e0:
                break
            if w0 or w1:
                what = "both are written" if w0 and w1 else f"'{n0 if w0 else n1}' is written while C reads the other"
                return LayoutError(
                    f"{fname}(): arguments '{n0}' and '{n1}' share memory ({what}): C would read or write "
                    f"through one what it changes through the other. Pass separate arrays (e.g. x.clone())"
                )
    return None


def _shape_text(d: Dim) -> str:
    return str(d)


def _dim_value(info: tuple[Any, tuple[str, ...], str, str], values: tuple[Any, ...]) -> Any:
    """A dimension given as an expression (``n/2 + 1``), computed by the plan's rule
    (:func:`tensorffi.contract.eval_dim`); a part that goes below 0, divides by 0 or
    overflows is a ShapeError naming the argument. ``info``: (tree, symbols, where, text)."""
    tree, names, where, text = info
    env = dict(zip(names, values))
    try:
        return eval_dim(tree, env)
    except ValueError as exc:
        given = ", ".join(f"{k} = {v}" for k, v in env.items())
        raise ShapeError(f"{where}: size {text} with {given}: {exc}") from None


# --------------------------------------------------------------------------- #
# The code generator                                                           #
# --------------------------------------------------------------------------- #


class _Emitter:
    """The generator's state and emission helpers: lines, constants, symbols bound so far,
    the shapes of array arguments (see :class:`_Gen` for what is generated)."""

    def __init__(
        self,
        bound: "BoundFunction",
        mode: str,
        hidden: Mapping[str, Callable[[], Any]] | None = None,
        grad_guard: Callable[..., None] | None = None,
    ) -> None:
        self.b = bound
        self.plan = bound.plan
        self.mode = mode
        self.hidden = dict(hidden or {})
        self.grad_guard = grad_guard
        self.ns: dict[str, Any] = {
            "_torch": T,  # torch's functions and dtypes: generated code names them _torch.empty, _torch.float32
            "_ND": _ndarray,
            "_TFE": TensorFFIError,
            "_bump": _bump,
            "_bumps": _bumps,
            "_ShapeError": ShapeError,
            "_Overflow": ArgumentOverflowError,
            "_ArgType": ArgumentTypeError,
            "_DType": DTypeError,
            "_chk": _sym_check,
            "_numel": _numel,
            # builtins under names no C parameter can take (a parameter may be named len)
            "_len": len, "_type": type, "_tuple": tuple, "_int": int, "_float": float,
        }
        self.lines: list[str] = []
        self.level = 1
        self.known: dict[str, str] = {}  # symbols bound for sure -> where they came from
        self.maybe: set[str] = set()  # symbols that may still be None at run time
        self.fname = self.plan.name
        #: parameters that may receive a Handle: opaque struct pointers and bare void *
        self.handle_capable = mode == "call" and any(
            p.kind == "struct" or (p.kind == "array" and p.dtype == "any" and p.shape is None) for p in self.plan.params
        )
        self.post: list[str] = []  # lines to run after a successful C call
        self.post_failure: list[str] = []  # lines to run when C returned an error status
        self.pre_call: list[str] = []  # lines to run just before the C call
        self.keep_return: list[str] = []  # lines holding kept arrays on the returned handle (_hr)
        self._n = 0

    def const(self, value: Any, hint: str = "c") -> str:
        self._n += 1
        name = f"_{hint}{self._n}"
        self.ns[name] = value
        return name

    def emit(self, line: str) -> None:
        self.lines.append("    " * self.level + line)

    def indent(self) -> None:
        self.level += 1

    def dedent(self) -> None:
        self.level -= 1

    def fail_unless(self, ok: str, exc: str) -> None:
        """Raise ``exc`` (an expression building the exception) unless ``ok``."""
        if self.mode == "shape":
            self.emit(f"_chk({ok}, lambda: {exc})")
        else:
            self.emit(f"if not ({ok}): raise {exc}")

    def where(self, p: Param) -> str:
        return f"{self.fname}(): argument '{p.name}'"

    @staticmethod
    def lit(text: str) -> str:
        """``text`` as literal text inside a generated f-string."""
        return text.replace("\\", "\\\\").replace("{", "{{").replace("}", "}}").replace('"', '\\"')

    def z(self, sym: str) -> str:
        return f"_z_{sym}"

    def dim_expr(self, d: Dim, who: str = "") -> str:
        if d.expr is not None:
            values = "(" + "".join(f"{self.z(s)}, " for s in d.symbols) + ")"
            info = self.const((d.expr, d.symbols, who or f"{self.fname}()", str(d)), "dexp")
            return f"{self.const(_dim_value, 'dimv')}({info}, {values})"
        parts = [self.z(s) for s in d.symbols] + ([str(d.factor)] if d.factor != 1 or not d.symbols else [])
        return " * ".join(parts)

    def header(self, params: list[str]) -> None:
        self.lines.insert(0, f"def {self.b.safe_name}({', '.join(params)}):")

    def finish(self, label: str) -> Callable[..., Any]:
        src = "\n".join(self.lines) + "\n"
        return _codegen.build(src, self.ns, function=self.b.safe_name, label=f"{label}: {self.fname}")

    def init_symbols(self) -> None:
        """Symbols not fixed by a required input start unknown (None)."""
        rest = sorted(self.plan.contract.symbols - self.plan.input_bound)
        if rest:
            self.emit(" = ".join(self.z(s) for s in rest) + " = None")
            self.maybe.update(rest)

    def bind_shape(self, p: Param, svar: str, conditional: bool) -> list[tuple[int, Dim]]:
        """Emit the rank check and the bind-or-check of every single-symbol dimension of
        ``p`` (shape in ``svar``); returns the product dimensions, checked later.
        ``conditional``: inside a branch that may not run (an optional array, an out
        array the caller may pass), so symbols first seen here may stay unbound."""
        assert p.shape is not None
        W = self.lit(self.where(p))
        dims = ", ".join(str(d) for d in p.shape)
        n = len(p.shape)
        self.fail_unless(
            f"_len({svar}) == {n}",
            f'_ShapeError(f"{W} must have {n} dimension(s) [{dims}], got shape {{_tuple({svar})}}")',
        )
        deferred: list[tuple[int, Dim]] = []
        for ax, d in enumerate(p.shape):
            size = f"{svar}[{ax}]"
            if not d.symbols:
                self.fail_unless(
                    f"{size} == {d.factor}",
                    f'_ShapeError(f"{W}: dimension {ax} must be {d.factor}, got {{{size}}} (shape {{_tuple({svar})}})")',
                )
                continue
            if len(d.symbols) > 1 or d.expr is not None:
                deferred.append((ax, d))  # products and expressions are checked once all sizes are known
                continue
            sym = d.symbols[0]
            z = self.z(sym)
            k = d.factor
            if sym in self.known:
                want = f"{sym} = {{{z}}}" if k == 1 else f"{d} = {{{z} * {k}}}"
                self.fail_unless(
                    f"{size} == {self.dim_expr(d)}",
                    f'_ShapeError(f"{W}: dimension {ax} ({d}) is {{{size}}}, but {want} from '
                    f'{self.lit(self.known[sym])} (shape {{_tuple({svar})}})")',
                )
                continue
            bind = [] if k == 1 else [
                (f"{size} % {k} == 0",
                 f'_ShapeError(f"{W}: dimension {ax} ({d}) must be a multiple of {k}, got {{{size}}}")')
            ]
            value = size if k == 1 else f"{size} // {k}"
            if conditional or sym in self.maybe:
                self.emit(f"if {z} is None:")
                self.indent()
                for ok, exc in bind:
                    self.fail_unless(ok, exc)
                self.emit(f"{z} = {value}")
                self.dedent()
                self.emit("else:")
                self.indent()
                self.fail_unless(
                    f"{size} == {self.dim_expr(d)}",
                    f'_ShapeError(f"{W}: dimension {ax} ({d}) is {{{size}}}, but {d} = {{{self.dim_expr(d)}}} '
                    f'from the other arguments (shape {{_tuple({svar})}})")',
                )
                self.dedent()
                self.maybe.add(sym)
            else:
                for ok, exc in bind:
                    self.fail_unless(ok, exc)
                self.emit(f"{z} = {value}")
                self.known[sym] = f"argument '{p.name}'"
        return deferred

    def need(self, sym: str, who: str) -> None:
        """Emit a check that ``sym`` is bound (for sizes that may be missing)."""
        if sym in self.known:
            return
        self.fail_unless(
            f"{self.z(sym)} is not None",
            f'_ShapeError("{self.lit(self.fname)}(): size \'{sym}\' of {self.lit(who)} is unknown: pass {pyname(sym)}=...")',
        )

    def check_products(self, p: Param, svar: str, deferred: list[tuple[int, Dim]]) -> None:
        W = self.lit(self.where(p))
        for ax, d in deferred:
            for s in d.symbols:
                self.need(s, f"argument '{p.name}'")
            self.emit(f"_dx = {self.dim_expr(d, self.where(p))}")
            self.fail_unless(
                f"{svar}[{ax}] == _dx",
                f'_ShapeError(f"{W}: dimension {ax} ({self.lit(str(d))}) must be {{_dx}}, got {{{svar}[{ax}]}}'
                f'{" bytes" if p.dtype == "any" else ""}")',
            )

    def bind_shapes(self, arrays: list[Param], optional: bool) -> list[tuple[Param, list[tuple[int, Dim]], bool]]:
        """Bind the shape symbols of the given arrays with a shape, required ones or
        (``optional``) the ones that may be None, guarded; (array, deferred products,
        conditional) for each."""
        products: list[tuple[Param, list[tuple[int, Dim]], bool]] = []
        for p in arrays:
            if p.shape is None or p.optional != optional:
                continue
            if optional:
                self.emit(f"if {p.pyname} is not None:")
                self.indent()
            products.append((p, self.bind_shape(p, f"_s{p.index}", optional), optional))
            if optional:
                self.dedent()
        return products


class _Arguments(_Emitter):
    """Each argument's lines: arrays (read as they are, prepared, absent), fills,
    caller-given sizes, scalars, strings, structs and callbacks."""

    def fill_value(self, p: Param, array_var: dict[str, str]) -> str:
        """An expression for the value of fill parameter ``p``."""
        f = p.fill
        assert f is not None
        if f.dim is not None:
            for s in f.dim.symbols:
                self.need(s, f"'{p.name} = {f.dim}'")
            return self.dim_expr(f.dim)
        src = self.plan.by_name[f.numel_of]  # type: ignore[index]
        if src.role == "out":
            dims = []
            for d in src.shape or ():
                for s in d.symbols:
                    self.need(s, f"'{p.name} = numel({src.name})'")
                dims.append(f"({self.dim_expr(d)})")
            return " * ".join(dims) or "1"
        return f"_numel({array_var[src.name]})"

    def preparer(self, p: Param, grad_writes_ok: bool = False) -> str:
        """A name in the namespace for the general preparation of array ``p``:
        value -> (address, what to hold, shape, written tensor or None, is NumPy, bytes)."""
        where, ctype, dtype = self.where(p), p.ctype, p.dtype or "any"
        written, may_copy = p.written, p.shape is not None and p.keep_until is None
        ffi = self.b.ffi

        def prep(v: Any) -> tuple[Any, ...]:
            if dtype == "any" and isinstance(v, ffi.CData):
                # An opaque handle (ffi.new_handle, a C-owned object): passed as is.
                return int(ffi.cast("intptr_t", v)), v, None, None, None, 0
            r = prepare_array(v, where=where, ctype=ctype, dtype=dtype, written=written, may_copy=may_copy,
                              grad_writes_ok=grad_writes_ok)
            return r.addr, (r.storage, r.owner), r.shape, r.written_tensor, r.kind == "numpy", r.nbytes

        return self.const(prep, "prep")

    def emit_arrays(self, params: list[Param]) -> None:
        """Prepare the given array parameters; an optional one may be None (absent)."""
        for p in params:
            if not p.optional:
                self.emit_array(p)
                continue
            self.emit(f"if {p.pyname} is None:")
            self.indent()
            self.emit_absent(p)
            self.dedent()
            self.emit("else:")
            self.indent()
            self.emit_array(p)
            self.dedent()

    def emit_array(self, p: Param) -> None:
        """Prepare array parameter ``p`` (named by its pyname) into _a/_k/_s/_w/_n/_b."""
        i, v = p.index, p.pyname
        if self.may_be_handle(p):
            self.emit(f"_h{i} = None")
            self.emit(f"if _type({v}) is {self.const(Handle, 'Handle')}:")
            self.indent()
            ffi = self.b.ffi
            addr = self.const(lambda h, W=self.where(p): int(ffi.cast("intptr_t", h._enter(W, None))), "haddr")
            self.emit(f"_a{i} = {addr}({v})")
            self.emit(f"_h{i} = {v}._state")
            self.emit(f"_u.append(_h{i})")
            self.emit(f"_k{i} = {v}")
            self.emit(f"_s{i} = _w{i} = _n{i} = None")
            self.emit(f"_b{i} = 0")
            self.dedent()
            self.emit("else:")
            self.indent()
            self.emit_array_value(p)
            self.dedent()
            return
        self.emit_array_value(p)

    def emit_array_value(self, p: Param) -> None:
        """An array argument: the native path's reading where it takes it as it is
        (csrc/bridge_call.c ``bridge_read``, or its Python mirror where C cannot read
        tensors), else the general preparation, which explains the refusal or makes the
        copy the contract allows. Either way, into _a (address), _k (what holds its memory for the call),
        _s (shape), _w (the tensor C writes), _n (NumPy?), _b (bytes)."""
        i, v = p.index, p.pyname
        # an operator's body may write tensors that require grad: the operator layer decided
        grad_writes_ok = self.mode == "kernel"
        prep = f"_a{i}, _k{i}, _s{i}, _w{i}, _n{i}, _b{i} = {self.preparer(p, grad_writes_ok)}({v})"
        read = _lower.reader()
        code = _lower.dtype_code(p.dtype or "any")
        self.emit(f"_r{i} = {self.const(read, 'read')}({v}, {code}, {p.written}, {grad_writes_ok})")
        self.emit(f"if _r{i} is not None:")
        self.indent()
        self.emit(f"_a{i}, _b{i}, _s{i}, _k{i}, _n{i} = _r{i}")
        if p.written:
            self.emit(f"_w{i} = None if _n{i} else {v}")
        self.dedent()
        self.emit("else:")
        self.emit(f"    {prep}")
        if p.dtype == "any" and p.shape is not None:
            # void *: its one dimension counts bytes, whatever the element type
            self.emit(f"_s{i} = (_b{i},)")

    def emit_absent(self, p: Param) -> None:
        i = p.index
        self.emit(f"_a{i} = _b{i} = 0")
        self.emit(f"_k{i} = _s{i} = _w{i} = _n{i} = None")
        if self.may_be_handle(p):
            self.emit(f"_h{i} = None")  # no handle: nothing to check or hold

    def emit_alloc_failure(self, p: Param, dims: list[str]) -> None:
        """The except clause of an output allocation: a typed error naming the argument."""
        self.emit("except (RuntimeError, MemoryError, ValueError, OverflowError) as _x:")
        shape = "(" + ", ".join(f"{{{d}}}" for d in dims) + ("," if len(dims) == 1 else "") + ")"
        self.emit(
            f'    raise {self.const(AllocationError, "alloc")}(f"{self.lit(self.where(p))}: cannot allocate the '
            f'output of shape {shape} ({p.dtype}): {{_x}}") from None'
        )


    def may_be_handle(self, p: Param) -> bool:
        """A bare ``void *`` of a call may carry an opaque tensorffi.Handle."""
        return self.handle_capable and p.dtype == "any" and p.shape is None

    def carg(self, p: Param) -> str:
        """The expression passed to C for array parameter ``p`` (an address in _a)."""
        if p.as_int:
            return f"_a{p.index}"
        return f"{self.const(self.b.ffi.cast, 'cast')}({self.const(p.ctype, 'ct')}, _a{p.index})"

    def emit_overlaps(self, arrays: list[Param]) -> None:
        """Refuse written arrays that share memory with another array argument."""
        if not any(p.written for p in arrays) or len(arrays) < 2:
            return
        fn = self.const(_overlap, "ovl")
        pairs = []
        for x in range(len(arrays)):
            for y in range(x + 1, len(arrays)):
                p, q = arrays[x], arrays[y]
                if p.written or q.written:
                    i, j = p.index, q.index
                    pairs.append(f"(_a{i} < _a{j} + _b{j} and _a{j} < _a{i} + _b{i} and _b{i} and _b{j})")
        ranges = ", ".join(f"('{p.name}', _a{p.index}, _b{p.index}, {p.written})" for p in arrays)
        self.emit(f"if {' or '.join(pairs)}:")
        self.indent()
        self.emit(f"_e = {fn}([r for r in ({ranges},) if _type(r[1]) is _int], {self.fname!r})")
        self.emit("if _e is not None: raise _e")
        self.dedent()

    def scalar_check(self, p: Param, v: str) -> None:
        """Emit the check/conversion of a caller-given scalar ``v`` in place."""
        W = self.where(p)
        if p.scalar in ("int", "bool") and p.int_range is not None:
            lo, hi = p.int_range
            chk = self.const(lambda x, W=W, ct=p.ctype, r=p.int_range: _checked_int(x, W, ct, r), "int")
            self.emit(f"if _type({v}) is not _int or not {lo} <= {v} <= {hi}: {v} = {chk}({v})")
        elif p.scalar == "float":
            chk = self.const(lambda x, W=W, ct=p.ctype, bits=p.float_bits: _checked_float(x, W, ct, bits), "flt")
            if p.float_bits == 32:
                self.emit(
                    f"if _type({v}) is not _float or not (-{_FLT_MAX!r} <= {v} <= {_FLT_MAX!r}) or "
                    f"(-{_FLT_NORMAL!r} < {v} < {_FLT_NORMAL!r} and {v} != 0.0): {v} = {chk}({v})"
                )
            else:
                self.emit(f"if _type({v}) is not _float: {v} = {chk}({v})")

    def emit_other(self, p: Param) -> str:
        """Strings, structs and raw pointers: emit their preparation, return the C argument."""
        v, i = p.pyname, p.index
        ffi = self.b.ffi
        where = self.where(p)
        if p.kind == "string":
            def string(value: Any, where: str = where, ct: str = p.ctype, optional: bool = p.optional) -> Any:
                return _string_arg(ffi, value, where, ct, optional)
            self.emit(f"_x{i} = {self.const(string, 'str')}({v})")
            return f"_x{i}[0]"
        if p.kind == "struct":
            want = _typeof(ffi, p.ctype)

            def struct(value: Any, used: list[Any], where: str = where, ct: str = p.ctype,
                       optional: bool = p.optional) -> Any:
                return _struct_arg(ffi, value, where, ct, optional, want, used)
            self.emit(f"_x{i} = {self.const(struct, 'st')}({v}, _u)")
            self.emit(f"_h{i} = _x{i}[3]")
            return f"_x{i}[0]"
        if p.kind == "status_out":
            target = p.ctype.replace("const ", "").rstrip()
            self.emit(f"_x{i} = {self.const(lambda t=target: ffi.new(t), 'slot')}()")
            check = self.const(self.b.status_out_checker(p), "sto")
            # first of what runs after the call: before a returned handle is made
            self.post.insert(0, f"if _x{i}[0]: {check}(_x{i}[0], {'_r' if self.plan.returns == 'handle' else 'None'})")
            if p.as_int:  # a compile() shim takes the pointer as an intptr_t
                return f"{self.const(lambda x: int(ffi.cast('intptr_t', x)), 'addr')}(_x{i})"
            return f"_x{i}"
        if p.kind == "handle_out":
            target = p.ctype.replace("const ", "").rstrip()
            self.emit(f"_x{i} = {self.const(lambda t=target: ffi.new(t), 'slot')}()")
            make = self.const(self.b.handle_maker(target[:-1].rstrip(), p.destroy), "mkh")  # type: ignore[arg-type]
            self.post.append(f"_ho{i} = {make}(_x{i}[0])")
            return f"_x{i}"
        if p.kind == "callback" and p.release:
            # an unregister call: the C function made for this callable at registration;
            # its registration ends once C returned success
            find = self.const(_release_finder(ffi, p, self.fname), "cbrel")
            self.emit(f"_x{i}, _kt{i}, _ks{i} = {find}({v}, _u)")
            self.post.append(f"if _ks{i} is not None: _ks{i}.retire(_kt{i})")
            return f"_x{i}"
        if p.kind == "callback":
            factory = self.const(self.b.callback_factory(p), "cbf")
            spec = p.callback
            assert spec is not None
            if p.held_by is not None:
                # kept until the handle this call gives back: exceptions wait in a sink
                # that the handle takes over once it exists, and that handle holds it
                self.emit(f"_sk{i} = {self.const(LateSink, 'Sink')}()")
                self.emit(f"_x{i} = {factory}({v}, _sk{i})")
                holder = "_hr" if p.held_by == "return" else f"_ho{self.plan.by_name[p.held_by].index}"
                self.keep_return.append(f"_sk{i}.bind({holder}._state)")
                self.keep_return.append(f"{holder}._state.hold(('callback', {v}), _x{i})")
                # C called it, and it raised, before the call returned: the handle is
                # destroyed and the exception raised by close()
                self.keep_return.append(f"if {holder}._state.errors: {holder}.close()")
            elif spec.until is not None:
                h = self.plan.by_name[spec.until]
                self.emit(f"if _h{h.index} is None: raise _ArgType(\"{self.lit(where)}: 'until {spec.until}' needs "
                          f"'{spec.until}' to be a tensorffi.Handle (the callback must live as long as it)\")")
                self.emit(f"_x{i} = {factory}({v}, _h{h.index}.store_error)")
                # every registration is held (C may keep a list of listeners), until the
                # handle is destroyed or an unregister call releases it; one C refused is dropped
                self.emit(f"_kt{i} = _h{h.index}.hold(('callback', {v}), _x{i})")
                if self.plan.returns in ("status", "count"):
                    self.post_failure.append(f"_h{h.index}.drop(_kt{i})")
            else:
                self.emit("_cberr = []")
                self.emit(f"_x{i} = {factory}({v}, _cberr.append)")
                self.post.append("if _cberr: raise _cberr[0]")
            return f"_x{i}.cdata"
        # raw: function pointers, T **, structs by value: cffi checks them
        return v

    def emit_fills(
        self, array_var: dict[str, str], given: Callable[[Param], str | None], defining: bool | None = None
    ) -> dict[str, str]:
        """Compute filled-in parameters (in dependency order); returns name -> expression
        of each filled parameter's value. ``given(p)``: the variable holding a value the
        caller passed for ``p`` (checked against the computed one), or None.
        ``defining``: only fills that define a size (True), only the others (False)."""
        values: dict[str, str] = {}
        for name in self.plan.fill_order:
            p = self.plan.by_name[name]
            if defining is not None and p.is_symbol != defining:
                continue
            f = p.fill
            assert f is not None
            expr = self.fill_value(p, array_var)
            src = f"numel({f.numel_of})" if f.numel_of else str(f.dim)
            if p.is_symbol:
                z = self.z(name)
                if name in self.known:
                    self.fail_unless(
                        f"{z} == {expr}",
                        f'_ShapeError(f"{self.lit(self.fname)}(): {name} = {{{z}}} from {self.lit(self.known[name])}, '
                        f'but the contract defines {name} = {self.lit(src)} = {{{expr}}}")',
                    )
                else:
                    self.emit(f"if {z} is None:")
                    self.indent()
                    self.emit(f"{z} = {expr}")
                    self.dedent()
                    self.emit("else:")
                    self.indent()
                    self.fail_unless(
                        f"{z} == {expr}",
                        f'_ShapeError(f"{self.lit(self.fname)}(): argument \'{name}\' is {{{z}}}, but the '
                        f'contract defines {name} = {self.lit(src)} = {{{expr}}}")',
                    )
                    self.dedent()
                    self.maybe.discard(name)
                    self.known[name] = f"'{f.clause or name}'"
                values[name] = z
            else:
                var = f"_f_{name}"
                self.emit(f"{var} = {expr}")
                g = given(p)
                if g is not None:
                    W = self.lit(self.where(p))
                    self.emit(f"if {g} is not None:")
                    self.indent()
                    sz = self.const(lambda x, W=self.where(p), ct=p.ctype, r=p.int_range: _size_value(x, W, ct, r), "size")
                    self.emit(f"{g} = {sz}({g})")
                    self.fail_unless(
                        f"{g} == {var}",
                        f'_ShapeError(f"{W} is {{{g}}}, but the array shapes give {self.lit(src)} = {{{var}}} '
                        f'(contract: {self.lit(repr(self.plan.contract.source))})")',
                    )
                    self.dedent()
                values[name] = var
        return values

    def size_param_check(self, p: Param, expr: str) -> None:
        """A size handed to an integer parameter must fit its C type (a product or an
        expression of sizes can exceed even int64's: ``m = n*2**62``)."""
        f = p.fill
        product = f is not None and f.dim is not None and (len(f.dim.symbols) > 1 or f.dim.factor != 1
                                                           or f.dim.expr is not None)
        if p.int_range is None or (p.int_range[1] >= _MAX_SIZE and not product):
            return
        lo, hi = p.int_range
        W = self.lit(self.where(p))
        self.fail_unless(
            f"{expr} <= {hi}",
            f'_Overflow(f"{W} ({self.lit(p.ctype)}) must be in [{lo}, {hi}], got {{{expr}}}: it does not fit '
            f'and would be truncated")',
        )

    def emit_caller_size(self, sym: str, var: str, checker: str, mismatch: str) -> None:
        """A size the caller may pass (``var`` may be None): convert it, then bind or check."""
        z = self.z(sym)
        self.emit(f"if {var} is not None:")
        self.indent()
        self.emit(f"{var} = {checker}({var})")
        if sym in self.known:
            self.fail_unless(f"{var} == {z}", mismatch)
        else:
            self.emit(f"if {z} is None:")
            self.indent()
            self.emit(f"{z} = {var}")
            self.dedent()
            self.emit(f"elif {var} != {z}:")
            self.indent()
            self.emit(f"raise {mismatch}")
            self.dedent()
            self.maybe.add(sym)
        self.dedent()


class _CallGen(_Arguments):
    """The direct call: arguments, outputs in the caller's kind, the C call and its
    result (the native path hands this function what it does not take as it is)."""

    def generate_call(self) -> Callable[..., Any]:
        plan = self.plan
        P = plan.params
        short = [p.pyname for p in plan.positional]
        kwonly = [p.pyname for p in plan.keyword_only] + [pyname(s) for s in plan.free_sizes]
        sig = list(short)
        if plan.has_full_form:
            sig.append("*_more")
        elif kwonly:
            sig.append("*")
        sig += [f"{k}=None" for k in kwonly]
        self.emit("__tracebackhide__ = True")
        if self.handle_capable:
            self.emit("_u = []  # handle states this call uses (exited in finally)")
        self.emit("try:")
        self.indent()
        for p in P:
            if p.closes:
                closer = self.const(_closer(_typeof(self.b.ffi, p.ctype) if p.kind == "struct" else None,
                                            self.where(p), self.fname), "close")
                self.emit(f"if _type({p.pyname}) is {self.const(Handle, 'Handle')}: return {closer}({p.pyname})")
        if plan.has_full_form:
            full = self.const(_full_form(plan, lambda: self.b.call), "full")
            tup = "(" + "".join(f"{s}, " for s in short) + ")"
            self.emit(f"if _more: return {full}({tup} + _more, {', '.join(f'{k}={k}' for k in kwonly)})")
        self.init_symbols()
        inputs = [p for p in P if p.kind == "array" and p.role != "out"]
        outs = [p for p in P if p.kind == "array" and p.role == "out"]
        array_var = {p.name: p.pyname for p in P if p.kind == "array"}

        self.emit_arrays(inputs)
        products = self.bind_shapes(inputs, optional=False) + self.bind_shapes(inputs, optional=True)
        for p in outs:
            self.emit(f"if {p.pyname} is not None:")
            self.indent()
            self.emit_array(p)
            products.append((p, self.bind_shape(p, f"_s{p.index}", True), True))
            self.dedent()
            self.emit("else:")
            self.indent()
            self.emit(f"_n{p.index} = _w{p.index} = None")
            self.dedent()

        # sizes the caller passes: integer parameters that are sizes, and free sizes
        for p in P:
            if p.kind == "scalar" and p.is_symbol:
                W = self.lit(self.where(p))
                chk = self.const(lambda x, W=self.where(p), ct=p.ctype, r=p.int_range: _size_value(x, W, ct, r), "size")
                origin = self.lit(self.known.get(p.name, "the other arguments"))
                self.emit_caller_size(
                    p.name, p.pyname, chk,
                    f'_ShapeError(f"{W} is {{{p.pyname}}}, but the array shapes give {p.name} = {{{self.z(p.name)}}} '
                    f'(from {origin}; contract: {self.lit(repr(plan.contract.source))})")',
                )
        # a length filled with one symbol (count = m) passed by the caller gives that symbol
        aliases = set()
        for p in P:
            f = p.fill
            if p.kind == "scalar" and not p.is_symbol and f is not None and f.dim is not None \
                    and len(f.dim.symbols) == 1 and f.dim.factor == 1:
                sym = f.dim.symbols[0]
                aliases.add(p.name)
                W = self.lit(self.where(p))
                chk = self.const(lambda x, W=self.where(p), ct=p.ctype, r=p.int_range: _size_value(x, W, ct, r), "size")
                origin = self.lit(self.known.get(sym, "the other arguments"))
                self.emit_caller_size(
                    sym, p.pyname, chk,
                    f'_ShapeError(f"{W} is {{{p.pyname}}}, but the array shapes give {sym} = {{{self.z(sym)}}} '
                    f'(from {origin}; contract: {self.lit(repr(plan.contract.source))})")',
                )
        for s in plan.free_sizes:
            v = pyname(s)
            chk = self.const(lambda x, f=self.fname, s=s: _named_size(x, f, s), "size")
            origin = self.lit(self.known.get(s, "the other arguments"))
            self.emit_caller_size(
                s, v, chk,
                f'_ShapeError(f"{self.lit(self.fname)}(): {v}={{{v}}} was passed, but {s} = {{{self.z(s)}}} from {origin}")',
            )

        given_fill = lambda p: None if p.name in aliases else p.pyname  # noqa: E731
        fills = self.emit_fills(array_var, given_fill, defining=True)
        for p, deferred, conditional in products:
            if not deferred:
                continue
            if conditional:
                self.emit(f"if {p.pyname} is not None:")
                self.indent()
            self.check_products(p, f"_s{p.index}", deferred)
            if conditional:
                self.dedent()

        if outs:
            chain = "False"
            for p in reversed([q for q in P if q.kind == "array"]):
                if p.role != "out" and not p.optional:
                    chain = f"_n{p.index}"
                else:
                    chain = f"(_n{p.index} if _n{p.index} is not None else {chain})"
            self.emit(f"_numpy = {chain}")
        for p in outs:
            i = p.index
            assert p.shape is not None and p.dtype is not None
            self.emit(f"if {p.pyname} is None:")
            self.indent()
            for d in p.shape:
                for s in d.symbols:
                    self.need(s, f"argument '{p.name}'")
            dims = [self.dim_expr(d, self.where(p)) for d in p.shape]
            tdt = f"_torch.{p.dtype}"
            empty = "_torch.empty"
            targs = ", ".join(dims) if dims else "()"
            self.emit("try:")
            self.indent()
            self.emit("if _numpy:")
            self.indent()
            ndt = self.const(NUMPY_DTYPES.get(p.dtype), "ndt")
            self.emit(f"{p.pyname} = {self.const(np.empty, 'npempty')}(({', '.join(dims)}{',' if len(dims) == 1 else ''}), {ndt})")
            self.emit(f"_a{i} = {self.const(_numpy_address, 'npaddr')}({p.pyname})")
            self.dedent()
            self.emit("else:")
            self.indent()
            self.emit(f"{p.pyname} = {empty}({targs}, dtype={tdt})")
            self.emit(f"_a{i} = {p.pyname}.data_ptr()")
            self.dedent()
            self.dedent()
            self.emit_alloc_failure(p, dims)
            self.emit(f"_b{i} = 0")
            self.dedent()

        fills.update(self.emit_fills(array_var, given_fill, defining=False))
        given = [p for p in P if p.kind == "array"]
        if len(given) > 1 and any(p.written for p in given):
            self.emit_overlaps(given)

        cargs = self.emit_scalars(fills)
        self.emit_min_lengths()
        self.emit_keeps()
        written = [f"_w{p.index}" for p in P if p.kind == "array" and p.written and p.keep_until is None]
        structs = [p for p in P if p.kind == "struct"]
        self.emit_c_call(cargs, written, structs)
        results = [p.pyname if p.kind == "array" else f"_ho{p.index}" for p in P
                   if (p.kind == "array" and p.role == "out") or p.kind == "handle_out"]
        self.emit_return(results)
        self.dedent()
        self.emit("except _TFE as _e:")
        self.emit("    raise _e.with_traceback(None)")
        if self.handle_capable:
            self.emit("finally:")
            self.emit("    for _st in _u: _st.exit()")
        self.header(sig)
        return self.finish("call")

    def emit_min_lengths(self) -> None:
        """Arrays whose length C takes from integer parameters (inferred from the names,
        ``float *data, int size``; a product for ``w, h``; bytes for ``nbytes``): they must
        hold at least that many elements (see ``tensorffi.plan._infer_lengths``)."""
        by = self.plan.by_name
        for p in self.plan.params:
            if p.kind != "array" or not p.min_len:
                continue
            qs = [by[n] for n in p.min_len]
            size = 1 if p.min_len_bytes else ITEMSIZE[p.dtype]  # type: ignore[index]
            unit = "bytes" if p.min_len_bytes else "elements"
            W = self.lit(self.where(p))
            have = f"_b{p.index} // {size}" if size != 1 else f"_b{p.index}"
            value = " * ".join(q.pyname for q in qs)
            cond = f"{value} <= {have}"
            if len(qs) > 1:  # a length that is not positive makes C access nothing
                cond = " or ".join([f"{q.pyname} <= 0" for q in qs] + [cond])
            if p.optional:
                cond = f"{p.pyname} is None or " + cond
            names = " * ".join(f"'{q.name}'" for q in qs)
            values = " * ".join(f"{{{q.pyname}}}" for q in qs)
            rule = " * ".join(q.name for q in qs)
            self.fail_unless(
                cond,
                f'_ShapeError(f"{W} holds {{{have}}} {unit}, but {names} is {values}: C would access '
                f'{values} of them (the rule \'{p.name} holds at least {rule} {unit}\' is inferred from the '
                f'names; give \'{p.name}: [dims]\' or \'{p.name}: unsized\' in the contract if it is wrong)")',
            )

    def emit_keeps(self) -> None:
        """Arrays C keeps after the call: held by their handle (from before the call, as
        C may start using them at once), in memory that cannot be resized or freed."""
        keeps = [p for p in self.plan.params if p.kind == "array" and p.keep_until is not None]
        for p in keeps:
            i = p.index
            block, kept = self.const(kept_block, "keep"), self.const(Kept, "Kept")
            W = self.lit(self.where(p))
            if p.keep_until == "return" and "return" not in self.plan.by_name:
                # kept until the handle this call returns: checked (and its block taken)
                # before the call, held by that Handle once C returned it
                self.emit(f'_kr{i} = {kept}({p.pyname}, {block}({p.pyname}, _a{i}, "{W}"), _a{i}, {p.written}, '
                          f'"{W}")')
                holder = "_hr" if p.held_by == "return" else f"_ho{self.plan.by_name[p.held_by].index}"  # type: ignore[index]
                self.keep_return.append(f"{holder}._state.hold(_a{i}, _kr{i})")
                continue
            h = self.plan.by_name[p.keep_until]  # type: ignore[index]
            self.emit(f"if _h{h.index} is None: raise _ArgType(\"{W}: C keeps it until "
                      f"'{h.name}' is closed, so '{h.name}' must be a tensorffi.Handle\")")
            # the buffer block itself is held (not only the tensor): torch may swap a
            # tensor's memory, and C must never write memory that was freed
            self.emit(f'_kt{i} = _h{h.index}.hold(_a{i}, {kept}({p.pyname}, {block}({p.pyname}, _a{i}, "{W}"), '
                      f'_a{i}, {p.written}, "{W}"))')
            if self.plan.returns in ("status", "count"):
                # C refused this registration: it keeps nothing of this call (an earlier
                # registration of the same buffer stays held)
                self.post_failure.append(f"_h{h.index}.drop(_kt{i})")
        for p in self.plan.params:
            if p.release and p.kind == "array":
                self.post.append(f"for _st in _u: _st.release(_a{p.index})")
            if p.acquire:
                self.pre_call.append(f'if _h{p.index} is not None: _h{p.index}.check_kept("{self.lit(self.where(p))}")')
                self.post.append(f"if _h{p.index} is not None: _bumps(*_h{p.index}.written_kept())")

    def emit_scalars(self, fills: dict[str, str]) -> list[str]:
        """Check scalar arguments; return the C argument expressions in order."""
        cargs = [""] * len(self.plan.params)
        order = sorted(self.plan.params, key=lambda q: 0 if q.kind == "struct" else 1)
        for p in order:
            cargs[p.index] = self.scalar_arg(p, fills)
        self.emit_struct_fields(cargs)
        return cargs

    def emit_struct_fields(self, cargs: list[str]) -> None:
        """The pointer fields of struct arguments against their rules (lengths from the
        struct's integer fields and the function's integer arguments), once every
        scalar is checked; a raw cffi struct pointer warns once that it cannot be."""
        by = self.plan.by_name
        for p in self.plan.params:
            sf = p.fields
            if p.kind != "struct" or sf is None or not sf.checks or p.name in self.hidden:
                continue
            chk = self.const(field_checker(self.b.ffi, sf, self.where(p)), "fld")
            args = "".join(f", {cargs[by[a].index]}" for a in sf.args)
            self.emit(f"{chk}({p.pyname}{args})")

    def scalar_arg(self, p: Param, fills: dict[str, str]) -> str:
        """Check scalar ``p`` (or prepare a string, struct, handle, callback): its C argument."""
        if p.name in self.hidden:
            h = self.const(self.hidden[p.name], "h")
            if not p.as_int:
                return f"{h}()"
            ffi = self.b.ffi  # a pointer through an intptr_t shim: cdata becomes its address
            conv = self.const(lambda v: int(ffi.cast("intptr_t", v)) if isinstance(v, ffi.CData) else v, "addr")
            return f"{conv}({h}())"
        if p.kind == "array":
            return self.carg(p)
        if p.kind != "scalar":
            return self.emit_other(p)
        if p.fill is not None:
            expr = fills[p.name]
            self.size_param_check(p, expr)
            return expr
        if p.is_symbol:
            self.need(p.name, f"argument '{p.name}'")
            self.size_param_check(p, self.z(p.name))
            return self.z(p.name)
        self.scalar_check(p, p.pyname)
        return p.pyname

    def emit_c_call(self, cargs: list[str], written: list[str], structs: list[Param]) -> None:
        c = self.const(self.b.cfunc, "cfn")
        raw = any(p.kind == "raw" and p.name not in self.hidden for p in self.plan.params)
        if raw:
            self.emit("try:")
            self.indent()
        for line in self.pre_call:
            self.emit(line)
        self.emit(f"_r = {c}({', '.join(cargs)})")
        if raw:
            self.dedent()
            self.emit("except (TypeError, OverflowError) as _x:")
            self.emit(f'    raise _ArgType(f"{self.lit(self.fname)}(): {{_x}}") from None')
        for p in structs:
            self.emit(f"if _x{p.index}[2]: _bumps(*_x{p.index}[2])")
        if len(written) == 1:
            self.emit(f"if {written[0]} is not None: _bump(({written[0]},))")
        elif written:
            self.emit(f"_bumps({', '.join(written)})")

    def emit_return(self, results: list[str]) -> None:
        plan = self.plan
        kernel = self.mode == "kernel"
        # exceptions its callbacks raised on this thread while C ran (C called them
        # synchronously): raised when the call returns, before C's error status (their cause)
        own = ["for _st in _u:", "    if _st.errors: _st.raise_own()"] if self.handle_capable else []
        if plan.returns in ("status", "count"):
            st = self.const(self.b.raise_status, "status")
            fail = "_r" if plan.returns == "status" else "_r < 0"
            if self.post_failure or own:
                self.emit(f"if {fail}:")
                self.indent()
                for line in self.post_failure + own:
                    self.emit(line)
                self.emit(f"{st}(_r)")
                self.dedent()
            else:
                self.emit(f"if {fail}: {st}(_r)")
        for line in self.post:
            self.emit(line)
        value: list[str] = []
        if plan.returns == "handle":
            make = self.const(self.b.handle_maker(plan.decl.result.text.replace("const ", ""),
                                                  plan.returns_handle), "mkh")  # type: ignore[arg-type]
            if self.keep_return:
                self.emit(f"_hr = {make}(_r)")
                value = ["_hr"]
            else:
                value = [f"{make}(_r)"]
        for line in self.keep_return:
            self.emit(line)
        for line in own:
            self.emit(line)
        if plan.returns == "count":
            value = ["_r"]
        if plan.returns == "value":
            if plan.result_is_string and not kernel:
                self.emit(f"_r = {self.const(self.b.string, 'string')}(_r)")
            if kernel:
                _, outs = operator_signature(plan, self.hidden)
                rdt = self.const(TORCH_DTYPES[outs[-1].dtype], "rdt")  # (an operator: torch is loaded)
                value = [f"{self.const(T.tensor, 'tensor')}(_r, dtype={rdt})"]
            else:
                value = ["_r"]
        if kernel:
            allr = results + value
        else:
            allr = value + results
        if not allr:
            self.emit("return None")
        elif len(allr) == 1:
            self.emit(f"return {allr[0]}")
        else:
            self.emit(f"return ({', '.join(allr)})")


class _Gen(_CallGen):
    """Generates one specialised function from a plan.

    ``mode``: ``"call"`` (the direct call: torch or NumPy arguments, outputs in the
    caller's kind), ``"kernel"`` (an operator's body: torch tensors in operator
    order, hidden parameters, outputs as tensors), ``"shape"`` (the operator's shape
    rule: the same binding steps on fake tensors and symbolic sizes, no C call).
    """

    def op_params(self, args: list[OpArg]) -> list[str]:
        """Operator-order parameters; the dispatcher drops trailing arguments equal to
        their defaults (None for optional tensors), so those take defaults here."""
        params = [a.name for a in args]
        for i in range(len(args) - 1, -1, -1):
            if not args[i].optional:
                break
            params[i] += "=None"
        return params

    def generate_kernel(self) -> Callable[..., Any]:
        """The body of an operator: CPU tensors in operator order (see operator_signature)."""
        plan = self.plan
        args, outs = operator_signature(plan, self.hidden)
        by_py = {p.pyname: p for p in plan.params}
        tensors = [a for a in args if a.kind == "tensor"]
        self.emit("__tracebackhide__ = True")
        if self.grad_guard is not None and tensors:
            guard = self.const(self.grad_guard, "guard")
            ge = self.const(T.is_grad_enabled, "ge")
            needs = " or ".join(
                f"({a.name} is not None and {a.name}.requires_grad)" if a.optional else f"{a.name}.requires_grad"
                for a in tensors
            )
            self.emit(f"if ({needs}) and {ge}(): {guard}({', '.join(a.name for a in tensors)})")
        self.emit("try:")
        self.indent()
        self.init_symbols()
        arrays = [by_py[a.name] for a in tensors]
        self.emit_arrays(arrays)
        fills = self.emit_sizes(arrays, args)
        empty = self.const(T.empty, "empty")
        results = []
        for o in outs:
            if o.name == "return":
                continue
            p = plan.by_name[o.name]
            for d in o.shape:
                for s in d.symbols:
                    self.need(s, f"argument '{p.name}'")
            dims = ", ".join(self.dim_expr(d, self.where(p)) for d in o.shape) or "()"
            self.emit("try:")
            self.emit(f"    _out{p.index} = {empty}({dims}, dtype={self.const(TORCH_DTYPES[o.dtype], 'dt')})")
            self.emit_alloc_failure(p, [self.dim_expr(d) for d in o.shape])
            self.emit(f"_a{p.index} = _out{p.index}.data_ptr()")
            results.append(f"_out{p.index}")
        fills.update(self.emit_fills({p.name: p.pyname for p in arrays}, lambda p: None, defining=False))
        if len(arrays) > 1 and any(p.written for p in arrays):
            self.emit_overlaps(arrays)
        cargs = self.emit_scalars(fills)
        written = [f"_w{p.index}" for p in arrays if p.written]
        self.emit_c_call(cargs, written, [])
        self.emit_return(results)
        self.dedent()
        self.emit("except _TFE as _e:")
        self.emit("    raise _e.with_traceback(None)")
        self.header(self.op_params(args))
        return self.finish("operator kernel")

    def emit_sizes(self, arrays: list[Param], args: list[OpArg]) -> Any:
        """Operator kernel and shape rule alike: bind the arrays' shapes (optional ones
        when given), the caller's size arguments and the fills that define sizes (they
        may shape an output), then check the products that had to wait for them.
        Returns what emit_fills returns."""
        products = self.bind_shapes(arrays, optional=False)
        self.emit_size_args(args)
        products += self.bind_shapes(arrays, optional=True)
        fills = self.emit_fills({p.name: p.pyname for p in arrays}, lambda p: None, defining=True)
        for p, deferred, conditional in products:
            if deferred:
                if conditional:
                    self.emit(f"if {p.pyname} is not None:")
                    self.indent()
                self.check_products(p, f"_s{p.index}", deferred)
                if conditional:
                    self.dedent()
        return fills

    def emit_size_args(self, args: list[OpArg]) -> None:
        """Operator size arguments (plain ints in a kernel, SymInts in a shape rule)."""
        for a in args:
            if a.kind != "size":
                continue
            p = self.plan.by_name.get(a.name)
            sym = p.name if p is not None else next(s for s in self.plan.free_sizes if pyname(s) == a.name)
            if self.mode == "shape":
                self.emit(f"{self.z(sym)} = {a.name}")
            else:
                self.fail_unless(
                    f"_type({a.name}) is _int and {a.name} >= 0",
                    f'_ShapeError(f"{self.lit(self.fname)}(): {a.name} must be a size (an integer >= 0), got {{{a.name}!r}}")',
                )
                self.emit(f"{self.z(sym)} = {a.name}")
            self.known[sym] = f"argument '{a.name}'"
            self.maybe.discard(sym)

    def generate_shape_rule(self) -> Callable[..., Any]:
        """The operator's shape rule: the kernel's binding steps on fake or meta tensors
        (sizes may be SymInts), returning empty outputs. It never reads data."""
        plan = self.plan
        args, outs = operator_signature(plan, self.hidden)
        by_py = {p.pyname: p for p in plan.params}
        self.emit("__tracebackhide__ = True")
        self.emit("try:")
        self.indent()
        self.init_symbols()
        self.emit("_dev = None")
        arrays = [by_py[a.name] for a in args if a.kind == "tensor"]
        for p in arrays:
            v = p.pyname
            if p.optional:
                self.emit(f"if {v} is not None:")
                self.indent()
            if p.dtype != "any":
                want = TORCH_DTYPES[p.dtype or "any"]
                self.emit(
                    f"if {v}.dtype is not {self.const(want, 'dt')}: raise _DType(f\"{self.lit(self.where(p))} "
                    f"({self.lit(p.ctype)}) expects dtype {want}, got {{{v}.dtype}}\")"
                )
            self.emit(f"_s{p.index} = {v}.shape")
            self.emit(f"if _dev is None: _dev = {v}.device")
            if p.optional:
                self.dedent()
        self.emit_sizes(arrays, args)
        empty = self.const(T.empty, "empty")
        cpu = self.const(T.device("cpu"), "cpu")
        results = []
        for o in outs:
            dt = self.const(TORCH_DTYPES[o.dtype], "dt")
            if o.name == "return":
                results.append(f"{empty}((), dtype={dt}, device=_dev or {cpu})")
                continue
            for d in o.shape:
                for s in d.symbols:
                    self.need(s, f"argument '{o.name}'")
            dims = ", ".join(self.dim_expr(d) for d in o.shape)
            results.append(f"{empty}(({dims}{',' if len(o.shape) == 1 else ''}), dtype={dt}, device=_dev or {cpu})")
        if not results:
            self.emit("return None")
        elif len(results) == 1:
            self.emit(f"return {results[0]}")
        else:
            self.emit(f"return ({', '.join(results)})")
        self.dedent()
        self.emit("except _TFE as _e:")
        self.emit("    raise _e.with_traceback(None)")
        self.header(self.op_params(args))
        return self.finish("shape rule")

def _full_form(plan: Plan, call: Callable[[], Callable[..., Any]]) -> Callable[..., Any]:
    """The C declaration's own calling form: every parameter positionally, in
    declaration order (``lib.process_data(t, t.numel())`` with a contract that fills
    ``size`` in): maps it to the short form, so adding a contract never breaks a
    caller. Lengths passed this way are checked like keyword ones."""
    allnames = [p.pyname for p in plan.params]
    short = [p.pyname for p in plan.positional]
    handles = [p.pyname for p in plan.params if p.kind in ("handle_out", "status_out")]
    name = plan.name

    def full(args: tuple[Any, ...], **kw: Any) -> Any:
        if len(args) != len(allnames):
            raise TypeError(
                f"{name}() takes {len(short)} positional argument(s) ({', '.join(short)}) or all "
                f"{len(allnames)} of the C declaration ({', '.join(allnames)}), got {len(args)}"
            )
        values = dict(zip(allnames, args))
        for h in handles:
            if values.pop(h) is not None:
                raise TypeError(f"{name}(): '{h}' receives a handle or an error code from C: pass None there "
                                f"(a handle is returned, an error raised)")
        for k, v in kw.items():
            if v is not None:
                if k in values and values[k] is not None:
                    raise TypeError(f"{name}() got multiple values for argument '{k}'")
                values[k] = v
        positional = [values.pop(n) for n in short]
        return call()(*positional, **values)

    return full


