# SPDX-License-Identifier: MIT
"""Read C declarations the way the bridge needs them.

cffi's own type objects drop ``const``, and ``const`` is what tells the bridge
whether C reads or writes a buffer. So the declarations are parsed a second time
with pycparser (a dependency of cffi), keeping qualifiers, parameter names and
typedef chains.
"""
from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Callable

from pycparser import c_ast, c_generator, c_parser

try:
    from .errors import DeclarationError
except ImportError:  # loaded on its own by build_ffi.py, before the package is built

    class DeclarationError(ValueError):  # type: ignore[no-redef]
        def __init__(self, message: str, *, file: str = "<cdef>", line: int = 0, column: int = 0, text: str = "") -> None:
            super().__init__(message)
            self.file, self.line, self.column, self.text = file, line, column, text

# Types cffi knows without a declaration; pycparser needs them spelled out. The
# typedef targets only matter for classification (see ELEMENT_DTYPES).
_BUILTIN_TYPEDEFS = {
    "int8_t": "signed char",
    "uint8_t": "unsigned char",
    "int16_t": "short",
    "uint16_t": "unsigned short",
    "int32_t": "int",
    "uint32_t": "unsigned int",
    "int64_t": "long long",
    "uint64_t": "unsigned long long",
    "intptr_t": "long",
    "uintptr_t": "unsigned long",
    "ptrdiff_t": "long",
    "size_t": "unsigned long",
    "ssize_t": "long",
    "bool": "_Bool",
    "wchar_t": "int",
    "FILE": "struct _IO_FILE",
    # the rest of the types cffi knows without a declaration (x86-64 Linux sizes)
    "intmax_t": "long",
    "uintmax_t": "unsigned long",
    "int_least8_t": "signed char",
    "uint_least8_t": "unsigned char",
    "int_least16_t": "short",
    "uint_least16_t": "unsigned short",
    "int_least32_t": "int",
    "uint_least32_t": "unsigned int",
    "int_least64_t": "long long",
    "uint_least64_t": "unsigned long long",
    "int_fast8_t": "signed char",
    "uint_fast8_t": "unsigned char",
    "int_fast16_t": "long",
    "uint_fast16_t": "unsigned long",
    "int_fast32_t": "long",
    "uint_fast32_t": "unsigned long",
    "int_fast64_t": "long",
    "uint_fast64_t": "unsigned long",
    "char16_t": "unsigned short",
    "char32_t": "unsigned int",
}

# C element type (after typedefs) -> canonical dtype name. ``char`` is bytes.
ELEMENT_DTYPES = {
    "float": "float32",
    "double": "float64",
    "signed char": "int8",
    "char": "uint8",
    "unsigned char": "uint8",
    "short": "int16",
    "short int": "int16",
    "signed short": "int16",
    "unsigned short": "uint16",
    "unsigned short int": "uint16",
    "int": "int32",
    "signed int": "int32",
    "signed": "int32",
    "unsigned int": "uint32",
    "unsigned": "uint32",
    "long": "int64",
    "long int": "int64",
    "signed long": "int64",
    "unsigned long": "uint64",
    "unsigned long int": "uint64",
    "long long": "int64",
    "long long int": "int64",
    "signed long long": "int64",
    "unsigned long long": "uint64",
    "unsigned long long int": "uint64",
    "_Bool": "bool",
    "float _Complex": "complex64",
    "double _Complex": "complex128",
    "void": "any",
}

# Sized typedef names take precedence over their (platform-dependent) targets.
_SIZED = {
    "int8_t": "int8",
    "uint8_t": "uint8",
    "int16_t": "int16",
    "uint16_t": "uint16",
    "int32_t": "int32",
    "uint32_t": "uint32",
    "int64_t": "int64",
    "uint64_t": "uint64",
    "bool": "bool",
}

INTEGER_TYPES = {
    name
    for name, dt in ELEMENT_DTYPES.items()
    if dt.startswith(("int", "uint")) or dt == "bool"
} | set(_SIZED) | {"intptr_t", "uintptr_t", "ptrdiff_t", "size_t", "ssize_t"}
FLOAT_TYPES = {"float", "double", "long double"}


@dataclass(frozen=True)
class CType:
    """One parameter or field type, as the bridge sees it."""

    text: str  # C spelling, e.g. "const float *"
    pointer_depth: int  # 0 for scalars, 1 for T *, 2 for T ** ...
    base: str  # innermost type name as written, e.g. "float", "struct foo", "int64_t"
    resolved: str  # innermost type after typedefs, e.g. "long long"
    const: bool  # the pointee (depth 1) or the value (depth 0) is const
    is_struct: bool  # innermost type is a struct/union (by name or typedef)
    is_function_pointer: bool = False
    is_array: bool = False
    #: function pointers: the pointee's parameters and result (a CFunction named "")
    signature: "CFunction | None" = field(default=None, compare=False)

    @property
    def dtype(self) -> str | None:
        """Canonical element dtype of a pointer to numbers, "any" for void *, else None."""
        if self.pointer_depth != 1 or self.is_struct or self.is_function_pointer:
            return None
        if self.base in _SIZED:
            return _SIZED[self.base]
        return ELEMENT_DTYPES.get(self.resolved)

    @property
    def shimmable(self) -> bool:
        """A pointer to numbers that a shim may take as intptr_t (not a C string)."""
        return (
            self.pointer_depth == 1
            and self.dtype is not None
            and not self.is_array
            and not (self.const and self.resolved == "char")
        )

    @property
    def is_integer(self) -> bool:
        return self.pointer_depth == 0 and (self.base in INTEGER_TYPES or self.resolved in INTEGER_TYPES)

    @property
    def is_float(self) -> bool:
        return self.pointer_depth == 0 and self.resolved in FLOAT_TYPES


@dataclass(frozen=True)
class CParam:
    name: str
    type: CType
    decl: str = ""  # the declaration with the name replaced by "__TF_NAME__"


