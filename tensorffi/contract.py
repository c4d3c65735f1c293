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
``return: status|value|none``
    ``status``: a non-zero result is an error (raised as an exception); ``value``:
    the result is returned; ``none``: it is ignored.

A dimension is a symbol, an integer, or ``SYMBOL*K``. A symbol fixed by no input
array (it appears only in ``out`` shapes) becomes a required keyword argument of
the bound function. A symbol named like an integer parameter binds that parameter.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from .errors import ContractError

ROLES = ("in", "out", "inout")
RETURNS = ("status", "value", "none")

_IDENT = r"[A-Za-z_]\w*"
_ARRAY = re.compile(rf"^({_IDENT})\s*:\s*(?:(in|out|inout)(\?)?)?\s*(\?)?\s*\[(.*)\]$")
_OPTIONAL = re.compile(rf"^({_IDENT})\s*:\s*(?:in\s*\?|\?|optional)$")
_FILL = re.compile(rf"^({_IDENT})\s*=\s*(.+)$")
_RETURN = re.compile(r"^(?:return|->)\s*:?\s*(\w+)$")


@dataclass(frozen=True)
class Dim:
    """One dimension: product of ``factor`` and the symbols in ``symbols``."""

    symbols: tuple[str, ...] = ()
    factor: int = 1

    def __str__(self) -> str:
        parts = ([str(self.factor)] if self.factor != 1 or not self.symbols else []) + list(self.symbols)
        return "*".join(parts)


@dataclass(frozen=True)
class ArraySpec:
    name: str
    role: str | None  # None: from the declaration
    shape: tuple[Dim, ...] | None  # None: no shape declared (``NAME: ?``)
    optional: bool = False
    clause: str = field(default="", compare=False)  # the text it came from, for errors


@dataclass(frozen=True)
class Fill:
    """``param = expr``: expr is a Dim, or numel of an array."""

    param: str
    dim: Dim | None = None
    numel_of: str | None = None
    clause: str = field(default="", compare=False)


@dataclass
class Contract:
    arrays: dict[str, ArraySpec] = field(default_factory=dict)
    fills: dict[str, Fill] = field(default_factory=dict)
    returns: str | None = None
    source: str = ""

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


def _parse_dim(text: str, where: str) -> Dim:
    text = text.strip()
    if not text:
        raise ContractError(f"{where}: empty dimension")
    symbols: list[str] = []
    factor = 1
    for part in text.split("*"):
        part = part.strip()
        if re.fullmatch(r"\d+", part):
            factor *= int(part)
        elif re.fullmatch(_IDENT, part):
            symbols.append(part)
        else:
            raise ContractError(f"{where}: cannot read dimension {text!r} (use symbols, integers and '*')")
    if factor == 0 and symbols:
        raise ContractError(f"{where}: dimension {text!r} is always 0; write 0 if that is meant")
    return Dim(tuple(symbols), factor)


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
        m = _RETURN.match(clause)
        if m:
            if m.group(1) not in RETURNS:
                raise ContractError(f"{where}: return must be one of {', '.join(RETURNS)}")
            contract.returns = m.group(1)
            continue
        m = _ARRAY.match(clause)
        if m:
            name, role, opt1, opt2, dims = m.groups()
            shape = tuple(_parse_dim(d, where) for d in dims.split(",")) if dims.strip() else ()
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
            fill = Fill(param, numel_of=nm.group(1), clause=clause) if nm else Fill(param, dim=_parse_dim(expr, where), clause=clause)
            if param in contract.fills:
                raise ContractError(f"{where}: {param!r} is filled in twice")
            contract.fills[param] = fill
            continue
        raise ContractError(
            f"{where}: expected 'NAME: [dims]', 'NAME: out [dims]', 'NAME: ?', 'PARAM = EXPR' or 'return: status'"
        )
    return contract
