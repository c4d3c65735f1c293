# SPDX-License-Identifier: MIT
"""IPython and Jupyter: C in a cell, bound to tensors.

Load the extension once per kernel, then write C in a cell::

    %load_ext tensorffi

    %%tensorffi mylib -c "scale: x: [n]; y: out [n]"
    #include <stdint.h>
    void scale(const float *x, float *y, int64_t n, float a) {
        for (int64_t i = 0; i < n; i++) y[i] = a * x[i];
    }

and call it on tensors in the next cell: ``y = scale(torch.randn(5), 2.0)``.

The cell is compiled by :func:`tensorffi.compile` (``source=`` the cell, no cdef:
the declarations are read from the C, with ``const`` kept, so ``const float *x``
is an input). Every function the cell defines with external linkage (not
``static``) is bound and placed in the notebook's namespace under its own name;
the :class:`~tensorffi.Library` too, under the name given on the magic line.

Options of ``%%tensorffi [NAME]``:

* ``-c "FUNC: CONTRACT"`` (repeatable): the contract of one function, e.g.
  ``-c "scale: x: [n]; y: out [n]"``; or ``-c VAR``, a dict ``{func: contract}`` in
  the namespace;
* ``--cflags "-O2 -march=native"`` (default ``-O3``), ``--ldflags``, ``-l m``
  (libraries to link, repeatable), ``-I DIR``, ``-L DIR``, ``-D NAME[=VALUE]``;
* ``--op [FUNC=]NS::NAME`` (repeatable): register a function as the PyTorch
  operator ``torch.ops.NS.NAME`` (:func:`tensorffi.ops.register`); ``FUNC``
  defaults to ``NAME``. ``--backward FUNC=BACKWARD`` gives it a C backward;
* ``--returns status``: an ``int`` result means a status (non-zero raises);
* ``--cpp``: the cell is C++ (compiled with ``$CXX``; its ``extern "C"`` functions
  are bound, and a C++ exception they throw is raised as a ``NativeError``);
* ``-q``: show nothing when it works.

Compiler errors point at the cell's own lines (the ``%%tensorffi`` line is line
1), with the offending line shown, and no Python traceback. Running an unchanged
cell again is a cache hit (the same functions, in a few milliseconds); an edited
cell is rebuilt and rebound. PyTorch cannot redefine an operator in a running
process: an operator registered by an earlier version of the cell stays as it
was (the magic says so; restart the kernel, or use a new operator name).

The line magic: ``%tensorffi info`` (build facts), ``%tensorffi cache`` (the
modules in the compile cache), ``%tensorffi cache clear``.
"""
from __future__ import annotations

import re
import time
from typing import Any, cast

from IPython.core import magic_arguments
from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class

from . import _display
from . import cache as _cache
from .contract import parse_contract
from .errors import BuildError, TensorFFIError

__all__ = ["TensorFFIMagics", "load_ipython_extension", "SOURCE_NAME"]

#: The name compiler messages give the cell.
SOURCE_NAME = "<cell>"

_DIAGNOSTIC = re.compile(r"^" + re.escape(SOURCE_NAME) + r":(\d+):(\d+): (error|warning|note|fatal error): ")


def _with_source_lines(output: str, lines: list[str]) -> str:
    """Compiler output with the cell's offending line (and a caret) under each
    diagnostic that points into the cell."""
    out = []
    for msg in output.splitlines():
        out.append(msg)
        m = _DIAGNOSTIC.match(msg)
        if m and m.group(3) != "note":
            row, col = int(m.group(1)), int(m.group(2))
            if 1 <= row <= len(lines):
                text = lines[row - 1].expandtabs(1)
                out.append(f"  {row:>4} | {text}")
                out.append(f"       | {' ' * max(col - 1, 0)}^")
    return "\n".join(out)