@dataclass(frozen=True)
class CFunction:
    name: str
    params: tuple[CParam, ...]
    result: CType
    variadic: bool = False
    text: str = ""  # the declaration, regenerated
    file: str = "<cdef>"  # where it was declared (a cdef, or the user's header or source)
    line: int = 0


@dataclass
class Declarations:
    functions: dict[str, CFunction] = field(default_factory=dict)
    structs: dict[str, tuple[CParam, ...]] = field(default_factory=dict)  # by struct and typedef name
    typedefs: dict[str, c_ast.Node] = field(default_factory=dict)


_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_EXTERN_PY = re.compile(r'extern\s+"Python(?:[^"]*)"\s*')
_LINE_MARKER = re.compile(r'^[ \t]*#[ \t]*(?:line[ \t]+)?\d+(?:[ \t]+"(?:[^"\\\n]|\\.)*")?[ \t\d]*$', re.M)
_DIRECTIVE = re.compile(r"^[ \t]*#[^\n]*$", re.M)
_ELLIPSIS_FIELD = re.compile(r"\.\.\.\s*;")


def _blank(match: re.Match[str]) -> str:
    """A comment or directive replaced by as many newlines: line numbers stay right."""
    return " " + "\n" * match.group(0).count("\n")


def _clean(cdef: str) -> str:
    text = _COMMENT.sub(_blank, cdef)
    text = _DIRECTIVE.sub(lambda m: m.group(0) if _LINE_MARKER.fullmatch(m.group(0)) else "", text)
    text = _EXTERN_PY.sub("", text)
    text = re.sub(r"typedef\s+\.\.\.\s+(\w+)\s*;", r"typedef struct \1 \1;", text)  # cffi's opaque type
    text = _ELLIPSIS_FIELD.sub("", text)  # cffi's "struct { ...; }"
    text = re.sub(r"\[\s*\.\.\.\s*\]", "[]", text)  # cffi's "int a[...]"
    return text


_ERROR_AT = re.compile(r"^(?P<file>.*?):(?P<line>\d+)(?::(?P<col>\d+))?:\s*(?P<msg>.*)$", re.S)


def declaration_error(
    message: str, source: str, default_file: str = "<cdef>", texts: "dict[str, str] | None" = None
) -> DeclarationError:
    """A :class:`DeclarationError` from a pycparser/cffi message ``file:line:col: what``;
    the offending line is quoted when ``file`` is the text given in ``source``
    (``"<cdef>"``) or a file that can be read."""
    text = message.strip().splitlines()[-1] if message.strip() else message
    m = _ERROR_AT.match(text)
    if m is None:
        return DeclarationError(f"{default_file}: cannot read the declarations: {message.strip()}", file=default_file)
    file, line, col, what = m["file"], int(m["line"]), int(m["col"] or 0), m["msg"]
    what = re.sub(r"^before: (.*)$", r"syntax error before '\1'", what)
    what = re.sub(r"^Illegal character (.*)$", r"illegal character \1 (names must be ASCII C identifiers)", what)
    lines: list[str] = []
    if file == default_file:
        lines = source.splitlines()
    elif texts and file in texts:
        lines = texts[file].splitlines()
    else:
        try:
            with open(file, encoding="utf-8", errors="replace") as f:
                lines = f.read().splitlines()
        except OSError:
            pass
    quoted = lines[line - 1] if 0 < line <= len(lines) else ""
    msg = f"{file}:{line}:{col}: cannot read the declarations: {what}"
    if quoted:
        msg += "\n    " + quoted + ("\n    " + " " * (col - 1) + "^" if col else "")
    if "syntax error" in what and quoted and col:
        words = re.findall(r"[A-Za-z_]\w*", quoted[: col - 1])
        prev = words[-1] if words else ""  # the name just before the token the parser choked on
        if prev and prev not in C_KEYWORDS and prev not in _BUILTIN_TYPEDEFS:
            msg += (
                f"\n(is '{prev}' meant as a type? Only the standard C types (int64_t, size_t, ...) and types "
                f"declared earlier are known: declare it first, e.g. 'typedef struct {prev} {prev};')"
            )
    return DeclarationError(msg, file=file, line=line, column=col, text=quoted)


def parse_declarations(cdef: str) -> Declarations:
    """Parse a cffi cdef (plain C declarations, plus cffi's small extensions).

    Errors are :class:`~tensorffi.errors.DeclarationError` with the line and column in
    ``cdef`` (or in the file a ``# line "file"`` marker names).
    """
    text = _clean(cdef)
    # Skip names the user typedefs themselves.
    user_typedefs = set(re.findall(r"typedef[^;]*?\b(\w+)\s*;", text))
    # Only the built-in names the text mentions: parsing the prelude is most of the
    # cost of a small cdef (and of re-opening a cached module).
    words = set(re.findall(r"\w+", text))
    prelude = "".join(
        f"typedef {target} {name};\n"
        for name, target in _BUILTIN_TYPEDEFS.items()
        if name in words and name not in user_typedefs
    )
    try:
        ast = c_parser.CParser().parse(prelude + '# 1 "<cdef>"\n' + text, filename="<cdef>")
    except c_parser.ParseError as exc:
        raise declaration_error(str(exc), cdef) from None
    decls = Declarations()
    gen = c_generator.CGenerator()
    for node in ast.ext:
        if isinstance(node, c_ast.Typedef):
            decls.typedefs[node.name] = node.type
            struct = _struct_of(node.type)
            if struct is not None and struct.decls is not None:
                fields = _fields(struct, decls)
                decls.structs[node.name] = fields
                if struct.name:
                    decls.structs["struct " + struct.name] = fields
        elif isinstance(node, c_ast.Decl):
            if isinstance(node.type, c_ast.FuncDecl):
                fn = _function(node, decls, gen)
                decls.functions[fn.name] = fn
            elif isinstance(node.type, (c_ast.Struct, c_ast.Union)) and node.type.decls is not None:
                decls.structs["struct " + node.type.name] = _fields(node.type, decls)
    return decls


