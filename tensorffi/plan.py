# SPDX-License-Identifier: MIT
"""The contract plan: a C declaration and its contract, compiled once.

A :class:`Plan` says, for one bound C function, everything the bridge does on a
call: what each parameter is (an array with a role, dtype and symbolic shape; a
scalar with its C range; a length the bridge fills in; a string, a struct, a raw
pointer), where each size symbol comes from (input arrays, the caller, arrays the
caller passes for outputs, fill definitions), which sizes the caller must supply,
the output shapes, and what the C result means. It is validated when it is built,
so a contradictory, circular or unsatisfiable contract is a
:class:`~tensorffi.ContractError` naming the clause, at bind time, never a wrong
allocation at call time.

Everything that runs on a call is generated from the plan by
:mod:`tensorffi.bridge`: the direct call (NumPy and torch), the body of a PyTorch
operator, and the operator's shape rule (the same binding steps on symbolic sizes).
Nothing else interprets a contract.
"""
from __future__ import annotations

import inspect
import keyword
import re
from dataclasses import dataclass, field
from typing import Any

from ._decl import _SIZED, ELEMENT_DTYPES, CFunction, CParam
from .contract import ArraySpec, CallbackSpec, Contract, Dim, FieldContract, Fill
from .errors import ContractError

RETURNS = ("status", "count", "value", "none", "handle")
_INT_DTYPES = ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64")


def pyname(name: str) -> str:
    """A C name as a Python argument name (``in`` -> ``in_``; ``_r`` -> ``_r_``: names
    starting with ``_`` are the generated code's own)."""
    return name + "_" if keyword.iskeyword(name) or name == "self" or name.startswith("_") else name


@dataclass
class Param:
    """One C parameter, as the bridge treats it."""

    name: str
    pyname: str
    index: int
    kind: str  # "array" | "scalar" | "string" | "struct" | "handle_out" | "status_out" | "callback" | "raw"
    ctype: str  # C spelling ("const float *")
    dtype: str | None = None  # arrays: canonical element dtype ("any" for void *)
    role: str = "in"  # arrays: in | out | inout
    shape: tuple[Dim, ...] | None = None  # arrays: the contract's shape
    optional: bool = False  # None is passed as NULL
    scalar: str | None = None  # scalars: "int" | "float" | "bool" | None (other)
    int_range: tuple[int, int] | None = None
    float_bits: int = 64  # float scalars: 32 for C float
    fill: Fill | None = None  # integer scalars filled in by the bridge
    is_symbol: bool = False  # an integer parameter named like a shape symbol (it *is* that size)
    as_int: bool = False  # passed to C as an intptr_t (shim)
    clause: str = ""
    keep_until: str | None = None  # arrays C keeps after the call, while this handle parameter lives
    release: bool = False  # arrays, callbacks: a kept array or callback given back (the bridge stops holding it)
    acquire: bool = False  # handle parameters: C may have written the arrays this handle keeps
    destroy: str | None = None  # handle_out: the destructor's name
    message: str | None = None  # status_out: the library function giving a code's message
    closes: bool = False  # a handle parameter of a destructor: a Handle passed here is closed
    #: arrays: the integer parameter(s) C takes as its length, a product where two are
    #: named (``float *img, int w, int h``): an inferred lower bound (see _infer_lengths)
    min_len: tuple[str, ...] = ()
    unsized: bool = False  # arrays: 'NAME: unsized', the user's word that no length applies
    min_len_bytes: bool = False  # that length counts bytes (``float *buf, size_t nbytes``)
    callback: CallbackSpec | None = None  # callback: how its arguments become tensors
    held_by: str | None = None  # kept 'until return': "return" (the returned handle) or an out handle's name
    signature: CFunction | None = None  # callback: the function pointer's parameters and result
    fields: StructFields | None = None  # struct pointers: what its pointer fields hold, checked each call

    @property
    def unchecked(self) -> bool:
        """A typed array whose length the bridge cannot check: no shape in the contract,
        no length inferred from the names, not marked ``unsized`` (C may run past it).
        A bare ``void *`` is not counted: it is as often user data or a handle as a
        buffer (``describe()`` says its length is not checked)."""
        return (self.kind == "array" and self.shape is None and not self.min_len and not self.unsized
                and self.role != "out" and self.keep_until is None and not self.release and self.dtype != "any")

    @property
    def written(self) -> bool:
        return self.kind == "array" and self.role != "in"

    @property
    def caller_gives(self) -> bool:
        """Whether the caller passes this parameter in the short calling form (positionally)."""
        return not (self.fill is not None or self.is_symbol or self.role == "out" or self.optional
                    or self.kind in ("handle_out", "status_out"))


@dataclass
class FieldRule:
    """One pointer field of a struct argument, checked at every call that passes the
    struct (see :func:`struct_fields`)."""

    name: str
    ctype: str
    dtype: str
    shape: tuple[Dim, ...] | None = None  # the contract's shape
    optional: bool = False  # NULL allowed ('FIELD: ?'); else NULL only where C accesses nothing
    min_len: tuple[str, ...] = ()  # inferred: integer fields whose product the array holds at least
    min_len_bytes: bool = False
    unsized: bool = False
    clause: str = ""

    @property
    def unchecked(self) -> bool:
        return self.shape is None and not self.min_len and not self.unsized and self.dtype != "any"

    def text(self) -> str:
        """What is checked, for describe()."""
        if self.shape is not None:
            what = "[" + ", ".join(map(str, self.shape)) + "]"
        elif self.min_len:
            what = ("holds at least " + " * ".join(self.min_len) + (" bytes" if self.min_len_bytes else "")
                    + " (inferred from the field names)")
        elif self.unsized:
            what = "unsized"
        elif self.dtype == "any":
            what = "void *, length not checked"
        else:
            what = f"UNCHECKED: no length the bridge can check (give '{self.name}: [dims]' in the struct's contract)"
        return f"{self.name} {self.dtype} {what}" + ("; may be NULL" if self.optional else "")


@dataclass
class StructFields:
    """The checks of one struct type's pointer fields where a function takes it: the
    rules of its pointer fields, the integer fields their shapes use, the function's
    integer parameters they use (``args``, in this order at call time), and the
    struct-typed fields (by pointer or by value) checked with their own rules."""

    type_name: str
    rules: list[FieldRule]
    args: tuple[str, ...] = ()
    nested: dict[str, StructFields] = field(default_factory=dict)
    source: str = ""
    free: frozenset[str] = frozenset()  # sizes a plain dimension of some field fixes at each call

    @property
    def unchecked(self) -> list[str]:
        """``TYPE.FIELD`` of every pointer field no rule covers, nested ones included."""
        out = [f"{self.type_name}.{r.name}" for r in self.rules if r.unchecked]
        for n in self.nested.values():
            out += n.unchecked
        return out

    @property
    def checks(self) -> bool:
        return bool(self.rules) or any(n.checks for n in self.nested.values())

    def text(self) -> str:
        """What is checked of each field, for describe()."""
        parts = [r.text() for r in self.rules]
        parts += [f"{name}: ({inner.text()})" for name, inner in self.nested.items()]
        return "; ".join(parts)