def _clean(exc: BaseException, headline: str, body: str = "") -> BaseException:
    """``exc`` shown by IPython as ``headline`` and ``body`` alone, without the
    magic's internal frames (IPython calls ``_render_traceback_`` when present)."""
    red, reset = "\x1b[0;31m", "\x1b[0m"
    lines = [f"{red}{type(exc).__name__}{reset}: {headline}"] + ([body] if body else [])
    exc._render_traceback_ = lambda: lines  # type: ignore[attr-defined]
    return exc.with_traceback(None)


def _unquote(text: str) -> str:
    """IPython's magic arguments keep the quotes around a value (``-c 'f: x: [n]'``)."""
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def _unquote_args(args: Any) -> None:
    for name, value in vars(args).items():
        if isinstance(value, str):
            setattr(args, name, _unquote(value))
        elif isinstance(value, list):
            setattr(args, name, [_unquote(v) if isinstance(v, str) else v for v in value])


def _parse_contracts(specs: list[str], namespace: dict[str, Any]) -> dict[str, str]:
    contracts: dict[str, str] = {}
    for spec in specs:
        spec = spec.strip()
        if spec.isidentifier() and ":" not in spec:
            value = namespace.get(spec)
            if not isinstance(value, dict):
                raise UsageError(
                    f"-c {spec}: expected 'FUNC: CONTRACT' (e.g. -c \"scale: x: [n]; y: out [n]\") or the name "
                    f"of a dict {{func: contract}} in the namespace; {spec!r} is "
                    + ("not defined" if value is None else f"a {type(value).__name__}")
                )
            for k, v in value.items():
                if not isinstance(k, str) or not isinstance(v, str):
                    raise UsageError(
                        f"-c {spec}: {spec}[{k!r}] must map a function (or struct type) name to a contract string, "
                        f"got {type(k).__name__} -> {type(v).__name__} ({v!r})")
                contracts[k] = v
            continue
        func, sep, text = spec.partition(":")
        func = func.strip()
        if not sep or not func.isidentifier():
            raise UsageError(
                f"-c {spec!r}: expected 'FUNC: CONTRACT', the function's name first, e.g. -c \"scale: x: [n]; y: out [n]\""
            )
        if func in contracts:
            contracts[func] = contracts[func] + "; " + text.strip()
        else:
            contracts[func] = text.strip()
    return contracts


def _parse_ops(specs: list[str]) -> list[tuple[str, str]]:
    ops = []
    for spec in specs:
        func, sep, qualname = spec.partition("=")
        if not sep:
            func, qualname = spec.rpartition("::")[2], spec
        if not re.match(r"^[A-Za-z_]\w*::[A-Za-z_]\w*$", qualname.strip()) or not func.strip().isidentifier():
            raise UsageError(f"--op {spec!r}: expected NS::NAME (the function NAME) or FUNC=NS::NAME, e.g. --op mylib::scale")
        ops.append((func.strip(), qualname.strip()))
    return ops


def _pairs(specs: list[str], option: str) -> dict[str, str]:
    out = {}
    for spec in specs:
        k, sep, v = spec.partition("=")
        if not sep or not k.strip().isidentifier() or not v.strip().isidentifier():
            raise UsageError(f"{option} {spec!r}: expected FUNC=OTHER, e.g. {option} f=f_backward")
        out[k.strip()] = v.strip()
    return out


def _module_key(lib: Any) -> str | None:
    """The cache key of the module a compile() Library was opened from."""
    reopen = lib.__dict__.get("_reopen")
    try:
        return cast("str | None", reopen[1][1]["key"])  # (_deferred, (opener, state, description), {})
    except (TypeError, IndexError, KeyError):  # pragma: no cover - not a compile() handle
        return None


class _CellView(_display.LibraryView):
    """What a cell shows when it has been compiled and bound."""

    def __init__(self, lib: Any, note: str, warnings: list[str]) -> None:
        super().__init__(lib)
        self.note = note
        self.warnings = warnings

    def __str__(self) -> str:
        return "\n".join([*self.warnings, self.note, super().__str__()])

    __repr__ = __str__

    def _repr_html_(self) -> str:
        warn = "".join(f"<div style='color:#b45309'>{_display._e(w)}</div>" for w in self.warnings)
        return f"{warn}<div class='tf-box tf-muted'>{_display._e(self.note)}</div>" + super()._repr_html_()