def _struct_of(node: c_ast.Node) -> c_ast.Struct | c_ast.Union | None:
    if isinstance(node, c_ast.TypeDecl) and isinstance(node.type, (c_ast.Struct, c_ast.Union)):
        return node.type
    return None


def _fields(struct: c_ast.Struct | c_ast.Union, decls: Declarations) -> tuple[CParam, ...]:
    out = []
    for d in struct.decls or ():
        if d.name is None:
            continue
        out.append(CParam(d.name, _ctype(d.type, decls)))
    return tuple(out)


def _function(node: c_ast.Decl, decls: Declarations, gen: c_generator.CGenerator) -> CFunction:
    fdecl = node.type
    params: list[CParam] = []
    variadic = False
    for i, p in enumerate(fdecl.args.params if fdecl.args else ()):
        if isinstance(p, c_ast.EllipsisParam):
            variadic = True
            continue
        if isinstance(p, c_ast.Typename) and _is_void(p.type):
            continue  # f(void)
        name = getattr(p, "name", None) or f"arg{i}"
        params.append(CParam(name, _ctype(p.type, decls), _named_decl(p.type, gen)))
    result = _ctype(fdecl.type, decls)
    coord = node.coord
    return CFunction(
        node.name,
        tuple(params),
        result,
        variadic,
        gen.visit(node),
        file=getattr(coord, "file", None) or "<cdef>",
        line=getattr(coord, "line", 0) or 0,
    )


def _is_void(node: c_ast.Node) -> bool:
    return (
        isinstance(node, c_ast.TypeDecl)
        and isinstance(node.type, c_ast.IdentifierType)
        and node.type.names == ["void"]
    )


def _ctype(node: c_ast.Node, decls: Declarations) -> CType:
    text = _type_text(node)
    depth = 0
    const = False
    is_array = False
    cur = node
    while isinstance(cur, (c_ast.PtrDecl, c_ast.ArrayDecl)):
        if isinstance(cur, c_ast.ArrayDecl):
            is_array = True
        depth += 1
        cur = cur.type
    if isinstance(cur, c_ast.FuncDecl):
        return CType(text, depth, "function", "function", False, False, is_function_pointer=True,
                     signature=_signature(cur, decls))
    assert isinstance(cur, c_ast.TypeDecl), cur
    const = "const" in (cur.quals or [])
    inner = cur.type
    if isinstance(inner, (c_ast.Struct, c_ast.Union)):
        base = ("struct " if isinstance(inner, c_ast.Struct) else "union ") + (inner.name or "")
        return CType(text, depth, base, base, const, True, is_array=is_array)
    if isinstance(inner, c_ast.Enum):
        return CType(text, depth, "enum", "int", const, False, is_array=is_array)
    base = " ".join(inner.names)
    resolved, is_struct, is_fp, extra_depth = _resolve(base, decls)
    return CType(
        text,
        depth + extra_depth,
        base,
        resolved,
        const,
        is_struct,
        is_function_pointer=is_fp,
        is_array=is_array,
        signature=_typedef_signature(base, decls) if is_fp else None,
    )


def _signature(node: c_ast.FuncDecl, decls: Declarations) -> CFunction:
    """The parameters and result of a function type (a function pointer's pointee)."""
    params: list[CParam] = []
    variadic = False
    gen = c_generator.CGenerator()
    for i, p in enumerate(node.args.params if node.args else ()):
        if isinstance(p, c_ast.EllipsisParam):
            variadic = True
            continue
        if isinstance(p, c_ast.Typename) and _is_void(p.type):
            continue
        name = getattr(p, "name", None) or f"arg{i}"
        params.append(CParam(name, _ctype(p.type, decls), _named_decl(p.type, gen)))
    return CFunction("", tuple(params), _ctype(node.type, decls), variadic)


def _typedef_signature(name: str, decls: Declarations, seen: int = 0) -> CFunction | None:
    node = decls.typedefs.get(name)
    while isinstance(node, c_ast.PtrDecl):
        node = node.type
    if isinstance(node, c_ast.FuncDecl):
        return _signature(node, decls)
    if isinstance(node, c_ast.TypeDecl) and isinstance(node.type, c_ast.IdentifierType) and seen < 32:
        return _typedef_signature(" ".join(node.type.names), decls, seen + 1)
    return None


def _renamed(node: c_ast.Node, name: str | None, *, stop_at_function: bool = False) -> c_ast.Node:
    """``node`` with the name of its innermost TypeDecl set to ``name``: a shallow copy of
    each node on the way there, the rest shared (the parse tree is never changed, and a
    deep copy cost most of the package's import)."""
    if isinstance(node, c_ast.TypeDecl):
        out = copy.copy(node)
        out.declname = name
        return out
    if not hasattr(node, "type") or (stop_at_function and isinstance(node, c_ast.FuncDecl)):
        return node
    out = copy.copy(node)
    out.type = _renamed(node.type, name, stop_at_function=stop_at_function)
    return out


def _named_decl(node: c_ast.Node, gen: c_generator.CGenerator) -> str:
    node = _renamed(node, "__TF_NAME__")
    return str(gen.visit(c_ast.Decl(None, [], [], [], [], node, None, None)))


def _type_text(node: c_ast.Node) -> str:
    """The C spelling of a declarator's type, without its name ("const float *")."""
    node = _renamed(node, None, stop_at_function=True)
    return str(c_generator.CGenerator().visit(c_ast.Typename(name=None, quals=[], align=None, type=node))).strip()