@dataclass
class Plan:
    """The compiled contract of one C function (see the module docstring)."""

    name: str
    decl: CFunction
    contract: Contract
    params: list[Param]
    returns: str  # status | value | none
    result_is_string: bool
    #: symbols not carried by any parameter and not fixed by a required input array:
    #: keyword arguments of the bound function ("pass m=...").
    free_sizes: list[str]
    #: fill parameters in an order where each one's symbols are known before it
    fill_order: list[str]
    #: symbols fixed by required (non-optional) input arrays
    input_bound: set[str]
    pointers_as_int: bool = False
    returns_handle: str | None = None  # return: handle(DESTROY)
    status_message: str | None = None  # return: status(MSGFN)

    @property
    def by_name(self) -> dict[str, Param]:
        return {p.name: p for p in self.params}

    @property
    def positional(self) -> list[Param]:
        """Parameters of the short calling form, in declaration order."""
        return [p for p in self.params if p.caller_gives]

    @property
    def keyword_only(self) -> list[Param]:
        """Parameters the caller may pass by keyword (out handles are only returned)."""
        return [p for p in self.params if not p.caller_gives and p.kind not in ("handle_out", "status_out")]

    @property
    def has_full_form(self) -> bool:
        """Whether the C declaration's own calling form differs from the short one."""
        return len(self.positional) != len(self.params)

    @property
    def arrays(self) -> list[Param]:
        return [p for p in self.params if p.kind == "array"]

    def signature_text(self) -> str:
        """The bound function's Python signature, for docs and errors."""
        pos = [p.pyname + (" [unchecked]" if p.unchecked or (p.fields is not None and p.fields.unchecked) else "")
               for p in self.positional]
        kw = [f"{p.pyname}=None" for p in self.keyword_only] + [f"{pyname(s)}=None" for s in self.free_sizes]
        return f"{self.name}({', '.join(pos + (['*'] + kw if kw else []))})"

    def describe(self) -> list[tuple[str, str, str]]:
        """(name, C type, what the bridge does) per parameter, for reprs and docs."""
        rows = []
        for p in self.params:
            if p.kind == "array":
                shape = "" if p.shape is None else " [" + ", ".join(map(str, p.shape)) + "]"
                what = f"{p.role}{'?' if p.optional else ''} {p.dtype}{shape}"
                if p.dtype == "any" and p.shape is not None:
                    what += " bytes (void *: its length counts bytes, whatever the dtype)"
                if p.role == "out":
                    what += " (allocated and returned)"
                if p.held_by is not None and p.held_by != "return":
                    what += f", kept by C while the handle given through '{p.held_by}' lives (held by that handle)"
                elif p.keep_until == "return":
                    what += ", kept by C while the handle it returns lives (held by that handle)"
                elif p.keep_until:
                    what += f", kept by C while '{p.keep_until}' lives"
                if p.min_len:
                    what += (f", holds at least {min_len_text(p)} (inferred from the names; "
                             f"'{p.name}: [dims]' or '{p.name}: unsized' in the contract instead)")
                elif p.unchecked:
                    what += (f", UNCHECKED: no length the bridge can check (C may access past its end; "
                             f"give '{p.name}: [dims]' in the contract, or '{p.name}: unsized' if none applies)")
            elif p.kind == "handle_out":
                what = f"out handle (closed by {p.destroy})"
            elif p.kind == "status_out":
                what = "error out-parameter: a non-zero code C stores is raised" + (
                    f" (message from {p.message})" if p.message else "")
            elif p.kind == "callback" and p.release:
                what = ("a Python callable registered before: the bridge passes the C function it made for it and "
                        "releases that registration")
            elif p.kind == "callback":
                what = "a Python callable (may be called from C threads)"
                if p.held_by == "return":
                    what += ", kept while the handle it returns lives (held by that handle)"
                elif p.held_by:
                    what += f", kept while the handle given through '{p.held_by}' lives (held by that handle)"
                elif p.callback and p.callback.until:
                    what += f", kept while '{p.callback.until}' lives"
            elif p.fill is not None:
                src = f"numel({p.fill.numel_of})" if p.fill.numel_of else str(p.fill.dim)
                what = f"filled in: {p.name} = {src}"
            elif p.is_symbol:
                what = "filled in from the shapes"
            elif p.kind == "scalar":
                what = p.scalar or "value"
            elif p.kind == "string":
                what = "string (str or bytes)" + (", or None" if p.optional else "")
            elif p.kind == "struct":
                what = "struct (lib.struct(...))" + (", or None" if p.optional else "")
                if p.fields is not None and p.fields.checks:
                    what += "; its fields, checked at every call: " + p.fields.text()
            else:
                what = "passed to cffi as is"
            rows.append((p.name, p.ctype, what))
        for s in self.free_sizes:
            rows.append((s, "size", "keyword argument"))
        return rows


def _int_range(ffi: Any, ctype: str) -> tuple[int, int] | None:
    try:
        size = ffi.sizeof(ctype)
        signed = int(ffi.cast(ctype, -1)) < 0
    except Exception:
        return None
    if ctype in ("_Bool", "bool"):
        return (0, 1)
    return (-(1 << (8 * size - 1)), (1 << (8 * size - 1)) - 1) if signed else (0, (1 << (8 * size)) - 1)


