# SPDX-License-Identifier: MIT
"""How tensorffi's objects look to a person: text reprs and HTML for notebooks.

A bound function stays the plain generated Python function the bridge made (its
call is a direct call: nothing here runs per call). :func:`decorate` only sets
attributes on it once, when it is bound: ``__signature__`` (the same parameters,
annotated with their C types, so ``help()``, IPython and Jupyter's tooltips show
them), ``__doc__`` (the full description) and ``_repr_html_`` (what Jupyter shows
for ``lib.f`` on its own in a cell). :func:`tensorffi.describe` (in
:mod:`tensorffi.library`) returns the same description as an object, for a plain
``print`` or a notebook. Everything here renders plain objects by their attributes
(duck-typed): this module imports neither the bridge nor the library.

>>> import tensorffi
>>> lib = tensorffi.compile("display_doc", source='''
... #include <stdint.h>
... void axpy(double a, const double *x, double *y, int64_t n) {
...     for (int64_t i = 0; i < n; i++) y[i] += a * x[i];
... }''', contracts={"axpy": "x: [n]; y: [n]"})
>>> print(tensorffi.describe(lib.axpy))
axpy(a, x, y, *, n=None) -> None
  C:        void axpy(double a, const double *x, double *y, int64_t n)
  contract: x: [n]; y: [n]
  a  double           scalar  float (C double)
  x  const double *   in      float64 [n]
  y  double *         inout   float64 [n], written in place
  n  int64_t          filled  from the shapes
"""
from __future__ import annotations

import html
from typing import Any, Callable

__all__ = ["decorate", "FunctionView", "LibraryView", "Info", "info_text", "handle_html"]

_CSS = (
    "<style>.tf-box{font-family:var(--jp-code-font-family,monospace);font-size:12px}"
    ".tf-box table{border-collapse:collapse;margin:2px 0}"
    ".tf-box td,.tf-box th{padding:1px 8px;text-align:left;border:none;vertical-align:top}"
    ".tf-box th{font-weight:600}.tf-muted{opacity:.7}</style>"
)


def _e(text: Any) -> str:
    return html.escape(str(text), quote=False)


# --------------------------------------------------------------------------- #
# Bound functions                                                              #
# --------------------------------------------------------------------------- #


def _bridge_of(fn: Any) -> Any:
    """The bridge's record of a bound function (duck-typed: what the bridge sets as
    ``__wrapped_bridge__``, with its ``plan``, ``decl`` and ``contract``), else None."""
    bf = getattr(fn, "__wrapped_bridge__", None)
    return bf if all(hasattr(bf, a) for a in ("plan", "decl", "contract")) else None


def _role_rows(plan: Any) -> list[tuple[str, str, str, str]]:
    """(name, C type, role, details) per parameter, then the free sizes."""
    rows = []
    for p in plan.params:
        if p.kind == "array":
            role = p.role + ("?" if p.optional else "")
            shape = "" if p.shape is None else " [" + ", ".join(map(str, p.shape)) + "]"
            dtype = "any dtype" if p.dtype == "any" else p.dtype
            what = f"{dtype}{shape}" + (" bytes" if p.dtype == "any" and p.shape is not None else "")
            if p.role == "out":
                what += ", allocated and returned"
            elif p.role == "inout":
                what += ", written in place"
            if p.optional:
                what += ", or None (NULL)"
            if p.keep_until == "return":
                what += ", kept by C while the returned handle lives (it holds the array)"
            elif p.keep_until:
                what += f", kept by C while '{p.keep_until}' lives"
            if p.min_len:
                unit = " bytes" if p.min_len_bytes else " elements"
                what += f", at least {' * '.join(repr(q) for q in p.min_len)}{unit} (inferred from the names)"
            elif p.dtype == "any" and p.shape is None and p.role != "out":
                what += f", length not checked (void *: user data, a handle or a buffer; '{p.name}: [nbytes]' checks one)"
            elif p.unchecked:
                what += (f", UNCHECKED length (C may access past its end: '{p.name}: [dims]' in the contract, "
                         f"or '{p.name}: unsized')")
        elif p.kind == "handle_out":
            role, what = "out", f"a tensorffi.Handle, returned (closed by {p.destroy})"
        elif p.kind == "status_out":
            role, what = "error", "a code C stores: non-zero raises" + (f" ({p.message}'s message)" if p.message else "")
        elif p.kind == "callback" and p.release:
            role, what = "release", "the Python callable registered before: its registration ends"
        elif p.kind == "callback":
            role, what = "callback", "a Python callable (may be called from C threads)"
            if p.held_by is not None:
                what += ", kept while the handle this call gives back lives"
            elif p.callback is not None and p.callback.until:
                what += f", kept while '{p.callback.until}' lives"
        elif p.fill is not None:
            src = f"numel({p.fill.numel_of})" if p.fill.numel_of else str(p.fill.dim)
            role, what = "filled", f"= {src}"
        elif p.is_symbol:
            role, what = "filled", "from the shapes"
        elif p.kind == "scalar":
            kind = p.scalar or "value"
            role, what = "scalar", f"{kind} (C {p.ctype.replace('const ', '')})" if kind != "value" else p.ctype
        elif p.kind == "string":
            role, what = "in", "str or bytes" + (", or None" if p.optional else "")
        elif p.kind == "struct":
            role, what = "struct", "lib.struct(...) or a tensorffi.Handle" + (", or None" if p.optional else "")
            if p.closes:
                what += "; a Handle passed here is closed (this is its destructor)"
            if p.fields is not None and p.fields.checks:
                what += "; fields checked at every call: " + p.fields.text()
        else:
            role, what = "raw", "passed to cffi as is"
        rows.append((p.name, p.ctype, role, what))
    for s in plan.free_sizes:
        rows.append((s, "size", "keyword", "a size no input fixes: pass it by name"))
    return rows