def _resolve(name: str, decls: Declarations, seen: int = 0) -> tuple[str, bool, bool, int]:
    """Follow a typedef chain: (resolved name, is struct, is function pointer, extra pointer depth)."""
    if name in _SIZED or name not in decls.typedefs or seen > 32:
        return name, False, False, 0
    node = decls.typedefs[name]
    if (isinstance(node, c_ast.ArrayDecl) and isinstance(node.dim, c_ast.Constant) and node.dim.value == "2"
            and isinstance(node.type, c_ast.TypeDecl) and isinstance(node.type.type, c_ast.IdentifierType)
            and node.type.type.names in (["float"], ["double"])):
        # typedef float fftwf_complex[2]: the layout of float _Complex (C99 6.2.5)
        return node.type.type.names[0] + " _Complex", False, False, 0
    depth = 0
    while isinstance(node, (c_ast.PtrDecl, c_ast.ArrayDecl)):
        depth += 1
        node = node.type
    if isinstance(node, c_ast.FuncDecl):
        return "function", False, True, 0
    inner = node.type
    if isinstance(inner, (c_ast.Struct, c_ast.Union)):
        return "struct " + (inner.name or name), True, False, depth
    if isinstance(inner, c_ast.Enum):
        return "int", False, False, depth
    r, s, f, d = _resolve(" ".join(inner.names), decls, seen + 1)
    return r, s, f, d + depth


# --------------------------------------------------------------------------- #
# Declarations read from the user's C (preprocessed by the compiler)           #
# --------------------------------------------------------------------------- #
#
# compile() without a cdef reads the declarations from the user's sources: the
# compiler preprocesses each file (so macros, includes and conditionals are the
# compiler's own), and this scanner walks the top level of the result. The line
# markers the preprocessor leaves (`# 12 "k.h" 2 3`) say which file each statement
# came from and whether that file is a system header (flag 3): only statements from
# the user's own files are taken. Function bodies are skipped by brace matching;
# the text of each declaration is re-emitted with a line marker, so cffi, pycparser
# and the compiler all report problems at the user's own file and line.

_TOKEN = re.compile(
    r"""
    (?P<marker>^\#[ \t]*(?:line[ \t]+)?(?P<mline>\d+)(?:[ \t]+"(?P<mfile>(?:[^"\\\n]|\\.)*)")?(?P<mflags>[ \t\d]*)$)
  | (?P<directive>^\#[^\n]*$)
  | (?P<nl>\n)
  | (?P<ws>[ \t\r\f\v]+)
  | (?P<comment>//[^\n]*|/\*.*?\*/)
  | (?P<str>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
  | (?P<ident>(?:[^\W\d]|\\u[0-9a-fA-F]{4}|\\U[0-9a-fA-F]{8})(?:\w|\\u[0-9a-fA-F]{4}|\\U[0-9a-fA-F]{8})*|\$)
  | (?P<num>\.?\d(?:[eEpP][+-]|[\w.])*)
  | (?P<punct>\.\.\.|->|.)
    """,
    re.M | re.S | re.X,
)

# Tokens dropped from declarations before cffi sees them (GNU spellings, function
# specifiers), and groups dropped with their parenthesised argument.
_DROP = {
    "__extension__", "inline", "__inline", "__inline__", "_Noreturn", "__restrict", "__restrict__",
    "restrict", "extern", "__thread", "_Thread_local",
}
_DROP_GROUP = {"__attribute__", "__attribute", "__declspec", "__asm__", "__asm", "asm", "_Alignas", "__alignas"}
_RENAME = {"__const": "const", "__const__": "const", "__signed__": "signed", "__signed": "signed",
           "__volatile__": "volatile", "__volatile": "volatile"}
_STORAGE = {"typedef", "extern", "static", "auto", "register", "inline", "__inline", "__inline__", "_Noreturn",
            "__extension__", "_Thread_local", "__thread"}
_QUALIFIERS = {"const", "volatile", "restrict", "__restrict", "__restrict__", "__const", "_Atomic", "__volatile__"}
_TYPE_KEYWORDS = {"void", "char", "short", "int", "long", "float", "double", "signed", "unsigned", "_Bool",
                  "_Complex", "__int128", "__signed__", "_Float16", "_Float32", "_Float64", "_Float128",
                  "_Float32x", "_Float64x", "__fp16", "__bf16", "_Decimal32", "_Decimal64", "_Decimal128"}
C_KEYWORDS = _STORAGE | _QUALIFIERS | _TYPE_KEYWORDS | {
    "struct", "union", "enum", "sizeof", "return", "if", "else", "for", "while", "do", "switch", "case",
    "default", "break", "continue", "goto", "typeof", "__typeof__", "__typeof", "_Alignof", "__alignof__",
    "_Static_assert", "_Generic"}


@dataclass(frozen=True)
class Token:
    text: str
    file: str
    line: int
    col: int
    system: bool = False  # the preprocessor's marker flagged this stretch as a system header


@dataclass
class Statement:
    """One top-level declaration or function definition of a preprocessed file."""

    kind: str  # "function" (a definition), "prototype", "type", "knr" (a K&R definition's head) or "other"
    tokens: list[Token]
    user: bool  # from the user's own files (not a system header)
    name: str = ""  # the function's name (function, prototype)
    static: bool = False
    defines: frozenset[str] = frozenset()  # typedef names and struct/union/enum tags it declares
    uses: frozenset[str] = frozenset()  # identifiers it mentions

    @property
    def file(self) -> str:
        return self.tokens[0].file

    @property
    def line(self) -> int:
        return self.tokens[0].line

    def text(self) -> str:
        """The declaration as C (a prototype for a definition), with a line marker."""
        return f'# {self.line} "{_escape(self.file)}"\n' + _render(self.tokens) + ";"


def _escape(path: str) -> str:
    return path.replace("\\", "\\\\").replace('"', '\\"')


def _render(tokens: list[Token]) -> str:
    out: list[str] = []
    for t in tokens:
        if out and (t.text[0].isalnum() or t.text[0] in "_$") and (out[-1][-1].isalnum() or out[-1][-1] in "_$"):
            out.append(" ")
        elif out and t.text not in ",;)]" and out[-1] not in "([":
            out.append(" ")
        out.append(t.text)
    return "".join(out)