def build_plan(
    ffi: Any,
    decl: CFunction,
    contract: Contract,
    *,
    name: str | None = None,
    default_returns: str = "value",
    pointers_as_int: bool = False,
    destructor: bool = False,
    structs: Any = None,
    struct_contracts: Any = None,
) -> Plan:
    """Compile ``decl`` and ``contract`` into a validated :class:`Plan`.

    ``structs``: the declared structs' fields by type name (``Declarations.structs``),
    and ``struct_contracts`` the library's contracts of struct types
    (:class:`~tensorffi.contract.FieldContract` by type name): a struct parameter's
    pointer fields are then checked at every call (:func:`struct_fields`).

    ``destructor``: the function is named in some ``handle(...)`` of its library, so
    its handle parameter closes a Handle passed to it (the destructor runs once)."""
    fname = name or decl.name
    if decl.variadic:
        raise ContractError(f"{fname}: variadic functions cannot be bound safely")

    def fail(msg: str, clause: str = "") -> ContractError:
        where = f" (contract clause {clause!r})" if clause else ""
        return ContractError(f"{fname}: {msg}{where}")

    names = {p.name for p in decl.params}
    for key in sorted(set(contract.handle_outs) | set(contract.callbacks) | contract.releases | contract.acquires
                      | contract.unsized | set(contract.status_outs)):
        if key not in names:
            raise fail(f"the contract names '{key}', which is not a parameter of {decl.text}")
    spec: ArraySpec | None
    fill: Fill | None
    for key, spec in contract.arrays.items():
        if key not in names:
            raise fail(f"the contract names '{key}', which is not a parameter of {decl.text}", spec.clause)
    for key, fill in contract.fills.items():
        if key not in names:
            raise fail(f"the contract names '{key}', which is not a parameter of {decl.text}", fill.clause)

    symbols = contract.symbols
    params: list[Param] = []
    for i, cp in enumerate(decl.params):
        ct = cp.type
        spec = contract.arrays.get(cp.name)
        fill = contract.fills.get(cp.name)
        p = Param(cp.name, pyname(cp.name), i, "raw", ct.text, as_int=pointers_as_int and ct.shimmable)
        if spec is not None:
            p.clause = spec.clause
        if ct.pointer_depth == 0 and not ct.is_struct and not ct.is_function_pointer:
            p.kind = "scalar"
            if spec is not None:
                raise fail(f"'{cp.name}' is a scalar ({ct.text}), not an array", spec.clause)
            if cp.name in contract.callbacks:
                raise fail(f"'{cp.name}' ({ct.text}) is not a function pointer", contract.callbacks[cp.name].clause)
            if ct.is_integer:
                p.scalar = "bool" if ct.resolved in ("_Bool", "bool") or ct.base == "bool" else "int"
                p.int_range = _int_range(ffi, ct.text.replace("const ", ""))
                p.is_symbol = cp.name in symbols
                p.fill = fill
                if fill is not None:
                    p.clause = fill.clause
            elif ct.is_float:
                p.scalar = "float"
                p.float_bits = 32 if ct.resolved == "float" else 64
                if fill is not None:
                    raise fail(f"'{cp.name}' = ... needs an integer parameter, not {ct.text}", fill.clause)
                if cp.name in symbols:
                    raise fail(f"'{cp.name}' is used as a size, but it is {ct.text}, not an integer")
            else:
                if fill is not None:
                    raise fail(f"'{cp.name}' = ... needs an integer parameter, not {ct.text}", fill.clause)
            params.append(p)
            continue
        if fill is not None:
            raise fail(f"'{cp.name}' = ... needs an integer parameter, not {ct.text}", fill.clause)
        if cp.name in symbols:
            raise fail(f"'{cp.name}' is used as a size, but it is {ct.text}, not an integer")
        if cp.name in contract.handle_outs:
            if ct.pointer_depth != 2 or ct.is_function_pointer:
                raise fail(f"'{cp.name}' ({ct.text}) cannot receive a handle: it must be a pointer to a pointer")
            p.kind, p.destroy, p.as_int = "handle_out", contract.handle_outs[cp.name], False
            params.append(p)
            continue
        if cp.name in contract.status_outs:
            if ct.pointer_depth != 1 or ct.const or ct.dtype not in _INT_DTYPES or ct.is_function_pointer:
                raise fail(f"'{cp.name}: out status' needs a pointer to an integer C writes (int *error), "
                           f"not {ct.text}")
            p.kind, p.message = "status_out", contract.status_outs[cp.name]  # (as_int: the shim takes intptr_t)
            params.append(p)
            continue
        if cp.name in contract.callbacks:
            if not ct.is_function_pointer or ct.signature is None:
                raise fail(f"'{cp.name}' ({ct.text}) is not a function pointer", contract.callbacks[cp.name].clause)
            p.kind, p.callback, p.signature, p.as_int = "callback", contract.callbacks[cp.name], ct.signature, False
            p.clause = p.callback.clause
            if cp.name in contract.releases:
                raise fail(f"'{cp.name}' is both registered and released by the same call", p.clause)
            _check_callback(fail, p)
            params.append(p)
            continue
        if cp.name in contract.releases and ct.is_function_pointer:
            # an unregister function: the bridge passes the C function it made for this
            # callable at registration, and gives that registration back
            p.kind, p.release, p.signature, p.as_int = "callback", True, ct.signature, False
            p.clause = f"{cp.name}: release"
            params.append(p)
            continue
        optional = spec is not None and spec.optional
        if ct.is_struct and ct.pointer_depth == 1:
            if spec is not None and (spec.shape is not None or spec.role is not None):
                raise fail(f"'{cp.name}' ({ct.text}) is a struct pointer, not an array", spec.clause)
            p.kind, p.optional = "struct", optional
        elif ct.pointer_depth == 1 and ct.dtype is not None and not ct.is_function_pointer:
            if ct.const and ct.resolved == "char" and (spec is None or spec.shape is None):
                if spec is not None and spec.role not in (None, "in"):
                    raise fail(f"'{cp.name}' is {ct.text}: C cannot write it", spec.clause)
                p.kind, p.optional = "string", optional
            else:
                p.kind = "array"
                p.dtype = ct.dtype
                role = spec.role if spec is not None and spec.role else ("in" if ct.const else "inout")
                if ct.const and role != "in":
                    raise fail(f"'{cp.name}' is {ct.text}: C cannot write it, so it cannot be {role}", p.clause)
                p.role = role
                p.optional = optional
                p.shape = spec.shape if spec is not None else None
                if spec is not None and spec.until is not None:
                    p.keep_until = spec.until
                    if optional:
                        raise fail(f"a kept array cannot be optional", p.clause)
                    if role == "out":
                        raise fail(f"a kept array is passed by the caller (a tensorffi.buffer), it cannot be out",
                                   p.clause)
                if ct.dtype == "any" and p.shape is not None and len(p.shape) != 1:
                    raise fail(f"'{cp.name}' is {ct.text}: its length counts bytes, so its shape has one "
                               f"dimension ('{cp.name}: [nbytes]'), not {len(p.shape)}", p.clause)
                if role == "out":
                    if ct.dtype == "any":
                        raise fail(f"out array '{cp.name}' is void *: its dtype is unknown", p.clause)
                    if p.shape is None:
                        raise fail(f"out array '{cp.name}' needs a shape to be allocated", p.clause)
                    if optional:
                        raise fail(f"out array '{cp.name}' cannot be optional: the bridge allocates it", p.clause)
        else:
            if spec is not None and (spec.shape is not None or spec.role is not None):
                raise fail(f"'{cp.name}' ({ct.text}) cannot be described as an array", spec.clause)
            p.optional = optional  # raw: function pointers, T **, structs by value: cffi checks them
        params.append(p)

    by_name = {p.name: p for p in params}

    # handles: what is kept until which handle, what is released and acquired
    def handle_param(name: str, clause: str) -> Param:
        h = by_name.get(name)
        if h is None:
            raise fail(f"'until {name}' names no parameter", clause)
        if not (h.kind == "struct" or (h.kind == "array" and h.dtype == "any" and h.shape is None)):
            raise fail(f"'until {name}': '{name}' ({h.ctype}) is not a handle (a pointer to an opaque type)", clause)
        return h

    holders = (["return"] if contract.returns_handle is not None else []) + [
        q.name for q in params if q.kind == "handle_out"]

    def return_holder(clause: str) -> str:
        """What 'until return' means: the returned handle, or the one out handle."""
        if not holders:
            raise fail("'until return' needs a function that returns a handle ('return: handle(DESTROY)') or "
                       "gives one through an out-parameter ('NAME: out handle(DESTROY)')", clause)
        if len(holders) > 1:
            names = ", ".join("the returned handle" if h == "return" else f"'{h}'" for h in holders)
            raise fail(f"'until return' is ambiguous: {fname} gives several handles ({names}); say which one "
                       f"keeps it with 'until NAME' on a call that takes that handle", clause)
        return holders[0]

    for p in params:
        if p.keep_until == "return" and "return" not in by_name:
            # kept until the handle this call returns: held by that Handle
            p.held_by = return_holder(p.clause)
        elif p.keep_until is not None:
            handle_param(p.keep_until, p.clause)
        if p.kind == "callback" and p.callback is not None and p.callback.until == "return":
            p.held_by = return_holder(p.clause)
        elif p.kind == "callback" and p.callback is not None and p.callback.until is None and len(holders) == 1:
            # a callback given to a call that gives back a handle (a constructor) is most
            # often kept by it: held by that handle, as 'until return' says. Held too
            # long costs memory; freed too early, C's next call into it is a crash
            p.held_by = holders[0]
        elif p.kind == "callback" and p.callback is not None and p.callback.until is not None:
            handle_param(p.callback.until, p.clause)
    def handle_like(q: Param) -> bool:
        return q.kind == "struct" or (q.kind == "array" and q.dtype == "any" and q.shape is None)

    for name in sorted(contract.releases):
        p = by_name[name]
        if p.kind == "callback":
            if not any(handle_like(q) for q in params):
                raise fail(f"'{name}: release' gives a kept callback back to a handle, but {fname} has no handle "
                           f"parameter")
            continue
        if p.kind != "array":
            raise fail(f"'{name}: release' needs an array parameter, not {p.ctype}")
        if p.keep_until is not None:
            raise fail(f"'{name}' is both kept and released by the same call")
        if not any(handle_like(q) and q is not p for q in params):
            raise fail(f"'{name}: release' gives a kept array back to a handle, but {fname} has no handle parameter")
        p.release = True
    for p in params:
        if p.kind == "callback" and p.callback is not None and p.callback.until not in (None, "return"):
            if by_name[p.callback.until].optional:
                raise fail(f"the callback lives as long as '{p.callback.until}', which cannot then be optional",
                           p.clause)
        if p.keep_until is not None and p.keep_until in by_name and by_name[p.keep_until].optional:
            raise fail(f"C keeps '{p.name}' while '{p.keep_until}' lives, which cannot then be optional", p.clause)
    for name in sorted(contract.unsized):
        p = by_name[name]
        if p.kind != "array" or p.shape is not None:
            raise fail(f"'{name}: unsized' needs a pointer parameter without a shape, not {p.ctype}")
    if destructor:
        for q in params:
            if handle_like(q):
                q.closes = True
                break
    for name in contract.acquires:
        handle_param(name, f"{name}: acquire").acquire = True

    # numel(NAME) must name an array whose numel is known when fills are computed.
    for p in params:
        f = p.fill
        if f is None or f.numel_of is None:
            continue
        src = by_name.get(f.numel_of)
        if src is None or src.kind != "array":
            raise fail(f"numel({f.numel_of}) names no array parameter", f.clause)
        if src.optional:
            raise fail(f"numel({f.numel_of}) of an optional array (it may be None)", f.clause)
        if src.shape is None and src.role == "out":
            raise fail(f"numel({f.numel_of}) of an out array without a shape", f.clause)

    for p in params:
        f = p.fill
        if f is not None and f.dim is not None and not f.dim.symbols and p.int_range is not None:
            lo, hi = p.int_range
            if not lo <= f.dim.factor <= hi:
                raise fail(f"'{p.name}' ({p.ctype}) cannot hold {f.dim.factor}: it must be in [{lo}, {hi}]", f.clause)

    _infer_lengths(params, contract)

    func_ints = {q.name: q for q in params if q.kind == "scalar" and q.scalar == "int"}
    owners = set(contract.fields)
    for p in params:
        if p.kind != "struct" or structs is None:
            continue
        base = decl.params[p.index].type.base
        mine = [o for o in sorted(owners) if o == p.name or o == base
                or (o in structs and structs.get(o) is structs.get(base))]
        over: FieldContract | None = None
        for o in mine:  # the type's clauses, then the parameter's
            over = contract.fields[o] if over is None else over.merged(contract.fields[o])
        p.fields = struct_fields(fail, base, structs, struct_contracts, over=over, func=decl, func_ints=func_ints)
        owners.difference_update(mine)
    for o in sorted(owners):
        struct_params = [q.name for q in params if q.kind == "struct"]
        raise fail(f"the contract describes fields of '{o}', which is not a struct parameter of {decl.text} (nor "
                   f"the type of one)" + (f"; its struct parameters: {', '.join(struct_params)}" if struct_params
                                          else "") + ("" if structs is not None or not struct_params else
                                                      "; no struct declarations were given to check them"),
                   contract.fields[o].source)

    input_bound: set[str] = set()
    for p in params:
        if p.kind == "array" and p.role != "out" and not p.optional and p.shape is not None:
            for d in p.shape:
                if len(d.symbols) == 1 and d.expr is None:  # an expression binds nothing
                    input_bound.add(d.symbols[0])

    # Fills that define a shape symbol (n = b*m, with n in a shape) and fills of
    # plain parameters: order them so that every fill's symbols are known first,
    # and refuse definitions that depend on themselves.
    deps: dict[str, set[str]] = {}
    for p in params:
        f = p.fill
        if f is None:
            continue
        if f.dim is not None:
            deps[p.name] = set(f.dim.symbols)
        else:
            src = by_name[f.numel_of]  # type: ignore[index]
            # numel of an input is known from the array itself; of an out, from its shape.
            deps[p.name] = {s for d in src.shape or () for s in d.symbols} if src.role == "out" else set()
    defining = {n for n in deps if n in symbols}  # fills whose parameter is itself a size

    # A fill depends on the symbols of its expression; only those that are
    # themselves defined by a fill can close a circle.
    def visit(node: str, stack: list[str]) -> None:
        if node in stack:
            cycle = stack[stack.index(node):] + [node]
            clause = by_name[cycle[0]].clause
            if len(cycle) == 2:
                raise fail(f"'{node}' is defined in terms of itself", clause)
            raise fail(f"sizes defined in a circle: {' -> '.join(cycle)}", clause)
        for dep in sorted(deps[node] & defining):
            visit(dep, stack + [node])

    for n in sorted(deps):
        visit(n, [])

    order: list[str] = []
    placed: set[str] = set()
    pending = sorted(deps)
    while pending:
        progressed = False
        for n in list(pending):
            if all(d not in defining or d in placed for d in deps[n]):
                order.append(n)
                placed.add(n)
                pending.remove(n)
                progressed = True
        if not progressed:  # pragma: no cover - caught by visit() above
            raise fail(f"sizes defined in a circle: {', '.join(pending)}")

    param_names = set(by_name)
    free = sorted(s for s in symbols if s not in param_names and s not in input_bound)
    pynames = {p.pyname for p in params}
    for s in free:
        if pyname(s) in pynames:
            raise fail(f"size '{s}' would be passed as {pyname(s)}=, which is also a parameter's name")

    _check_symbols(fail, decl, contract)
    res = decl.result
    if contract.returns_handle is not None:
        if res.pointer_depth < 1 or res.is_function_pointer:
            raise fail(f"'return: handle(...)' needs a pointer result, not {res.text}")
        returns = "handle"
    elif res.text == "void":
        returns = "none"
    elif contract.returns is not None:
        returns = contract.returns
    else:
        returns = default_returns if (res.is_integer and res.pointer_depth == 0) else "value"
    if returns in ("status", "count") and not (res.is_integer and res.pointer_depth == 0):
        raise fail(f"'return: {returns}' needs an integer result, not {res.text}")
    result_is_string = res.pointer_depth == 1 and res.resolved == "char"

    return Plan(
        name=fname,
        decl=decl,
        contract=contract,
        params=params,
        returns=returns,
        result_is_string=result_is_string,
        free_sizes=free,
        fill_order=order,
        input_bound=input_bound,
        pointers_as_int=pointers_as_int,
        returns_handle=contract.returns_handle,
        status_message=contract.status_message,
    )