def _returns(plan: Any) -> str:
    """What a call returns, in Python terms."""
    parts = []
    result_type = plan.decl.result.text
    if plan.returns == "value" and result_type != "void":
        parts.append("str" if plan.result_is_string else f"the C result ({result_type})")
    elif plan.returns == "count":
        parts.append("the C result (a count; negative raises)")
    elif plan.returns == "handle":
        parts.append(f"a tensorffi.Handle (closed by {plan.returns_handle})")
    for p in plan.params:
        if p.kind == "array" and p.role == "out":
            shape = "" if p.shape is None else " [" + ", ".join(map(str, p.shape)) + "]"
            parts.append(f"{p.pyname}: {p.dtype}{shape}")
        elif p.kind == "handle_out":
            parts.append(f"{p.pyname} (Handle)")
    text = "None" if not parts else parts[0] if len(parts) == 1 else "(" + ", ".join(parts) + ")"
    if plan.returns == "status":
        text += "; a non-zero C status raises"
    return text


class FunctionView:
    """The description of a bound function: ``print`` it, or show it in a notebook."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        bf = _bridge_of(fn)
        if bf is None:
            raise TypeError(f"expected a function bound by tensorffi (lib.f of tensorffi.load/compile), got {fn!r}")
        self.function = fn
        self.bound = bf
        plan = bf.plan
        self.name = plan.name
        self.declaration = bf.decl.text
        self.contract = bf.contract.source or ""
        self.call = plan.signature_text()
        self.returns = _returns(plan)
        self.rows = _role_rows(plan)
        self.full_form = plan.has_full_form

    def __str__(self) -> str:
        lines = [f"{self.call} -> {self.returns}", f"  C:        {self.declaration}"]
        if self.contract:
            lines.append(f"  contract: {self.contract}")
        if self.rows:
            w = [max(len(r[i]) for r in self.rows) for i in range(3)]
            for name, ctype, role, what in self.rows:
                lines.append(f"  {name:<{w[0]}}  {ctype:<{w[1]}}   {role:<{w[2]}}  {what}".rstrip())
        return "\n".join(lines)

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><td><b>{_e(n)}</b></td><td>{_e(c)}</td><td>{_e(r)}</td><td>{_e(w)}</td></tr>"
            for n, c, r, w in self.rows
        )
        contract = f"<div>contract: <code>{_e(self.contract)}</code></div>" if self.contract else ""
        table = (f"<table><tr><th>argument</th><th>C type</th><th>role</th><th>dtype, shape</th></tr>{rows}</table>"
                 if rows else "")
        return (
            f"{_CSS}<div class='tf-box'><div><b>{_e(self.call)}</b> &rarr; {_e(self.returns)}</div>"
            f"<div class='tf-muted'>C: <code>{_e(self.declaration)}</code></div>{contract}{table}</div>"
        )


def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Give a bound function its description (attributes only; its call is unchanged)."""
    view = FunctionView(fn)  # (its __signature__, a stub's, is the bridge's: tensorffi.plan.python_signature)
    full = ""
    if view.full_form:
        allnames = ", ".join(p.pyname for p in view.bound.plan.params)
        full = f"\n\nAlso callable as the C declaration reads: {view.name}({allnames})."
    fn.__doc__ = f"Bound C function.\n\n{view}{full}"
    fn._repr_html_ = view._repr_html_  # type: ignore[attr-defined]
    return fn