def tokenize(text: str) -> list[Token]:
    """The tokens of preprocessed C, each with the file and line the markers give it,
    and whether the marker flags that stretch as a system header (flag 3 belongs to
    the marker, not the file: a system macro expanded in a user file is flagged)."""
    tokens: list[Token] = []
    file, line, line_start = "<unknown>", 1, 0
    system = False
    for m in _TOKEN.finditer(text):
        kind = m.lastgroup
        if kind == "nl":
            line += 1
            line_start = m.end()
        elif kind == "marker":
            if m["mfile"] is not None:
                file = bytes(m["mfile"], "utf-8").decode("unicode_escape") if "\\" in m["mfile"] else m["mfile"]
            system = "3" in (m["mflags"] or "").split()
            line = int(m["mline"]) - 1  # the marker's own newline follows
        elif kind in ("ws", "comment", "directive"):
            if kind == "comment":
                n = m.group(0).count("\n")
                if n:
                    line += n
                    line_start = m.start() + m.group(0).rfind("\n") + 1
        else:
            tokens.append(Token(m.group(0), file, line, m.start() - line_start + 1, system))
    return tokens


def _strip_gnu(tokens: list[Token]) -> list[Token]:
    out: list[Token] = []
    i = 0
    while i < len(tokens):
        t = tokens[i]
        if t.text in _DROP_GROUP:
            i += 1
            if i < len(tokens) and tokens[i].text == "(":
                depth = 0
                while i < len(tokens):
                    depth += tokens[i].text == "("
                    depth -= tokens[i].text == ")"
                    i += 1
                    if depth == 0:
                        break
            continue
        if t.text in _DROP:
            i += 1
            continue
        if t.text in _RENAME:
            t = Token(_RENAME[t.text], t.file, t.line, t.col)
        out.append(t)
        i += 1
    return out


def _declared_names(tokens: list[Token]) -> list[str]:
    """The names a declaration declares (one per declarator), by the C grammar's
    shape: specifiers (keywords, struct bodies, at most one typedef name), then
    declarators whose first free identifier is the name."""
    names: list[str] = []
    i, n = 0, len(tokens)
    have_type = False
    # specifiers
    while i < n:
        t = tokens[i].text
        if t in _STORAGE or t in _QUALIFIERS:
            i += 1
        elif t in _TYPE_KEYWORDS:
            have_type = True
            i += 1
        elif t in ("struct", "union", "enum"):
            have_type = True
            i += 1
            if i < n and _is_ident(tokens[i].text):
                i += 1
            if i < n and tokens[i].text == "{":
                i = _skip_group(tokens, i, "{", "}")
        elif t in ("typeof", "__typeof__", "__typeof", "_Atomic") and i + 1 < n and tokens[i + 1].text == "(":
            have_type = True
            i = _skip_group(tokens, i + 1, "(", ")")
        elif _is_ident(t) and not have_type:
            have_type = True  # a typedef name used as the type
            i += 1
        else:
            break
    # declarators, separated by commas at depth 0
    depth = 0
    want = True
    while i < n:
        t = tokens[i].text
        if t in "([":
            if not want and t == "(":  # a parameter list: skip it
                i = _skip_group(tokens, i, "(", ")")
                continue
            if t == "[":
                i = _skip_group(tokens, i, "[", "]")
                continue
            depth += 1
        elif t in ")]":
            depth -= 1
        elif t == "," and depth == 0:
            want = True
        elif t == "=" and depth == 0:
            # an initializer: skip to the next declarator
            j = i + 1
            d = 0
            while j < n and not (tokens[j].text == "," and d == 0):
                d += tokens[j].text in "({["
                d -= tokens[j].text in ")}]"
                j += 1
            i = j
            continue
        elif want and _is_ident(t) and t not in C_KEYWORDS:
            names.append(t)
            want = False
        i += 1
    return names


def _is_ident(text: str) -> bool:
    return text[:1].isalpha() or text[:1] == "_"


def _skip_group(tokens: list[Token], i: int, open_: str, close: str) -> int:
    """Index just past the group that opens at ``tokens[i]``."""
    depth = 0
    while i < len(tokens):
        depth += tokens[i].text == open_
        depth -= tokens[i].text == close
        i += 1
        if depth == 0:
            break
    return i


def _tags(tokens: list[Token]) -> set[str]:
    """``struct x``/``union x``/``enum x`` tags defined (with a body) or forward-declared."""
    tags: set[str] = set()
    for i, t in enumerate(tokens[:-1]):
        if t.text in ("struct", "union", "enum") and _is_ident(tokens[i + 1].text):
            tags.add(f"{t.text} {tokens[i + 1].text}")
    return tags


def _enum_constants(tokens: list[Token]) -> set[str]:
    names: set[str] = set()
    for i, t in enumerate(tokens):
        if t.text == "enum":
            j = i + 1
            if j < len(tokens) and _is_ident(tokens[j].text):
                j += 1
            if j < len(tokens) and tokens[j].text == "{":
                end = _skip_group(tokens, j, "{", "}")
                expect = True
                depth = 0
                for k in range(j + 1, end - 1):
                    x = tokens[k].text
                    depth += x in "(["
                    depth -= x in ")]"
                    if expect and _is_ident(x):
                        names.add(x)
                        expect = False
                    elif x == "," and depth == 0:
                        expect = True
    return names


def _uses(tokens: list[Token]) -> frozenset[str]:
    used: set[str] = set()
    for i, t in enumerate(tokens):
        if _is_ident(t.text) and t.text not in C_KEYWORDS:
            used.add(t.text)
        if t.text in ("struct", "union", "enum") and i + 1 < len(tokens) and _is_ident(tokens[i + 1].text):
            used.add(f"{t.text} {tokens[i + 1].text}")
    return frozenset(used)