#: what a callback's C result can hold, for its 'error=' value
_ERROR_RANGES = {
    "_Bool": (0, 1), "bool": (0, 1), "char": (-128, 127), "signed char": (-128, 127), "unsigned char": (0, 255),
    "short": (-(1 << 15), (1 << 15) - 1), "unsigned short": (0, (1 << 16) - 1),
    "int": (-(1 << 31), (1 << 31) - 1), "unsigned int": (0, (1 << 32) - 1), "unsigned": (0, (1 << 32) - 1),
    "long": (-(1 << 63), (1 << 63) - 1), "unsigned long": (0, (1 << 64) - 1),
    "long long": (-(1 << 63), (1 << 63) - 1), "unsigned long long": (0, (1 << 64) - 1),
    "int8_t": (-128, 127), "uint8_t": (0, 255), "int16_t": (-(1 << 15), (1 << 15) - 1), "uint16_t": (0, (1 << 16) - 1),
    "int32_t": (-(1 << 31), (1 << 31) - 1), "uint32_t": (0, (1 << 32) - 1),
    "int64_t": (-(1 << 63), (1 << 63) - 1), "uint64_t": (0, (1 << 64) - 1),
    "size_t": (0, (1 << 64) - 1), "ssize_t": (-(1 << 63), (1 << 63) - 1), "ptrdiff_t": (-(1 << 63), (1 << 63) - 1),
    "intptr_t": (-(1 << 63), (1 << 63) - 1), "uintptr_t": (0, (1 << 64) - 1),
}

