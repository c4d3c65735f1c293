# SPDX-License-Identifier: MIT
"""Contracts: what a C declaration does not say, in one short line.

A contract is a string of clauses separated by ``;``::

    "x: [b, n]; y: out [b, n]; rows = b; cols = n; return: status"

Clauses:

``NAME: [d0, d1, ...]``
    pointer parameter ``NAME`` is an array of that shape. Its role comes from the
    declaration (``const T *`` is read, ``T *`` is read and written).
``NAME: in|out|inout [dims]``
    the same with an explicit role. ``out`` arrays are allocated by the bridge (in
    the caller's kind: torch in, torch out) unless the caller passes one as a
    keyword argument, and are returned. Add ``?`` (``in? [n]``) for a parameter that
    may be ``None`` (passed to C as NULL).
``NAME: ?`` (or ``NAME: in?``)
    pointer parameter ``NAME`` (a string, a struct, an array without a declared
    shape) may be ``None``, passed to C as NULL. Without it, ``None`` is refused:
    most C functions do not expect NULL.
``PARAM = EXPR``
    integer parameter ``PARAM`` is filled in by the bridge. ``EXPR`` is a product of
    symbols and integers (``n``, ``b*n``, ``3*n``) or ``numel(NAME)``. A caller may
    still pass it; it is then checked. If ``PARAM`` is also a symbol of the shapes,
    the clause defines that symbol (``n = b*m`` makes ``y: out [n]`` hold ``b*m``
    elements); a definition that depends on itself is refused.
``return: status|count|value|none``
    ``status``: a non-zero result is an error (raised as an exception); ``count``:
    a negative result is an error, any other is returned (a count, an index, a
    "ready" flag); ``value``: the result is returned; ``none``: it is ignored.
    ``return: status(MSGFN)`` (or ``count(MSGFN)``) takes the error message from
    ``const char *MSGFN(int status)`` of the same library.

C that outlives the call (see :mod:`tensorffi.handles`):

``return: handle(DESTROY)``
    the function returns a pointer to an opaque object (a device, a parser): it is
    returned as a :class:`~tensorffi.Handle` that calls ``DESTROY(ptr)`` exactly
    once (``close()``, a ``with`` block, or a finalizer as a last resort). NULL is
    an error. Pointer parameters of that type accept the handle; after ``close()``
    every use is a :class:`~tensorffi.HandleClosedError`.
``NAME: out handle(DESTROY)``
    the same for an out-parameter (``int open(const char *name, dev_t **out)``):
    the bridge passes a slot, and returns the handle C stored in it.
``NAME: out status`` (or ``NAME: out status(MSGFN)``)
    an error out-parameter (``int *error``, as in libsamplerate's
    ``SRC_STATE *src_new(int converter_type, int channels, int *error)`` or OpenCL's
    ``errcode_ret``): the bridge passes a zeroed slot, the caller passes nothing, and
    a non-zero value C stores there is raised as the library's error, with the
    message of ``const char *MSGFN(int code)`` (``error: out status(src_strerror)``).
    A constructor that returns NULL raises that error, not "no handle"; one that
    stores an error and still returns a handle has it destroyed first.
``NAME: keep [dims] until H`` (or ``keep in [dims]``, ``keep inout [dims]``)
    C keeps array ``NAME`` after the call returns (a registered buffer): the bridge
    holds its memory while handle parameter ``H`` lives, and refuses memory that
    could be resized or freed meanwhile (use :func:`tensorffi.buffer`).
``NAME: keep [dims] until return``
    the same, kept until the handle the call *gives back* is closed (FFTW's
    ``fftwf_plan_dft_r2c_1d(n, in, out, flags)`` returns a plan that keeps ``in``
    and ``out``): that :class:`~tensorffi.Handle` holds the arrays. The handle is
    the one of ``return: handle(DESTROY)``, or, for a function that returns none,
    its one ``NAME: out handle(DESTROY)``; a function with no such handle, or with
    several, is a ContractError naming the clause (say ``until H`` on a call that
    takes the handle instead).
``NAME: release``
    a kept array passed here is given back: the bridge stops holding it. On a
    function-pointer parameter (an unregister function,
    ``int remove_listener(dev_t *dev, listener_fn cb)``): the caller passes the
    Python callable it registered on the handle this call takes; the bridge passes
    C the function pointer it made for it then, and once C returned success ends
    that registration (the latest of that callable; ``==`` compares callables, so a
    bound method passed again matches). A callable not registered there is an
    ArgumentTypeError before C runs. An unregister function that takes a
    registration id instead of the function pointer cannot be matched: what was
    registered stays held until the handle closes (memory, never a crash).
``NAME: unsized``
    pointer parameter ``NAME`` has no length the bridge can check: it turns off the
    check inferred from the declaration's names (``float *data, int size``: ``data``
    must hold at least ``size`` elements; see :func:`tensorffi.plan.build_plan`).
``H: acquire``
    after this call, arrays kept by handle ``H`` that C writes may hold new data:
    their autograd version counters are bumped (a "wait" or "acquire" call).
``NAME: callback(ARG: [dims], ..., copy, error=N) [until H | until return]``
    a Python callable for function-pointer parameter ``NAME``; it may be called
    from any C thread. Array arguments of the callback become tensors viewing C
    memory for the duration of the call (``copy``: copies that may be kept);
    sizes named in their shapes, and ``void *`` arguments, are not passed. C
    receives ``N`` (default 0) as the callback's result when it raises. Without
    ``until``, the callback lives for the call and its exception is raised when
    the call returns, except on a function that gives back one handle (a
    constructor, which most often keeps it): there it means ``until return``.
    ``until H``: the callback stays alive while handle parameter ``H`` lives (C may call it after the registering call returns), held once per
    registration; ``until return``: while the handle the call gives back lives (as
    for ``keep ... until return``: libsamplerate's ``src_callback_new(func, ...)``).
    An exception raised in a kept callback is raised when a call that takes the
    handle returns, if C called the callback on that call's own thread
    (``src_callback_read`` calls it synchronously), before C's error status;
    raised on another thread, it waits for the next call that takes the handle, or
    ``close()`` (where it surfaces never depends on timing).

Struct fields (a struct passed by pointer, built with ``lib.struct(TYPE, ...)``):

``contracts={"TYPE": "FIELD: [dims]; ..."}``
    a contract keyed by a struct type's name describes its pointer fields, for every
    function that takes the struct: ``{"SRC_DATA": "data_in: [input_frames, _ch];
    data_out: [output_frames, _ch]"}``. Clauses: ``FIELD: [dims]``, ``FIELD: in
    [dims]`` (C only reads a field declared without ``const``), ``FIELD: ?`` (may be
    NULL) and ``FIELD: unsized``.
``PARAM.FIELD: [dims]`` (or ``TYPE.FIELD: [dims]``) in a function's contract
    the same for one function, replacing the type's clause for that field; its shapes
    may also use the function's integer parameters: ``src_simple``'s ``"data.data_in:
    [input_frames * channels]; data.data_out: [output_frames * channels]"``.

A field's symbols are the struct's integer fields (read at each call), then the
function's integer parameters, then free sizes fixed by a plain dimension of another
field (``_ch`` above: both fields have as many channels). A one-dimension shape
counts the elements of whatever array is assigned (``[input_frames * channels]``
takes a ``[frames, channels]`` tensor); more dimensions must match its shape. The
checks run at every call that passes the struct, before C runs: a wrong length is a
ShapeError naming the field and the values, a NULL field where C accesses elements an
ArgumentTypeError, an array whose memory moved after the assignment (a tensor's
``resize_()`` or ``set_()``, a NumPy ``resize``) a LayoutError, and a pointer set
behind the struct's back (through ``.cdata``, or by C) an ArgumentTypeError. Without
a clause, a field takes its length from the field names as a function's array does
(``float *data; int64_t n;``; see :func:`tensorffi.plan._infer_field_lengths`), and a
field no rule covers is UNCHECKED in ``describe()`` and the first call's
UncheckedWarning. A raw cffi struct (``ffi.new("SRC_DATA *")``) cannot be checked:
its first use warns. Typos in field names and sizes are ContractErrors at bind time,
as in functions' shapes.

A dimension is a symbol, an integer, a product (``b*n``, ``SYMBOL*K``), or an
integer expression of sizes with ``+ - * / //`` and parentheses (``n/2 + 1``;
``/`` is integer division). A symbol named like an integer parameter binds that
parameter. A symbol that names no parameter is a *free size*; a free size fixed by
no input array (it appears only in ``out`` shapes or expressions) becomes a required
keyword argument of the bound function.

Which free sizes are allowed, checked when the function is bound (a typo in a
symbol would otherwise leave the length C receives unchecked):

* one used twice or more: it ties dimensions together (``x: [b, n]; y: out [b, n]``)
  or feeds a filled-in length (``len = b*n``);
* one used once, where every integer parameter named like a length (``n``,
  ``len``, ``count``, ``nframes``...) is accounted for: ``x: [r, c]; count =
  numel(x)`` says "any 2-D shape";
* any symbol starting with ``_`` (``dest: inout [_cap]``): "any length", on purpose.

Refused with a :class:`~tensorffi.ContractError`: a free size one edit (or a case
change) away from an integer parameter (``x: [row, cols]`` for ``rows``: "did you
mean 'rows'?"), and one used once while a length parameter is left unused (``x:
[m]`` in ``f(const float *x, int64_t n)``: ``n`` would go unchecked).

Lengths without a contract: an array without a shape takes the length C receives
from the parameter names (``float *data, int size``; ``int64_t n, float *x`` as in
BLAS; ``float *img, int w, int h`` as a product; ``nbytes`` in bytes; the rules are
:func:`tensorffi.plan._infer_lengths`), and must hold at least that many elements.
An array no rule covers is *unchecked*: ``describe()`` and the signature mark it,
and its function's first call raises an :class:`~tensorffi.UncheckedWarning` (an
error under ``-W error``) with the clause to write; ``NAME: unsized`` says that no
length applies and silences it. An
expression never binds a symbol: it is computed from the others and checked
(a given array must have exactly that length), and a part of it that goes below
0, divides by 0 or exceeds 2**63 - 1 is a :class:`~tensorffi.ShapeError` before C
runs. ``PARAM = EXPR`` takes the same expressions.

Element types: a ``T *`` parameter takes arrays of ``T``'s dtype; ``float
_Complex *`` and ``double _Complex *`` (and a ``typedef float NAME[2]`` such as
FFTW's ``fftwf_complex``) take complex64 and complex128 arrays. A ``void *``
parameter takes any dtype, and its one dimension counts **bytes**
(``src: [srcSize]`` on a 1,000-element float32 tensor gives ``srcSize = 4000``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .errors import ContractError

ROLES = ("in", "out", "inout")
RETURNS = ("status", "count", "value", "none")

_IDENT = r"[A-Za-z_]\w*"
_ARRAY = re.compile(rf"^({_IDENT})\s*:\s*(?:(in|out|inout)(\?)?)?\s*(\?)?\s*\[(.*)\]$")
_OPTIONAL = re.compile(rf"^({_IDENT})\s*:\s*(?:in\s*\?|\?|optional)$")
_FILL = re.compile(rf"^({_IDENT})\s*=\s*(.+)$")
_RETURN = re.compile(r"^(?:return|->)\s*:?\s*(\w+)\s*(?:\(\s*([A-Za-z_]\w*)\s*\))?$")
_KEEP = re.compile(rf"^({_IDENT})\s*:\s*keep\s*(?:(in|out|inout)\s*)?\[(.*)\]\s*until\s+({_IDENT})$")
_HANDLE_OUT = re.compile(rf"^({_IDENT})\s*:\s*(?:out\s+)?handle\s*\(\s*({_IDENT})\s*\)$")
_STATUS_OUT = re.compile(rf"^({_IDENT})\s*:\s*out\s+status\s*(?:\(\s*({_IDENT})\s*\))?$")
_MARK = re.compile(rf"^({_IDENT})\s*:\s*(release|acquire|unsized)$")
_CALLBACK = re.compile(rf"^({_IDENT})\s*:\s*callback\s*\((.*)\)\s*(?:until\s+({_IDENT}))?$")
_FIELD = re.compile(rf"^({_IDENT})\s*\.\s*({_IDENT})\s*:(.*)$")


@dataclass(frozen=True)
class Dim:
    """One dimension: product of ``factor`` and the symbols in ``symbols``; or, where
    ``expr`` is set, an integer expression of those symbols (``n/2 + 1``).

    ``expr`` is a tree of tuples: ``("int", k)``, ``("sym", name)`` or
    ``(op, left, right)`` with ``op`` one of ``+ - * //``. An expression dimension
    never binds a symbol (its symbols come from other arguments or the caller); it
    is computed and checked, and a value below 0 is a ShapeError at call time."""

    symbols: tuple[str, ...] = ()
    factor: int = 1
    expr: tuple[Any, ...] | None = None
    text: str = field(default="", compare=False)

    def __str__(self) -> str:
        if self.expr is not None:
            return self.text
        parts = ([str(self.factor)] if self.factor != 1 or not self.symbols else []) + list(self.symbols)
        return "*".join(parts)


@dataclass(frozen=True)
class ArraySpec:
    name: str
    role: str | None  # None: from the declaration
    shape: tuple[Dim, ...] | None  # None: no shape declared (``NAME: ?``)
    optional: bool = False
    clause: str = field(default="", compare=False)  # the text it came from, for errors
    until: str | None = None  # kept by C after the call, while handle parameter ``until`` lives


@dataclass(frozen=True)
class Fill:
    """``param = expr``: expr is a Dim, or numel of an array."""

    param: str
    dim: Dim | None = None
    numel_of: str | None = None
    clause: str = field(default="", compare=False)


@dataclass(frozen=True)
class CallbackSpec:
    """``NAME: callback(ARG: [dims], ..., copy, error=N) until H``."""

    name: str
    arrays: dict[str, tuple[Dim, ...]]
    copy: bool = False
    error: int = 0
    until: str | None = None
    clause: str = field(default="", compare=False)


@dataclass
class FieldContract:
    """What the pointer fields of a struct hold (see "Struct fields" in the module
    docstring): ``FIELD: [dims]``, ``FIELD: in [dims]``, ``FIELD: ?``, ``FIELD: unsized``."""

    arrays: dict[str, ArraySpec] = field(default_factory=dict)
    unsized: set[str] = field(default_factory=set)
    source: str = ""

    def merged(self, over: FieldContract | None) -> FieldContract:
        """This contract with the clauses of ``over`` (a function's ``PARAM.FIELD``
        clauses) replacing the ones of the same fields."""
        if over is None:
            return self
        arrays = {k: v for k, v in self.arrays.items() if k not in over.arrays and k not in over.unsized}
        unsized = {k for k in self.unsized if k not in over.arrays}
        arrays.update(over.arrays)
        return FieldContract(arrays, unsized | over.unsized, "; ".join(t for t in (self.source, over.source) if t))


@dataclass
class Contract:
    arrays: dict[str, ArraySpec] = field(default_factory=dict)
    fills: dict[str, Fill] = field(default_factory=dict)
    returns: str | None = None
    source: str = ""
    status_message: str | None = None  # return: status(MSGFN)
    returns_handle: str | None = None  # return: handle(DESTROY): the destructor's name
    handle_outs: dict[str, str] = field(default_factory=dict)  # NAME: out handle(DESTROY)
    callbacks: dict[str, CallbackSpec] = field(default_factory=dict)
    releases: set[str] = field(default_factory=set)
    acquires: set[str] = field(default_factory=set)
    unsized: set[str] = field(default_factory=set)  # no inferred length check for these arrays
    status_outs: dict[str, str | None] = field(default_factory=dict)  # NAME: out status(MSGFN)
    #: ``OWNER.FIELD: ...`` clauses, by OWNER (a struct parameter's or a struct type's name)
    fields: dict[str, FieldContract] = field(default_factory=dict)

    def named(self) -> set[str]:
        """Every parameter name the contract mentions."""
        return (set(self.arrays) | set(self.fills) | set(self.handle_outs) | set(self.callbacks)
                | self.releases | self.acquires | self.unsized | set(self.status_outs))

    @property
    def symbols(self) -> set[str]:
        out: set[str] = set()
        for spec in self.arrays.values():
            for d in spec.shape or ():
                out.update(d.symbols)
        for fill in self.fills.values():
            if fill.dim is not None:
                out.update(fill.dim.symbols)
        return out


def _split_top(text: str) -> list[str]:
    """Split at commas outside brackets and parentheses."""
    parts: list[str]
    cur: list[str]
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


def _parse_callback(name: str, inner: str, until: str | None, clause: str, where: str) -> CallbackSpec:
    arrays: dict[str, tuple[Dim, ...]] = {}
    copy, error = False, 0
    for item in _split_top(inner):
        if item == "copy":
            copy = True
            continue
        m = re.fullmatch(r"error\s*=\s*(-?\d+)", item)
        if m:
            error = int(m.group(1))
            continue
        m = re.fullmatch(rf"({_IDENT})\s*:\s*\[(.*)\]", item)
        if not m:
            raise ContractError(f"{where}: cannot read callback argument {item!r} (use 'ARG: [dims]', 'copy', 'error=N')")
        arg, dims = m.groups()
        if arg in arrays:
            raise ContractError(f"{where}: callback argument {arg!r} is described twice")
        arrays[arg] = tuple(_parse_dim(d, where) for d in dims.split(",")) if dims.strip() else ()
        if any(d.expr is not None for d in arrays[arg]):
            raise ContractError(f"{where}: a callback argument's dimensions are products of sizes, not expressions")
    return CallbackSpec(name, arrays, copy, error, until, clause)


_DIM_TOKEN = re.compile(r"\s*(\d+|[A-Za-z_]\w*|//|[-+*/()])")
#: a dimension, or any intermediate value of an expression, is at most this
INT64_MAX = (1 << 63) - 1
#: how long and how deep one dimension's expression may be (a parser's recursion stays small)
_MAX_TOKENS, _MAX_DEPTH = 200, 16


def _parse_dim(text: str, where: str) -> Dim:
    """One dimension: a product of symbols and integers (``b*n``), or an integer
    expression of them with ``+ - * / //`` and parentheses (``n/2 + 1``); ``/`` is
    integer division, as in C on sizes. Constant parts are folded now."""
    text = text.strip()
    if not text:
        raise ContractError(f"{where}: empty dimension")
    tokens: list[str] = []
    pos = 0
    depth = 0
    while pos < len(text):
        m = _DIM_TOKEN.match(text, pos)
        if not m:
            if text[pos:].strip() == "":
                break
            raise ContractError(f"{where}: cannot read dimension {text!r} (use symbols, integers, + - * / // and "
                                f"parentheses)")
        tokens.append(m.group(1))
        pos = m.end()
        tok = tokens[-1]
        depth += 1 if tok == "(" else -1 if tok == ")" else 0
        if depth > _MAX_DEPTH or len(tokens) > _MAX_TOKENS:
            raise ContractError(f"{where}: dimension {text[:60]!r}{'...' if len(text) > 60 else ''} is too "
                                f"{'deep' if depth > _MAX_DEPTH else 'long'} (at most {_MAX_DEPTH} nested parentheses "
                                f"and {_MAX_TOKENS} symbols, numbers and operators): name a parameter for it")
        if tok.isdigit() and int(tok) > INT64_MAX:
            raise ContractError(f"{where}: dimension {text[:60]!r}: {tok} is larger than any array can be "
                                f"(over 2**63 - 1)")
    at = 0

    def bad(why: str) -> ContractError:
        return ContractError(f"{where}: cannot read dimension {text!r}: {why} (use symbols, integers, "
                             f"+ - * / // and parentheses)")

    def atom() -> tuple[Any, ...]:
        nonlocal at
        if at >= len(tokens):
            raise bad("it ends too early")
        tok = tokens[at]
        at += 1
        if tok.isdigit():
            return ("int", int(tok))
        if re.fullmatch(_IDENT, tok):
            return ("sym", tok)
        if tok == "(":
            node = expr()
            if at >= len(tokens) or tokens[at] != ")":
                raise bad("a parenthesis is not closed")
            at += 1
            return node
        raise bad(f"unexpected {tok!r}")

    def term() -> tuple[Any, ...]:
        nonlocal at
        node = atom()
        while at < len(tokens) and tokens[at] in ("*", "/", "//"):
            op = "*" if tokens[at] == "*" else "//"
            at += 1
            node = (op, node, atom())
        return node

    def expr() -> tuple[Any, ...]:
        nonlocal at
        node = term()
        while at < len(tokens) and tokens[at] in ("+", "-"):
            op = tokens[at]
            at += 1
            node = (op, node, term())
        return node

    tree = expr()
    if at != len(tokens):
        raise bad(f"unexpected {tokens[at]!r}")
    symbols: list[str] = []

    def product(node: tuple[Any, ...]) -> int | None:
        """The factor of a pure product of symbols and integers (symbols collected), else None."""
        if node[0] == "int":
            return int(node[1])
        if node[0] == "sym":
            symbols.append(node[1])
            return 1
        if node[0] == "*":
            a, b = product(node[1]), product(node[2])
            return None if a is None or b is None else a * b
        return None

    factor = product(tree)
    if factor is not None:
        if abs(factor) > INT64_MAX:
            raise ContractError(f"{where}: dimension {text!r}: its constant factor {factor} is larger than any array "
                                f"can be (over 2**63 - 1)")
        if factor == 0 and symbols:
            raise ContractError(f"{where}: dimension {text!r} is always 0; write 0 if that is meant")
        return Dim(tuple(symbols), factor)
    names: list[str] = []

    def collect(node: tuple[Any, ...]) -> None:
        if node[0] == "sym":
            if node[1] not in names:
                names.append(node[1])
        elif node[0] != "int":
            collect(node[1])
            collect(node[2])

    collect(tree)
    if not names:
        try:
            value = eval_dim(tree, {})
        except ValueError as exc:
            raise ContractError(f"{where}: dimension {text!r}: {exc}") from None
        return Dim((), value)
    return Dim(tuple(names), 1, tree, " ".join(text.split()))


def parse_contract(text: str | None) -> Contract:
    """Parse a contract string (see the module docstring). ``None`` is the empty contract."""
    contract = Contract(source=text or "")
    if not text:
        return contract
    for raw in re.split(r"[;\n]", text):
        clause = raw.strip()
        if not clause:
            continue
        where = f"contract clause {clause!r}"
        m = _FIELD.match(clause)
        if m:
            owner, name, rest = m.groups()
            part = parse_struct_contract(f"{name}:{rest}", f"'{owner}'")
            have = contract.fields.setdefault(owner, FieldContract())
            if name in have.arrays or name in have.unsized:
                raise ContractError(f"{where}: field {name!r} of {owner!r} is described twice")
            have.arrays.update({k: ArraySpec(k, v.role, v.shape, v.optional, clause) for k, v in part.arrays.items()})
            have.unsized |= part.unsized
            have.source = "; ".join(t for t in (have.source, clause) if t)
            continue
        m = _RETURN.match(clause)
        if m:
            kind, arg = m.groups()
            if kind == "handle":
                if arg is None:
                    raise ContractError(f"{where}: a handle needs its destructor: 'return: handle(close_fn)'")
                contract.returns_handle = arg
                contract.returns = "value"
                continue
            if kind not in RETURNS:
                raise ContractError(f"{where}: return must be one of {', '.join(RETURNS)} or handle(DESTROY)")
            if arg is not None and kind not in ("status", "count"):
                raise ContractError(f"{where}: only 'return: status(MSGFN)' and 'count(MSGFN)' take a function")
            contract.returns = kind
            contract.status_message = arg
            continue
        m = _KEEP.match(clause)
        if m:
            name, role, dims, until = m.groups()
            if name in contract.arrays:
                raise ContractError(f"{where}: {name!r} is described twice")
            shape = tuple(_parse_dim(d, where) for d in _split_top(dims)) if dims.strip() else ()
            contract.arrays[name] = ArraySpec(name, role, shape, False, clause, until)
            continue
        m = _HANDLE_OUT.match(clause)
        if m:
            contract.handle_outs[m.group(1)] = m.group(2)
            continue
        m = _STATUS_OUT.match(clause)
        if m:
            if m.group(1) in contract.status_outs:
                raise ContractError(f"{where}: {m.group(1)!r} is described twice")
            contract.status_outs[m.group(1)] = m.group(2)
            continue
        m = _MARK.match(clause)
        if m:
            {"release": contract.releases, "acquire": contract.acquires, "unsized": contract.unsized}[m.group(2)].add(
                m.group(1))
            continue
        m = _CALLBACK.match(clause)
        if m:
            name, inner, until = m.groups()
            contract.callbacks[name] = _parse_callback(name, inner, until, clause, where)
            continue
        m = _ARRAY.match(clause)
        if m:
            name, role, opt1, opt2, dims = m.groups()
            shape = tuple(_parse_dim(d, where) for d in _split_top(dims)) if dims.strip() else ()
            if name in contract.arrays:
                raise ContractError(f"{where}: {name!r} is described twice")
            contract.arrays[name] = ArraySpec(name, role, shape, bool(opt1 or opt2), clause)
            continue
        m = _OPTIONAL.match(clause)
        if m:
            name = m.group(1)
            if name in contract.arrays:
                raise ContractError(f"{where}: {name!r} is described twice")
            contract.arrays[name] = ArraySpec(name, None, None, True, clause)
            continue
        m = _FILL.match(clause)
        if m:
            param, expr = m.groups()
            expr = expr.strip()
            nm = re.fullmatch(rf"numel\(\s*({_IDENT})\s*\)", expr)
            if nm:
                fill = Fill(param, numel_of=nm.group(1), clause=clause)
            elif expr.isdigit():  # a constant: the plan checks it against the parameter's C type
                fill = Fill(param, dim=Dim((), int(expr)), clause=clause)
            else:
                fill = Fill(param, dim=_parse_dim(expr, where), clause=clause)
            if param in contract.fills:
                raise ContractError(f"{where}: {param!r} is filled in twice")
            contract.fills[param] = fill
            continue
        raise ContractError(
            f"{where}: expected 'NAME: [dims]', 'NAME: out [dims]', 'NAME: ?', 'PARAM = EXPR', 'return: status', "
            f"'NAME: keep [dims] until H', 'NAME: out handle(DESTROY)', 'NAME: out status(MSGFN)', "
            f"'NAME: callback(...)', 'NAME: release' "
            f"'NAME: acquire' or 'NAME: unsized'"
        )
    return contract



def parse_struct_contract(text: str | None, owner: str = "the struct") -> FieldContract:
    """Parse the contract of a struct's pointer fields (``contracts={"SRC_DATA":
    "data_in: [input_frames, _ch]; data_out: [output_frames, _ch]"}``): clauses
    ``FIELD: [dims]``, ``FIELD: in [dims]`` (C only reads a field declared without
    ``const``), ``FIELD: ?`` (may be NULL) and ``FIELD: unsized``. Which names a
    shape may use is checked where a function takes the struct (see
    :func:`tensorffi.plan.struct_fields`)."""
    out = FieldContract(source=text or "")
    for raw in re.split(r"[;\n]", text or ""):
        clause = raw.strip()
        if not clause:
            continue
        where = f"contract clause {clause!r} of {owner}"
        part = parse_contract(clause)
        if part.fields:
            raise ContractError(f"{where}: a field's shape cannot describe another struct's fields "
                                f"(give that struct its own contract)")
        if part.unsized:
            out.unsized |= part.unsized
            continue
        spec = next(iter(part.arrays.values()), None)
        if spec is None or len(part.named()) != 1 or spec.until is not None:
            raise ContractError(f"{where}: a struct's contract says what its pointer fields hold: 'FIELD: [dims]', "
                                f"'FIELD: in [dims]', 'FIELD: ?' or 'FIELD: unsized'")
        if spec.role == "out":
            raise ContractError(f"{where}: a struct field is given by the caller, it cannot be 'out' (C writes a "
                                f"field declared without const: 'FIELD: [dims]')")
        if spec.name in out.arrays or spec.name in out.unsized:
            raise ContractError(f"{where}: field {spec.name!r} is described twice")
        out.arrays[spec.name] = ArraySpec(spec.name, spec.role, spec.shape, spec.optional, clause)
    return out


def eval_dim(tree: tuple[Any, ...], values: Any) -> Any:
    """The value of expression ``tree`` (see :class:`~tensorffi.contract.Dim`) for the symbols' ``values``
    (a mapping). Every intermediate value must be a size: a ValueError says which
    part went below 0, divided by 0 or passed ``INT64_MAX``. This is the one place
    the expression's arithmetic is defined (contract parsing folds constants with it;
    the plan's call paths call it)."""
    op = tree[0]
    if op == "int":
        return tree[1]
    if op == "sym":
        return values[tree[1]]
    a, b = eval_dim(tree[1], values), eval_dim(tree[2], values)
    if op == "+":
        r = a + b
    elif op == "-":
        r = a - b
    elif op == "*":
        r = a * b
    else:
        if b == 0:
            raise ValueError(f"{_tree_text(tree)} divides by 0 ({_tree_text(tree[2])} = 0)")
        r = a // b
    if r < 0:
        raise ValueError(f"{_tree_text(tree)} = {a} {op if op != '//' else '/'} {b} = {r} is negative: "
                         f"no array has that many elements")
    if r > INT64_MAX:
        raise ValueError(f"{_tree_text(tree)} = {r} is larger than any array can be (over 2**63 - 1)")
    return r


def _tree_text(tree: tuple[Any, ...]) -> str:
    op = tree[0]
    if op in ("int", "sym"):
        return str(tree[1])
    return f"({_tree_text(tree[1])} {'/' if op == '//' else op} {_tree_text(tree[2])})"

__all__ = ["parse_contract", "parse_struct_contract", "eval_dim", "Contract", "FieldContract", "ArraySpec", "Fill", "Dim", "CallbackSpec", "ROLES", "RETURNS"]


def __dir__() -> list[str]:
    return sorted(__all__)  # the API only: tab completion does not offer imports (np, torch, ...)