def _classify(tokens: list[Token], user: bool, body: bool) -> Statement:
    is_static = any(t.text == "static" for t in tokens)
    is_extern = any(t.text == "extern" for t in tokens)
    is_inline = any(t.text in ("inline", "__inline", "__inline__") for t in tokens)
    clean = _strip_gnu(tokens)
    if not clean:
        return Statement("other", tokens, user)
    if body:
        names = _declared_names(clean)
        proto = [t for t in clean if t.text != "static"]
        # a C99 inline definition without extern emits no symbol
        return Statement("function", proto, user, names[0] if names else "",
                         static=is_static or (is_inline and not is_extern), uses=_uses(proto))
    if clean[0].text == "typedef":
        names = _declared_names(clean)
        defines = frozenset(names) | _tags(clean) | _enum_constants(clean)
        return Statement("type", clean, user, defines=defines, uses=_uses(clean))
    if clean[0].text in ("struct", "union", "enum") and (
        len(clean) <= 2 or clean[2].text == "{" or clean[1].text == "{"
    ):
        # struct x; / struct x {...}; / enum {...}; (a declarator after the body is dropped)
        end = len(clean)
        for i, t in enumerate(clean):
            if t.text == "{":
                end = _skip_group(clean, i, "{", "}")
                break
        body_tokens = clean[:end]
        return Statement("type", body_tokens, user, defines=frozenset(_tags(body_tokens) | _enum_constants(body_tokens)),
                         uses=_uses(body_tokens))
    names = _declared_names(clean)
    # a prototype: the first declarator is followed by a parameter list
    for i, t in enumerate(clean):
        if names and t.text == names[0]:
            rest = clean[i + 1:]
            while rest and rest[0].text == ")":
                rest = rest[1:]
            if rest and rest[0].text == "(":
                end = _skip_group(rest, 0, "(", ")")
                inside = [r.text for r in rest[1:end - 1]]
                if end < len(rest) and inside and all(_is_ident(x) or x == "," for x in inside):
                    # `int add(a, b) int a` is the head of a K&R definition (its
                    # parameter declarations follow, then the body)
                    return Statement("knr", clean, user, names[0], static=is_static)
                return Statement("prototype", [t for t in clean if t.text != "static"], user, names[0],
                                 static=is_static, uses=_uses(clean))
            break
    return Statement("other", clean, user, defines=frozenset(names))


def scan(text: str, is_user_file: "Callable[[str], bool] | None" = None) -> list[Statement]:
    """Top-level statements of preprocessed C (``cc -E`` output).

    A file is the user's when the preprocessor did not flag it as a system header
    (and ``is_user_file``, if given, agrees); ``<built-in>``/``<command-line>`` never are.
    """
    tokens = tokenize(text)
    # A file is a system header if any stretch of it is flagged so, except where the
    # flag only marks a system macro's expansion inside a user's file: a file whose
    # first marker (entering it) lacks the flag is the user's.
    entered: dict[str, bool] = {}
    for t in tokens:
        entered.setdefault(t.file, t.system)

    def user(file: str) -> bool:
        if entered.get(file, False) or file.startswith("<built-in") or file.startswith("<command"):
            return False
        return is_user_file(file) if is_user_file is not None else True

    out: list[Statement] = []
    stmt: list[Token] = []
    paren = 0
    i, n = 0, len(tokens)
    while i < n:
        t = tokens[i]
        x = t.text
        if x == "(" or x == "[":
            paren += 1
        elif x == ")" or x == "]":
            paren -= 1
        if x == ";" and paren == 0:
            if stmt:
                out.append(_classify(stmt, user(stmt[0].file), body=False))
            stmt = []
            i += 1
            continue
        if x == "{" and paren == 0:
            clean = _strip_gnu(stmt)
            is_def = (
                bool(clean)
                and clean[-1].text == ")"
                and clean[0].text != "typedef"
                and not any(c.text == "=" for c in clean)
            )
            end = _skip_group(tokens, i, "{", "}")
            if is_def:
                out.append(_classify(stmt, user(stmt[0].file), body=True))
                stmt = []
            else:
                stmt.extend(tokens[i:end])  # an aggregate body: part of the statement
            i = end
            continue
        stmt.append(t)
        i += 1
    return out


def derive_cdef(statements: list[Statement], exported: list[Statement]) -> tuple[str, str]:
    """Declarations for the ``exported`` functions: ``(opaque, body)``. ``body`` is C
    (the cdef and the wrapper's preamble): the prototypes after the user's type
    declarations they need (a closure over the names they use), each with a line
    marker back to the user's file. ``opaque`` is for cffi only: the system types
    those need, declared opaque."""
    by_name: dict[str, list[Statement]] = {}
    for s in statements:
        if s.kind == "type" and s.user:
            for d in s.defines:
                by_name.setdefault(d, []).append(s)
    needed: list[Statement] = []
    seen_ids: set[int] = set()
    todo = [u for s in exported for u in s.uses]
    done: set[str] = set()
    while todo:
        name = todo.pop()
        if name in done:
            continue
        done.add(name)
        for s in by_name.get(name, ()):
            if id(s) not in seen_ids:
                seen_ids.add(id(s))
                needed.append(s)
                todo.extend(s.uses)
    # Names from system headers that cffi does not know (pthread_mutex_t, struct
    # timespec) are opaque to cffi ("typedef ... T;", "struct T;"); the C side
    # includes the system headers the user's files include (see system_includes).
    system_typedefs = {d for s in statements if s.kind == "type" and not s.user for d in s.defines}
    # One held by value in a struct of the user's (`pthread_mutex_t lock;`) needs its
    # size: cffi gets it from the compiler ("typedef struct { ...; } T;", "struct T
    # { ...; };"), its fields stay unknown; behind pointers it is plain opaque.
    by_value = _held_by_value(needed + exported)
    opaque: list[str] = []
    for name in sorted(done - set(by_name)):
        if name.startswith(("struct ", "union ")):
            opaque.append(f"{name} {{ ...; }};" if name in by_value else f"{name};")
        elif name in system_typedefs and name not in _BUILTIN_TYPEDEFS:
            opaque.append(f"typedef struct {{ ...; }} {name};" if name in by_value else f"typedef ... {name};")
    order = {id(s): i for i, s in enumerate(statements)}
    texts: list[str] = []
    seen_text: set[str] = set()
    for s in sorted(needed, key=lambda s: order[id(s)]):
        body = _render(s.tokens)
        if body not in seen_text:  # the same header included by two files
            seen_text.add(body)
            texts.append(s.text())
    texts.extend(s.text() for s in exported)
    return "".join(line + "\n" for line in opaque), "\n".join(texts) + "\n"