#: integer parameter names that say "a length": ``n``, ``len``, ``size``, ``count``,
#: ``capacity``, ``width``, ``n<things>`` (``nframes``, ``nsamples``, ``npts``), ``num_*``,
#: ``*_len``, ``*Len``, ``*_size``, ``*_count``, ``*_frames``...
_LENGTH_NAME = re.compile(
    r"(?:n|len|length|size|count|num|numel|nelem|nelems|nitems|nel|cnt|capacity|cap|maxlen|width|height|rows|cols"
    r"|frames|samples|points|items|elements|entries|nbytes|bytes)"
    r"|n(?:frames|samples|pts|points|elem|elems|elements|items|values|vals|floats|doubles|rows|cols|chars|words"
    r"|entries|records|bins|taps|coefs|coeffs|obs|x|y|z|in|out|bytes|channels)"
    r"|(?:n|num)_\w+|num\w+|\w+_(?:n|num|numel)|\w+_?(?:len|length|size|count|cnt|capacity|bytes|frames|samples|points"
    r"|items|elements|elems|rows|cols)",
    re.IGNORECASE)
#: a length that counts bytes, whatever the pointer's element type
_BYTES_NAME = re.compile(r"\w*bytes|\w*byte_?(?:len|length|size|count)", re.IGNORECASE)
#: two adjacent lengths that C multiplies (``float *img, int width, int height``)
_LENGTH_PAIRS = {frozenset(p) for p in (
    ("rows", "cols"), ("nrows", "ncols"), ("n_rows", "n_cols"), ("num_rows", "num_cols"), ("width", "height"),
    ("w", "h"), ("m", "n"), ("nx", "ny"), ("frames", "channels"), ("nframes", "nchannels"),
    ("n_frames", "n_channels"), ("num_frames", "num_channels"))}


def min_len_text(p: Param) -> str:
    """``'n' elements``, ``'w' * 'h' elements``, ``'nbytes' bytes``: an inferred length, for messages."""
    return " * ".join(f"'{q}'" for q in p.min_len) + (" bytes" if p.min_len_bytes else " elements")


def _infer_lengths(params: list[Param], contract: Contract) -> None:
    """Lengths C takes from integer parameters named like lengths, checked by default:
    the array must hold at least that many elements (a lower bound: a larger array is
    fine). The rules, in order:

    * ``float *data, int size``: an array takes the first length named after it (every
      array since the previous length: ``const float *x, float *y, int64_t n``);
    * two adjacent lengths that C multiplies (``rows, cols``; ``width, height``; ``w, h``;
      ``m, n``; ``nframes, nchannels``...) give a product: ``img`` holds ``w * h``;
    * ``int64_t n, float *buf`` (BLAS's order): where the function names exactly one
      length and it comes before every array, the arrays after it take it (``saxpy(n,
      alpha, x, incx, y, incy)``; ``sgemm``'s ``M, N, K`` say nothing about ``C``, and
      in ``float *out, int64_t n, int32_t *tids`` the ``n`` is ``out``'s), except
      complex arrays (FFT lengths count real samples);
    * a length named like bytes (``nbytes``, ``byte_len``) counts bytes.

    The names (``_LENGTH_NAME``): ``n``, ``len``, ``size``, ``count``, ``capacity``,
    ``width``, ``rows``, ``n<things>`` (``nframes``, ``nsamples``, ``npts``), ``num_*``,
    ``*_len``/``*Len``, ``*_size``, ``*_count``, ``*_frames``. ``void *`` is left alone (it
    may be a handle or user data); a shape in the contract, or ``NAME: unsized``, replaces
    the rule. What no rule covers is *unchecked*: ``describe()`` and the signature say so,
    and the function's first call warns (:class:`~tensorffi.UncheckedWarning`)."""
    for p in params:
        p.unsized = p.kind == "array" and p.name in contract.unsized

    def free_int(q: Param | None) -> bool:
        return q is not None and q.kind == "scalar" and q.scalar == "int" and q.fill is None and not q.is_symbol

    def length(q: Param) -> bool:
        return free_int(q) and bool(_LENGTH_NAME.fullmatch(q.name))

    waiting: list[Param] = []
    before: list[tuple[str, ...]] = []
    took_before = False  # a length already measured an array before it: it is not BLAS's order
    i = 0
    while i < len(params):
        p = params[i]
        if p.kind == "array":
            if (p.shape is None and p.dtype not in (None, "any") and p.role != "out" and p.keep_until is None
                    and not p.release and not p.unsized):
                waiting.append(p)
            i += 1
            continue
        nxt = params[i + 1] if i + 1 < len(params) else None
        pair = free_int(p) and free_int(nxt) and frozenset((p.name.lower(), nxt.name.lower())) in _LENGTH_PAIRS  # type: ignore[union-attr]
        if pair or length(p):
            names: tuple[str, ...] = (p.name,)
            if pair:
                names = (p.name, nxt.name)  # type: ignore[union-attr]
                i += 1
            for q in waiting:
                q.min_len, q.min_len_bytes = names, bool(_BYTES_NAME.fullmatch(names[0]))
            took_before = took_before or bool(waiting)
            waiting = []
            before.append(names)
        i += 1
    if len(before) == 1 and not took_before:
        for q in waiting:
            if q.dtype not in ("complex64", "complex128"):
                q.min_len, q.min_len_bytes = before[0], bool(_BYTES_NAME.fullmatch(before[0][0]))


def struct_label(type_name: str) -> str:
    """``struct job`` for ``job`` and for ``struct job`` alike (in messages)."""
    return type_name if type_name.startswith(("struct ", "union ")) else "struct " + type_name


def _type_contract(contracts: Any, structs: Any, type_name: str) -> FieldContract | None:
    """The library's contract of struct ``type_name``, under its typedef or its tag."""
    if not contracts:
        return None
    if type_name in contracts:
        return contracts[type_name]  # type: ignore[no-any-return]
    fields = structs.get(type_name)
    for key, value in contracts.items():
        if structs.get(key) is fields:
            return value  # type: ignore[no-any-return]
    return None