@magics_class
class TensorFFIMagics(Magics):
    """``%%tensorffi`` (C in a cell) and ``%tensorffi`` (info, cache)."""

    def __init__(self, shell: Any) -> None:
        super().__init__(shell)
        # (module key, contracts, returns) -> Library: an unchanged cell keeps its functions
        self._libraries: dict[tuple[Any, ...], Any] = {}
        # operator name -> (module key, function) it was registered from
        self._ops: dict[str, tuple[Any, str]] = {}

    @magic_arguments.magic_arguments()
    @magic_arguments.argument("name", nargs="?", default=None,
                              help="the name of the Library in the namespace (each function is bound by its own name)")
    @magic_arguments.argument("-c", "--contract", action="append", default=[], metavar="'FUNC: CONTRACT'",
                              help="a function's contract, e.g. -c \"scale: x: [n]; y: out [n]\" (repeatable), "
                                   "or the name of a dict {func: contract} in the namespace")
    @magic_arguments.argument("--cflags", default=None, help="compiler flags (default: -O3)")
    @magic_arguments.argument("--ldflags", default=None, help="linker flags")
    @magic_arguments.argument("-l", "--lib", action="append", default=[], dest="libraries", metavar="LIB",
                              help="a library to link, e.g. -l m (repeatable)")
    @magic_arguments.argument("-I", "--include", action="append", default=[], dest="include_dirs", metavar="DIR",
                              help="an include directory (repeatable)")
    @magic_arguments.argument("-L", "--libdir", action="append", default=[], dest="library_dirs", metavar="DIR",
                              help="a library directory (repeatable)")
    @magic_arguments.argument("-D", "--define", action="append", default=[], metavar="NAME[=VALUE]",
                              help="a preprocessor macro (repeatable)")
    @magic_arguments.argument("--op", action="append", default=[], metavar="[FUNC=]NS::NAME",
                              help="register a function as the operator torch.ops.NS.NAME (repeatable)")
    @magic_arguments.argument("--backward", action="append", default=[], metavar="FUNC=BACKWARD",
                              help="the C backward of an operator's function (repeatable)")
    @magic_arguments.argument("--returns", choices=["value", "status"], default="value",
                              help="what an int result means where no contract says (default: value)")
    @magic_arguments.argument("--cpp", action="store_true",
                              help='the cell is C++: its extern "C" functions are bound, exceptions become NativeError')
    @magic_arguments.argument("-q", "--quiet", action="store_true", help="show nothing when it works")
    @line_cell_magic
    def tensorffi(self, line: str, cell: str | None = None) -> Any:
        """%%tensorffi [NAME] [options]: compile the cell's C and bind its functions
        (see tensorffi.magic); %tensorffi info | cache [clear]."""
        if cell is None:
            return self._line(line)
        args = magic_arguments.parse_argstring(self.tensorffi, line)
        _unquote_args(args)
        return self._cell(args, cell)

    # -- %tensorffi ------------------------------------------------------------ #

    def _line(self, line: str) -> Any:
        from .cache import cache_command
        from .core import info

        words = line.split()
        if words == ["info"]:
            return _display.Info(info())
        if words in (["cache"], ["cache", "list"], ["cache", "clear"], ["cache", "path"]):
            cache_command(words[1] if len(words) > 1 else "list", None)
            return None
        raise UsageError(
            "%tensorffi info | cache [list|clear|path]   (C in a cell: %%tensorffi [NAME] [-c 'FUNC: CONTRACT'] ..., "
            "see %%tensorffi?)"
        )

    # -- %%tensorffi ----------------------------------------------------------- #

    def _cell(self, args: Any, cell: str) -> Any:
        from . import ops
        from .byo import compile as _compile

        ns = self.shell.user_ns
        if args.name is not None and not args.name.isidentifier():
            raise UsageError(f"%%tensorffi {args.name}: the Library's name must be a Python identifier")
        contracts = _parse_contracts(args.contract, ns)
        for func, text in contracts.items():
            try:
                parse_contract(text)
            except TensorFFIError as exc:
                raise _clean(exc, f"the contract of {func} ({text!r}): {exc}") from None
        op_specs = _parse_ops(args.op)
        backwards = _pairs(args.backward, "--backward")
        defines = [(d.partition("=")[0], d.partition("=")[2] or None) for d in args.define]
        source = "\n" + cell  # the %%tensorffi line is line 1: compiler lines are the cell's
        t0 = time.perf_counter()
        start = time.time()
        try:
            lib = _compile(
                args.name or "cell",
                source=source,
                source_name=SOURCE_NAME,
                contracts=contracts,
                returns=args.returns,
                libraries=args.libraries,
                include_dirs=args.include_dirs,
                library_dirs=args.library_dirs,
                define_macros=defines,
                extra_compile_args=args.cflags.split() if args.cflags is not None else ("-O3",),
                extra_link_args=args.ldflags.split() if args.ldflags else (),
                language="c++" if args.cpp else "c",
            )
        except BuildError as exc:
            output = getattr(exc, "output", "") or ""
            if output:
                raise _clean(exc, "the cell does not compile:",
                             _with_source_lines(output, source.splitlines())) from None
            raise _clean(exc, str(exc)) from None
        except TensorFFIError as exc:  # a contract that does not fit the C (contracts are checked at bind time)
            raise _clean(exc, str(exc)) from None
        seconds = time.perf_counter() - t0

        key = (_module_key(lib), tuple(sorted(contracts.items())), args.returns)
        previous = self._libraries.get(key)
        if previous is not None and key[0] is not None:
            lib = previous  # an unchanged cell: the very same functions
        else:
            self._libraries[key] = lib
        functions = lib.functions
        if not functions:
            raise UsageError("the cell defines no function to bind (only non-static functions are bound)")

        warnings = []
        for func, qualname in op_specs:
            if func not in functions:
                raise UsageError(f"--op {qualname}: the cell defines no function {func!r} (it defines "
                                 f"{', '.join(functions)}); name it with --op FUNC={qualname}")
            registered = self._ops.get(qualname)
            if registered == (key, func):
                continue  # the same build: the operator already runs this code
            if registered is not None or qualname in ops.operators():
                warnings.append(
                    f"torch.ops.{qualname.replace('::', '.')} still runs the earlier build: PyTorch cannot redefine an "
                    f"operator in a running process. Restart the kernel, or register it under a new name "
                    f"(--op {func}={qualname}_v2)"
                )
                continue
            back = backwards.get(func)
            if back is not None and back not in functions:
                raise UsageError(f"--backward {func}={back}: the cell defines no function {back!r}")
            try:
                ops.register(functions[func], qualname, backward=functions[back] if back else None)
            except TensorFFIError as exc:
                raise _clean(exc, f"--op {qualname}: {exc}") from None
            self._ops[qualname] = (key, func)

        self.shell.push(functions)
        if args.name:
            self.shell.push({args.name: lib})
        if args.quiet and not warnings:
            return None
        manifest: Any = _cache.read_json(_cache.directory() / f"{key[0]}.json") if key[0] else None
        cached = bool(manifest) and manifest.get("created", 0) < start
        how = "from the cache" if cached else "compiled"
        names = ", ".join(functions) + (f"; the Library as {args.name}" if args.name else "")
        note = f"{how} and bound in {seconds * 1e3:.0f} ms: {names}"
        from IPython.display import display

        display(_CellView(lib, note, warnings))
        return None


def load_ipython_extension(ipython: Any) -> None:
    """Register the magics (``%load_ext tensorffi`` calls this)."""
    ipython.register_magics(TensorFFIMagics)


def __dir__() -> list[str]:
    return sorted(__all__)  # the API only: tab completion does not offer imports (np, torch, ...)