# --------------------------------------------------------------------------- #
# C++: the extern "C" regions of a preprocessed C++ file                        #
# --------------------------------------------------------------------------- #
#
# A C++ file's functions that C (and cffi) can call are the ones with C linkage:
# those inside `extern "C" { ... }` blocks and those declared `extern "C" T f(...)`.
# Their declarations are C (a signature with a reference or a class cannot have been
# bound anyway: pycparser refuses it at the user's line). The regions are cut out of
# the preprocessed text, with line markers, and read by `scan` exactly as C is.

# C++ spellings inside a C-linkage declaration that C has no use for (dropped):
# `noexcept`, `noexcept(expr)`, `throw()`, `[[attribute]]`, `alignas(...)`.
_CXX_DROP_GROUP = {"noexcept", "throw", "alignas"}


def _cxx_clean(tokens: list[Token]) -> list[Token]:
    out: list[Token] = []
    i, n = 0, len(tokens)
    while i < n:
        t = tokens[i].text
        if t == "extern" and i + 1 < n and tokens[i + 1].text == '"C"':
            i += 2  # a linkage specification inside a region
            continue
        if t in _CXX_DROP_GROUP and (t == "noexcept" or (i + 1 < n and tokens[i + 1].text == "(")):
            i += 1
            if i < n and tokens[i].text == "(":
                i = _skip_group(tokens, i, "(", ")")
            continue
        if t == "[" and i + 1 < n and tokens[i + 1].text == "[":
            depth, j = 0, i
            while j < n:  # [[ ... ]]
                depth += tokens[j].text == "["
                depth -= tokens[j].text == "]"
                j += 1
                if depth == 0:
                    break
            i = j
            continue
        out.append(tokens[i])
        i += 1
    return out


_ANY_MARKER = re.compile(r'^#[ \t]*(?:line[ \t]+)?\d+(?:[ \t]+"(?:[^"\\\n]|\\.)*")?([ \t\d]*)$', re.M)


def split_system(text: str) -> tuple[str, str]:
    """Preprocessed text as (the user's stretches, with their line markers; the system
    headers' stretches). A C++ file's standard headers are most of its preprocessed
    text, and none of their statements is bound: the scanner reads only the first."""
    user: list[str] = []
    system: list[str] = []
    pos, is_system = 0, False
    for m in _ANY_MARKER.finditer(text):
        (system if is_system else user).append(text[pos:m.start()])
        is_system = "3" in m.group(1).split()
        if not is_system:
            user.append(m.group(0))
        pos = m.end()
    (system if is_system else user).append(text[pos:])
    return "".join(user), "".join(system)


_TYPEDEF_NAME = re.compile(r"\btypedef\b(?:[^;{}]|\{[^{}]*(?:\{[^{}]*\}[^{}]*)*\})*?\b(\w+)\s*(?:\[[^;]*\])?;")


def _system_typedefs(system: str) -> list[Token]:
    """A stand-in for the system headers' typedefs: ``typedef __tf_system NAME1, NAME2;``
    flagged as a system header, so that ``derive_cdef`` declares the system types the
    user's functions use opaque, as it does for C."""
    names = sorted(set(_TYPEDEF_NAME.findall(system)) - C_KEYWORDS)
    if not names:
        return []
    out = [Token("typedef", "<system>", 1, 1, True), Token("__tf_system", "<system>", 1, 1, True)]
    for k, n in enumerate(names):
        if k:
            out.append(Token(",", "<system>", 1, 1, True))
        out.append(Token(n, "<system>", 1, 1, True))
    out.append(Token(";", "<system>", 1, 1, True))
    return out


def extern_c_regions(text: str) -> str:
    """The C-linkage declarations and definitions of preprocessed C++ (``c++ -E``
    output), as preprocessed C text with line markers back to the user's files:
    the contents of every ``extern "C" { ... }`` block and every single
    ``extern "C"`` declaration (or definition). Everything else (classes,
    templates, namespaces, C++-linkage functions) is left out."""
    text, system = split_system(text)
    tokens = tokenize(text)
    picked: list[list[Token]] = [_system_typedefs(system)]
    i, n = 0, len(tokens)
    while i < n:
        if tokens[i].text == "extern" and i + 1 < n and tokens[i + 1].text == '"C"':
            j = i + 2
            if j < n and tokens[j].text == "{":
                end = _skip_group(tokens, j, "{", "}")
                picked.append(tokens[j + 1:end - 1])
                i = end
                continue
            k, depth = j, 0
            while k < n:  # one declaration: to its `;`, or through its body
                x = tokens[k].text
                if x in "([":
                    depth += 1
                elif x in ")]":
                    depth -= 1
                elif x == ";" and depth == 0:
                    k += 1
                    break
                elif x == "{" and depth == 0:
                    k = _skip_group(tokens, k, "{", "}")
                    break
                k += 1
            picked.append(tokens[j:k])
            i = k
            continue
        i += 1
    out: list[str] = []
    file, line, col = None, 0, 1
    for region in picked:
        for t in _cxx_clean(region):
            if t.file != file or t.line != line:
                flags = " 3" if t.system else ""
                out.append(f'\n# {t.line} "{_escape(t.file)}"{flags}\n')
                file, line, col = t.file, t.line, 1
            pad = max(t.col - col, 1 if col > 1 else 0)
            out.append(" " * pad + t.text)
            col += pad + len(t.text)
        out.append("\n")
        line = -1  # the next region starts with a marker
    return "".join(out) + "\n"