def _field_array(ct: Any) -> bool:
    """A field the bridge checks as an array: a pointer to numbers (not a C string)."""
    return (ct.pointer_depth == 1 and ct.dtype is not None and not ct.is_array and not ct.is_function_pointer
            and not (ct.const and ct.resolved == "char"))


def struct_fields(
    fail: Any,
    type_name: str,
    structs: Any,
    contracts: Any = None,
    *,
    over: FieldContract | None = None,
    func: CFunction | None = None,
    func_ints: Any = None,
    seen: tuple[str, ...] = (),
) -> StructFields | None:
    """The checks of struct ``type_name``'s pointer fields where a function takes it.

    A field's shape comes from the struct's contract (``contracts={"SRC_DATA":
    "data_in: [input_frames, _ch]"}``) or the function's (``data.data_in:
    [input_frames * channels]``, which replaces the struct's clause for that field).
    A shape's symbols are, in this order, the struct's integer fields (read at each
    call), the function's integer parameters, and free sizes that a plain dimension
    of another field fixes (``_ch`` above ties ``data_in`` and ``data_out`` together).
    A one-dimension shape counts the elements of whatever array is assigned (a
    ``[frames, channels]`` tensor for ``[input_frames * channels]``); more dimensions
    must match the array's shape. The same mistakes as in a function's shapes are
    refused here, at bind time: a field the struct does not have, a field that is not
    a pointer to numbers, a size one edit away from an integer field or parameter,
    one used once while a length field is left unused, a size in an expression that
    nothing fixes.

    A pointer field without a clause takes the length C reads from the field names
    (:func:`_infer_field_lengths`: ``float *data; int64_t n;``), and must hold at
    least that many elements; one no rule covers is *unchecked* (``describe()`` and the
    function's first call say so). Struct-typed fields (by pointer or by value) are
    checked with their own type's rules. ``None``: the struct is opaque (a handle)."""
    fields = structs.get(type_name) if structs is not None else None
    if fields is None:
        if over is not None:
            raise fail(f"the contract describes fields of {type_name}, whose fields are not declared (an opaque "
                       f"type: declare the struct's fields in the cdef)", over.source)
        return None
    base = _type_contract(contracts, structs, type_name) or FieldContract()
    spec = base.merged(over)
    by = {f.name: f for f in fields}
    where_t = struct_label(type_name)
    for name in sorted(set(spec.arrays) | spec.unsized):
        clause = spec.arrays[name].clause if name in spec.arrays else f"{name}: unsized"
        f = by.get(name)
        if f is None:
            import difflib

            close = difflib.get_close_matches(name, list(by), n=2)
            raise fail(f"{where_t} has no field '{name}'" + (f"; did you mean {' or '.join(map(repr, close))}?" if close
                       else "") + f" (its fields: {', '.join(by)})", clause)
        if not _field_array(f.type):
            raise fail(f"{where_t}: field '{name}' ({f.type.text}) is not a pointer to numbers, so it has no shape",
                       clause)
        a = spec.arrays.get(name)
        if a is not None and f.type.const and a.role == "inout":
            raise fail(f"{where_t}: field '{name}' is {f.type.text}: C cannot write it", clause)
        if a is not None and f.type.dtype == "any" and a.shape is not None and len(a.shape) != 1:
            raise fail(f"{where_t}: field '{name}' is {f.type.text}: its length counts bytes, so its shape has one "
                       f"dimension", clause)
    int_fields = [f.name for f in fields if f.type.is_integer and not f.type.is_array]
    ints = dict(func_ints or {})
    count: dict[str, int] = {}
    first: dict[str, str] = {}
    plain: set[str] = set()  # symbols a plain dimension binds
    for a in spec.arrays.values():
        for d in a.shape or ():
            if len(d.symbols) == 1 and d.factor == 1 and d.expr is None:
                plain.add(d.symbols[0])
            for sym in d.symbols:
                count[sym] = count.get(sym, 0) + 1
                first.setdefault(sym, a.clause)
    args: list[str] = []
    free: set[str] = set()
    fname = func.name if func is not None else "the function"
    for sym in sorted(count, key=lambda x: (first[x], x)):
        if sym in int_fields:
            continue
        if sym in by:
            raise fail(f"size '{sym}' is field '{sym}' of {type_name} ({by[sym].type.text}), not an integer",
                       first[sym])
        if sym in ints:
            args.append(sym)
            continue
        if not sym.startswith("_"):
            near = [q for q in int_fields + list(ints) if _near(sym, q)]
            if near:
                raise fail(f"size '{sym}' names no integer field of {type_name} and no parameter of {fname}: did you "
                           f"mean {' or '.join(map(repr, near))}? (as written, '{sym}' is a size of its own)", first[sym])
            unused = [q for q in int_fields if _LENGTH_NAME.fullmatch(q) and q not in count]
            if count[sym] == 1 and unused:
                raise fail(f"size '{sym}' appears only once and names no integer field of {type_name} or parameter of "
                           f"{fname}: it checks nothing, while the length field(s) {', '.join(unused)} go unused. Name "
                           f"the field or parameter that holds this size, or write '_{sym}' for a dimension of any "
                           f"length", first[sym])
        if sym not in plain:
            raise fail(f"size '{sym}' is not an integer field of {type_name} or a parameter of {fname}, and no field's "
                       f"dimension fixes it (a product or an expression never does): say where it comes from",
                       first[sym])
        free.add(sym)
    rules = []
    for f in fields:
        if not _field_array(f.type):
            continue
        a = spec.arrays.get(f.name)
        rules.append(FieldRule(f.name, f.type.text, f.type.dtype, a.shape if a is not None else None,
                               a.optional if a is not None else False, unsized=f.name in spec.unsized,
                               clause=a.clause if a is not None else ""))
    _infer_field_lengths(fields, {r.name: r for r in rules})
    nested: dict[str, StructFields] = {}
    for f in fields:
        ct = f.type
        if ct.is_struct and ct.pointer_depth <= 1 and not ct.is_function_pointer and not ct.is_array \
                and ct.base not in seen + (type_name,):
            inner = struct_fields(fail, ct.base, structs, contracts, seen=seen + (type_name,))
            if inner is not None and inner.checks:
                nested[f.name] = inner
    return StructFields(type_name, rules, tuple(args), nested, spec.source, frozenset(free))