# --------------------------------------------------------------------------- #
# Libraries                                                                    #
# --------------------------------------------------------------------------- #


class LibraryView:
    """A library's functions with their C declarations and calling forms."""

    MAX_TEXT = 30  # functions listed in the text form

    def __init__(self, lib: Any) -> None:
        self.title = f"tensorffi.Library {lib.__dict__.get('_description') or '?'}"
        bound = lib.__dict__.get("_bound")
        self.opened = bound is not None
        self.views = [FunctionView(fn) for fn in (bound or {}).values()]

    def __str__(self) -> str:
        if not self.opened:
            return f"<{self.title}: not opened yet>"
        n = len(self.views)
        head = f"<{self.title}: {n} function{'s' if n != 1 else ''}"
        if not n:
            return head + ">"
        shown = self.views[: self.MAX_TEXT]
        w = max(len(v.call) for v in shown)
        lines = [head]
        for v in shown:
            lines.append(f"  {v.call:<{w}}  # {v.declaration}" + (f"  [{v.contract}]" if v.contract else ""))
        if n > len(shown):
            lines.append(f"  ... and {n - len(shown)} more (lib.functions)")
        return "\n".join(lines) + "\n>"

    __repr__ = __str__

    def _repr_html_(self) -> str:
        if not self.opened:
            return f"{_CSS}<div class='tf-box'>{_e(self.title)}: not opened yet</div>"
        rows = "".join(
            f"<tr><td><b>{_e(v.call)}</b></td><td>{_e(v.returns)}</td><td><code>{_e(v.declaration)}</code></td>"
            f"<td><code>{_e(v.contract)}</code></td></tr>"
            for v in self.views
        )
        n = len(self.views)
        return (
            f"{_CSS}<div class='tf-box'><div><b>{_e(self.title)}</b> &mdash; {n} function{'s' if n != 1 else ''}"
            f"</div><table><tr><th>call</th><th>returns</th><th>C declaration</th><th>contract</th></tr>{rows}"
            f"</table><div class='tf-muted'>tensorffi.describe(lib.NAME) shows each argument's role</div></div>"
        )


# --------------------------------------------------------------------------- #
# info() and handles                                                           #
# --------------------------------------------------------------------------- #

_INFO_LABELS = {
    "version": "version",
    "native_version": "native module version",
    "compiler": "compiler",
    "build_flags": "build flags",
    "native_build": "built for this CPU only",
    "simd": "SIMD level",
    "cpu_count": "CPUs",
    "threads": "threads (default)",
    "threads_from": "threads from",
    "bridge": "call path",
}


def _info_rows(facts: dict[str, Any]) -> list[tuple[str, str]]:
    rows = []
    for key, value in facts.items():
        label = _INFO_LABELS.get(key)
        if label is None and key.startswith("simd_"):
            label = f"SIMD level of {key[5:]}"
        if isinstance(value, bool):
            value = "yes" if value else "no"
        rows.append((label or key.replace("_", " "), str(value)))
    return rows


def info_text(facts: dict[str, Any]) -> str:
    """``tensorffi.info()`` as aligned lines (what ``tensorffi info`` prints)."""
    rows = _info_rows(facts)
    w = max((len(k) for k, _ in rows), default=0)
    return "\n".join(f"{k:<{w}}  {v}" for k, v in rows)


class Info(dict):  # type: ignore[type-arg]
    """``tensorffi.info()``: a plain ``dict`` (JSON-ready) that a notebook shows as a table."""

    def _repr_html_(self) -> str:
        rows = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in _info_rows(self))
        return f"{_CSS}<div class='tf-box'><b>tensorffi</b><table>{rows}</table></div>"


def handle_html(handle: Any) -> str:
    state = "closed" if handle.closed else "open"
    kept = len(handle._state.kept)
    extra = f", keeps {kept} object{'s' if kept != 1 else ''} alive for C" if kept and not handle.closed else ""
    addr = f" at {handle.address:#x}" if not handle.closed else ""
    return (f"{_CSS}<div class='tf-box'><b>tensorffi.Handle</b> {_e(handle._state.name)} "
            f"(<code>{_e(handle.ctype)}</code>){_e(addr)}: <b>{state}</b>{_e(extra)}</div>")