def cxx_defined(text: str, names: set[str]) -> set[str]:
    """Which of ``names`` preprocessed C++ defines at namespace scope (``name(...)``
    followed by a body, possibly after ``noexcept``, ``throw()`` or attributes)."""
    tokens = tokenize(split_system(text)[0])
    found: set[str] = set()
    n = len(tokens)
    depth = 0  # braces of function bodies and classes (namespaces and linkage blocks do not count)
    opened: list[bool] = []
    for i, t in enumerate(tokens):
        x = t.text
        if x == "{":
            k = i - 1
            while k >= 0 and tokens[k].text not in (";", "{", "}"):
                k -= 1
            head = [tok.text for tok in tokens[k + 1:i]]
            scope = bool(head) and (head[0] == "namespace" or head[:2] == ["extern", '"C"']
                                    or head[:2] == ["extern", '"C++"'] or head[:2] == ["inline", "namespace"])
            opened.append(not scope)
            depth += not scope
        elif x == "}":
            if opened:
                depth -= opened.pop()
        elif depth == 0 and x in names and i + 1 < n and tokens[i + 1].text == "(" and (
                i == 0 or tokens[i - 1].text not in (".", "->", ":")):
            j = _skip_group(tokens, i + 1, "(", ")")
            while j < n and tokens[j].text in ("noexcept", "throw", "__attribute__", "const"):
                j += 1
                if j < n and tokens[j].text == "(":
                    j = _skip_group(tokens, j, "(", ")")
            if j < n and tokens[j].text == "{":
                found.add(x)
    return found


#: Types cffi has no way to say (pycparser does not parse them, or libffi cannot pass
#: them): declarations that use them are skipped in headers, by name (see skip_inexpressible).
INEXPRESSIBLE = {"__float128", "_Float128", "_Float128x", "_Float64x", "_Float32x", "_Float16", "__fp16", "__bf16",
                 "__int128", "__int128_t", "__uint128_t", "__ibm128", "__ieee128", "_Decimal32", "_Decimal64",
                 "_Decimal128", "__builtin_va_list", "va_list", "__gnuc_va_list", "_BitInt", "__m64", "__m128",
                 "__m128d", "__m128i", "__m256", "__m256d", "__m256i", "__m512", "__m512d", "__m512i"}


def skip_inexpressible(statements: list[Statement], exported: list[Statement], extra: "dict[int, str] | None" = None
                       ) -> tuple[list[Statement], list[Statement], list[str]]:
    """``(statements, exported, skipped)``: the user's declarations without those cffi
    cannot express (a type of :data:`INEXPRESSIBLE`, or one in ``extra``: statement id
    -> reason), and without every declaration that uses what a skipped one declared;
    ``skipped`` says what went, where, and why."""
    extra = extra or {}
    bad: dict[str, str] = {}
    gone: set[int] = set()
    skipped: list[str] = []
    for s in statements:
        if not s.user or s.kind not in ("type", "prototype", "function"):
            continue
        why = extra.get(id(s))
        if why is None:
            hit = next((t.text for t in s.tokens if t.text in INEXPRESSIBLE), None)
            if hit is not None:
                why = f"uses {hit}, which cffi cannot express"
        if why is None:
            used = next((u for u in sorted(s.uses) if u in bad and u != s.name and u not in s.defines), None)
            if used is not None:
                why = f"uses {used} ({bad[used]})"
        if why is None:
            continue
        gone.add(id(s))
        names = sorted(s.defines) if s.kind == "type" else [s.name]
        for n in names:
            bad.setdefault(n, f"skipped at {s.file}:{s.line}")
        what = ", ".join(n for n in names if not n.startswith(("struct ", "union ", "enum "))) or ", ".join(names) or "a declaration"
        skipped.append(f"{s.file}:{s.line}: {what}: {why}")
    return ([s for s in statements if id(s) not in gone], [s for s in exported if id(s) not in gone], skipped)


def statement_at(statements: list[Statement], file: str, line: int) -> "Statement | None":
    """The user's statement of ``file`` that spans ``line`` (the last one starting at or before it)."""
    best = None
    for s in statements:
        if s.user and s.tokens and s.file == file and s.line <= line and s.tokens[-1].line >= line - 1:
            if best is None or s.line >= best.line:
                best = s
    return best


def _held_by_value(statements: list[Statement]) -> set[str]:
    """Type names (``T``, ``struct T``) that a struct field or a parameter holds by
    value, not behind a pointer: each member declaration of a struct body and each
    parameter, split at depth-0 ``;`` and ``,``, that names the type and has no ``*``."""
    out: set[str] = set()
    for s in statements:
        toks = s.tokens
        depth_paren = depth_brace = 0
        part: list[str] = []

        def flush() -> None:
            if part and "*" not in part:
                for k, x in enumerate(part):
                    if x in ("struct", "union") and k + 1 < len(part):
                        out.add(f"{x} {part[k + 1]}")
                    elif _is_ident(x) and x not in C_KEYWORDS:
                        out.add(x)
            part.clear()

        for t in toks:
            x = t.text
            if x == "{":
                depth_brace += 1
                part.clear()
                continue
            if x == "}":
                flush()
                depth_brace -= 1
                continue
            if x == "(":
                depth_paren += 1
                if depth_paren == 1 and depth_brace == 0:
                    part.clear()
                    continue
            if x == ")":
                depth_paren -= 1
                if depth_paren == 0 and depth_brace == 0:
                    flush()
                    continue
            if x in (";", ",") and (depth_brace >= 1 and depth_paren == 0 or depth_brace == 0 and depth_paren == 1):
                flush()
                continue
            if depth_brace >= 1 or depth_paren >= 1:
                part.append(x)
    return out


_MARKER_LINE = re.compile(r'^#[ \t]*(\d+)[ \t]+"((?:[^"\\\n]|\\.)*)"([ \t\d]*)$', re.M)


def system_includes(text: str) -> list[str]:
    """The system headers the user's own files include directly (paths, in order),
    read from the line markers of preprocessed C (flag 1: entering, flag 3: system)."""
    out: list[str] = []
    cur, cur_system = None, False
    for m in _MARKER_LINE.finditer(text):
        file, flags = m[2], m[3].split()
        if "1" in flags and "3" in flags and cur is not None and not cur_system and cur not in ("<built-in>", "<command-line>"):
            if file not in out:
                out.append(file)
        cur, cur_system = file, "3" in flags
    return out