def _infer_field_lengths(fields: tuple[CParam, ...], rules: dict[str, FieldRule]) -> None:
    """Lengths of a struct's pointer fields from its integer fields' names, the way
    :func:`_infer_lengths` reads a function's parameters, and checked the same way (the
    array holds at least that many elements). Fields are read in order:

    * a run of pointer fields followed by integer fields named like lengths (other
      fields between them are skipped): with as many lengths as pointers they pair in
      order (libsamplerate's ``SRC_DATA``: ``data_in`` takes ``input_frames``,
      ``data_out`` takes ``output_frames``); one length is shared by all of them
      (``const float *in; float *out; int64_t n``); any other count is ambiguous and
      left unchecked;
    * two adjacent lengths that C multiplies (``width, height``) count as one product;
    * a struct whose one length comes before every pointer (``int64_t n; float
      *data;``) gives it to them;
    * a length named like bytes counts bytes.

    A field with a shape in a contract, or ``FIELD: unsized``, is left alone."""
    items = list(fields)

    def is_len(f: CParam) -> bool:
        return f.type.is_integer and not f.type.is_array and bool(_LENGTH_NAME.fullmatch(f.name))

    def wants(f: CParam) -> bool:
        r = rules.get(f.name)
        return r is not None and r.shape is None and not r.unsized and r.dtype != "any"

    pending: list[FieldRule] = []
    runs: list[tuple[str, ...]] = []  # the lengths of the current run
    first_lengths: list[tuple[str, ...]] = []
    seen_pointer = took = False

    def settle() -> None:
        nonlocal took
        if pending and runs:
            if len(runs) == len(pending):
                for r, names in zip(pending, runs):
                    r.min_len, r.min_len_bytes = names, bool(_BYTES_NAME.fullmatch(names[0]))
            elif len(runs) == 1:
                for r in pending:
                    r.min_len, r.min_len_bytes = runs[0], bool(_BYTES_NAME.fullmatch(runs[0][0]))
            took = True
        pending.clear()
        runs.clear()

    i = 0
    while i < len(items):
        f = items[i]
        if f.name in rules or f.type.pointer_depth:
            if runs:
                settle()
            if wants(f):
                pending.append(rules[f.name])
            seen_pointer = True
            i += 1
            continue
        if is_len(f):
            nxt = items[i + 1] if i + 1 < len(items) else None
            names: tuple[str, ...] = (f.name,)
            if nxt is not None and is_len(nxt) and frozenset((f.name.lower(), nxt.name.lower())) in _LENGTH_PAIRS:
                names = (f.name, nxt.name)
                i += 1
            if pending:
                runs.append(names)
            elif not seen_pointer:
                first_lengths.append(names)
        i += 1
    settle()
    lengths_after = any(is_len(f) for j, f in enumerate(items) if any(x.type.pointer_depth for x in items[:j]))
    if len(first_lengths) == 1 and not took and not lengths_after:
        for r in rules.values():
            if r.shape is None and not r.unsized and not r.min_len and r.dtype != "any":
                r.min_len, r.min_len_bytes = first_lengths[0], bool(_BYTES_NAME.fullmatch(first_lengths[0][0]))


def _near(a: str, b: str) -> bool:
    """Whether ``a`` looks like a typo of ``b``: the same but for case, or (for names of
    three or more characters, where one edit is still a small part of the name) one
    insertion, deletion, substitution or swap of neighbours away."""
    if a == b:
        return False
    if a.lower() == b.lower():
        return True
    if min(len(a), len(b)) < 3 or abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        return len(diff) == 1 or (len(diff) == 2 and diff[1] == diff[0] + 1
                                  and a[diff[0]] == b[diff[1]] and a[diff[1]] == b[diff[0]])
    short, long_ = (a, b) if len(a) < len(b) else (b, a)
    return any(long_[:i] + long_[i + 1:] == short for i in range(len(long_)))


def _check_symbols(fail: Any, decl: CFunction, contract: Contract) -> None:
    """Refuse shape symbols that are almost certainly typos, at bind time.

    A symbol that names no parameter is a *free size*. Two mistakes look like one:

    * a symbol a single edit (or a case change) away from an integer parameter's name
      is refused with a "did you mean": ``x: [row, cols]`` with a parameter ``rows``
      would leave ``rows`` unchecked, and a wrong ``rows`` would let C run past the
      array;
    * a symbol that appears only once, while an integer parameter named like a length
      (``n``, ``len``, ``count``, ``nframes``, ... see :func:`_infer_lengths`) is left
      unused, is refused too: it ties no two sizes together and C never receives it,
      so the length C does receive is checked against nothing.

    Allowed: a free symbol used twice or more (``x: [b, n]; y: out [b, n]``, or
    ``len = b*n``); one used once where every length parameter is accounted for
    (``x: [r, c]; count = numel(x)``: "any 2-D shape"); and any symbol that starts
    with ``_`` (``dest: inout [_cap]``), which says "any length" on purpose."""
    params = {p.name: p for p in decl.params}
    count: dict[str, int] = {}
    first: dict[str, str] = {}

    def note(dims: Any, clause: str) -> None:
        for d in dims:
            for sym in d.symbols:
                count[sym] = count.get(sym, 0) + 1
                first.setdefault(sym, clause)

    for spec in contract.arrays.values():
        note(spec.shape or (), spec.clause)
    for f in contract.fills.values():
        if f.dim is not None:
            note((f.dim,), f.clause)
    used = set(count) | set(contract.fills)
    all_ints = [p.name for p in decl.params if p.type.pointer_depth == 0 and p.type.is_integer]
    ints = [q for q in all_ints if q not in used]
    for sym in sorted(count):
        if sym in params or sym.startswith("_"):
            continue
        near = [q for q in all_ints if _near(sym, q)]
        if near:
            raise fail(f"size '{sym}' names no parameter of {decl.text}: did you mean "
                       f"{' or '.join(repr(q) for q in near)}? (as written, '{sym}' is a size of its own, not "
                       f"'{near[0]}')", first[sym])
        lengths = [q for q in ints if _LENGTH_NAME.fullmatch(q)]
        if count[sym] == 1 and lengths:
            free_ints = ", ".join(lengths)
            raise fail(f"size '{sym}' appears only once and names no parameter of {decl.text}: it ties no two "
                       f"sizes together and C never receives it, so it checks nothing, while the contract "
                       f"leaves the length parameter(s) {free_ints} unchecked. Name the parameter that holds this size, "
                       f"write the number, use '{sym}' in another shape or 'PARAM = {sym}', or write '_{sym}' for a "
                       f"dimension of any length", first[sym])


def _check_callback(fail: Any, p: Param) -> None:
    """A callback's array arguments must be pointers of the function pointer's
    signature, and their sizes its integer arguments."""
    spec, sig = p.callback, p.signature
    assert spec is not None and sig is not None
    by = {q.name: q for q in sig.params}
    res = sig.result
    if res.text == "void" or not (res.is_integer and res.pointer_depth == 0):
        if spec.error != 0:
            raise fail(f"callback '{p.name}' returns {res.text}: 'error={spec.error}' has nowhere to go", spec.clause)
    else:
        lo, hi = _ERROR_RANGES.get(res.resolved, (-(1 << 31), (1 << 31) - 1))
        if not lo <= spec.error <= hi:
            raise fail(f"callback '{p.name}' returns {res.text}: 'error={spec.error}' must be in [{lo}, {hi}]",
                       spec.clause)
    for arg, shape in spec.arrays.items():
        q = by.get(arg)
        if q is None:
            raise fail(f"callback '{p.name}' has no argument '{arg}' ({sig.text or p.ctype})", spec.clause)
        if q.type.pointer_depth != 1 or q.type.dtype in (None, "any"):
            raise fail(f"callback argument '{arg}' ({q.type.text}) is not a pointer to numbers", spec.clause)
        for d in shape:
            for sym in d.symbols:
                s = by.get(sym)
                if s is None or not s.type.is_integer:
                    raise fail(f"callback argument '{arg}': size '{sym}' is not an integer argument of the callback",
                               spec.clause)


# --------------------------------------------------------------------------- #
# The plan seen as an operator                                                 #
# --------------------------------------------------------------------------- #


@dataclass(frozen=True)
class OpArg:
    """One argument of a bound function seen as an operator (in schema order).

    ``kind``: ``"tensor"`` (an array parameter), ``"float"``, ``"int"``, ``"bool"``
    (scalar parameters) or ``"size"`` (a size the caller gives because no input
    array fixes it).
    """

    name: str
    kind: str
    dtype: str | None = None
    mutated: bool = False
    optional: bool = False
    shape: tuple[Dim, ...] | None = None


@dataclass(frozen=True)
class OpOutput:
    """An ``out`` array of the operator, or (``name == "return"``) the C result as a 0-dim tensor."""

    name: str
    dtype: str
    shape: tuple[Dim, ...]


def operator_signature(plan: Plan, hidden: Any = ()) -> tuple[list[OpArg], list[OpOutput]]:
    """The arguments and results of ``plan`` as an operator on tensors.

    Arguments, in declaration order: every array that is not ``out`` (inout arrays
    are ``mutated``), every scalar that is not filled in, and every size parameter
    that no input array fixes; then the free sizes. ``out`` arrays become results,
    followed by the C result (``"return"``) for ``return: value`` functions.
    Parameters named in ``hidden`` are left out: the caller supplies them another way.
    Raises :class:`ContractError` for what an operator cannot take.
    """
    hidden = set(hidden)
    unknown = hidden - {p.name for p in plan.params}
    if unknown:
        raise ContractError(f"{plan.name}: hidden names no parameter: {', '.join(sorted(unknown))}")
    args: list[OpArg] = []
    outs: list[OpOutput] = []
    for p in plan.params:
        if p.name in hidden:
            if p.fill is not None or p.is_symbol or p.role == "out":
                raise ContractError(f"{plan.name}: '{p.name}' is filled in by the contract; it cannot be hidden")
            continue
        if p.kind == "array":
            if p.dtype == "any" and p.shape is not None:
                raise ContractError(f"{plan.name}: '{p.name}' ({p.ctype}) is measured in bytes; an operator takes "
                                    f"typed tensors (declare it with its element type)")
            if p.role == "out":
                assert p.dtype is not None and p.shape is not None
                outs.append(OpOutput(p.name, p.dtype, p.shape))
            else:
                args.append(OpArg(p.pyname, "tensor", p.dtype, p.role == "inout", p.optional, p.shape))
        elif p.kind == "scalar":
            if p.fill is not None:
                continue
            if p.is_symbol:
                if p.name not in plan.input_bound:
                    args.append(OpArg(p.pyname, "size"))
                continue
            if p.scalar is None:
                raise ContractError(f"{plan.name}: scalar '{p.name}' ({p.ctype}) cannot be an operator argument")
            args.append(OpArg(p.pyname, p.scalar))
        else:
            raise ContractError(
                f"{plan.name}: '{p.name}' ({p.ctype}) cannot be an operator argument: operators take "
                f"tensors and numbers only (wrap the function in Python and use tensorffi.ops.define)"
            )
    args += [OpArg(pyname(s), "size") for s in plan.free_sizes]
    if plan.returns == "value":
        res = plan.decl.result
        dtype = _SIZED.get(res.base) or ELEMENT_DTYPES.get(res.resolved)
        if res.pointer_depth or dtype in (None, "any"):
            raise ContractError(
                f"{plan.name}: its result ({res.text}) cannot be an operator result; declare "
                f"'return: status' or 'return: none' in its contract"
            )
        outs.append(OpOutput("return", dtype, ()))
    names = [a.name for a in args]
    if len(set(names)) != len(names):
        raise ContractError(f"{plan.name}: argument names repeat as an operator: {names}")
    return args, outs


# --------------------------------------------------------------------------- #
# The Python signature, as a stub (.pyi) would write it                        #
# --------------------------------------------------------------------------- #

#: annotation spellings (strings, as under ``from __future__ import annotations``)
ARRAY = "torch.Tensor | numpy.ndarray"
_BYTES = " | bytes | bytearray | memoryview"  # what a char/void array also takes (viewed through NumPy)


def _annotation(p: Param) -> str:
    if p.kind == "array":
        text = ARRAY + (_BYTES if p.dtype in ("uint8", "int8", "any") and p.role == "in" else "")
        if p.dtype == "any" and p.shape is None:
            text += " | tensorffi.Handle"  # a bare void * may be a handle's pointer
        return text
    if p.kind == "scalar":
        return {"float": "float", "bool": "bool"}.get(p.scalar or "", "int")
    if p.kind == "string":
        return "str | bytes"
    if p.kind == "struct":
        return "tensorffi.Handle | tensorffi.Struct"
    if p.kind == "callback":
        return "collections.abc.Callable[..., typing.Any]"
    return "typing.Any"  # a raw pointer (cffi cdata)


def _return_annotation(plan: Plan) -> str:
    parts: list[str] = []
    if plan.returns == "handle":
        parts.append("tensorffi.Handle")
    elif plan.returns == "count":
        parts.append("int")
    elif plan.returns == "value":
        res = plan.decl.result
        if plan.result_is_string:
            parts.append("str | None")
        elif res.pointer_depth or res.is_struct or res.is_function_pointer:
            parts.append("typing.Any")
        elif res.resolved in ("float", "double"):
            parts.append("float")
        elif res.resolved in ("_Bool", "bool") or res.base == "bool":
            parts.append("bool")
        else:
            parts.append("int")
    for q in plan.params:
        if q.kind == "array" and q.role == "out":
            parts.append(ARRAY)
        elif q.kind == "handle_out":
            parts.append("tensorffi.Handle")
    if not parts:
        return "None"
    return parts[0] if len(parts) == 1 else f"tuple[{', '.join(parts)}]"


def python_signature(plan: Plan) -> inspect.Signature:
    """The bound function's signature as a stub would write it: the short calling form
    (the C declaration's own form is also accepted, see ``describe()``), annotations as
    Python types (strings naming ``torch``, ``numpy``, ``tensorffi``), ``None`` defaults for
    what the bridge can fill in, allocate or leave NULL.

    >>> from tensorffi._decl import parse_declarations
    >>> from tensorffi.contract import parse_contract
    >>> decl = parse_declarations("int f(const float *x, float *y, int64_t n, double a);").functions["f"]
    >>> plan = build_plan(None, decl, parse_contract("x: [n]; y: out [n]; return: status"))
    >>> str(python_signature(plan)).replace("torch.Tensor | numpy.ndarray", "A")
    "(x: 'A', a: 'float', *, y: 'A | None' = None, n: 'int | None' = None) -> 'A'"
    """
    P = inspect.Parameter
    params = [P(q.pyname, P.POSITIONAL_OR_KEYWORD, annotation=_annotation(q)) for q in plan.positional]
    params += [P(q.pyname, P.KEYWORD_ONLY, default=None, annotation=_annotation(q) + " | None")
               for q in plan.keyword_only]
    params += [P(pyname(s), P.KEYWORD_ONLY, default=None, annotation="int | None") for s in plan.free_sizes]
    return inspect.Signature(params, return_annotation=_return_annotation(plan))


__all__ = ["Plan", "Param", "FieldRule", "StructFields", "struct_fields", "build_plan", "operator_signature", "python_signature", "OpArg", "OpOutput",
           "pyname"]


def __dir__() -> list[str]:
    return sorted(__all__)  # the API only: tab completion does not offer imports (np, torch, ...)
