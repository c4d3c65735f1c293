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

from pycparser import c_ast, c_generator, c_parser

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


@dataclass
class Declarations:
    functions: dict[str, CFunction] = field(default_factory=dict)
    structs: dict[str, tuple[CParam, ...]] = field(default_factory=dict)  # by struct and typedef name
    typedefs: dict[str, c_ast.Node] = field(default_factory=dict)


_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_EXTERN_PY = re.compile(r'extern\s+"Python(?:[^"]*)"\s*')
_DIRECTIVE = re.compile(r"^\s*#[^\n]*$", re.M)
_ELLIPSIS_FIELD = re.compile(r"\.\.\.\s*;")


def _clean(cdef: str) -> str:
    text = _COMMENT.sub(" ", cdef)
    text = _DIRECTIVE.sub("", text)
    text = _EXTERN_PY.sub("", text)
    text = _ELLIPSIS_FIELD.sub("", text)  # cffi's "struct { ...; }"
    text = re.sub(r"\[\s*\.\.\.\s*\]", "[]", text)  # cffi's "int a[...]"
    return text


def parse_declarations(cdef: str) -> Declarations:
    """Parse a cffi cdef (plain C declarations, plus cffi's small extensions)."""
    prelude = "".join(f"typedef {target} {name};\n" for name, target in _BUILTIN_TYPEDEFS.items())
    text = _clean(cdef)
    # Skip names the user typedefs themselves.
    user_typedefs = set(re.findall(r"typedef[^;]*?\b(\w+)\s*;", text))
    prelude = "".join(
        f"typedef {target} {name};\n" for name, target in _BUILTIN_TYPEDEFS.items() if name not in user_typedefs
    )
    ast = c_parser.CParser().parse(prelude + text, filename="<cdef>")
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
    return CFunction(node.name, tuple(params), result, variadic, gen.visit(node))


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


def _named_decl(node: c_ast.Node, gen: c_generator.CGenerator) -> str:
    node = copy.deepcopy(node)
    cur = node
    while hasattr(cur, "type") and not isinstance(cur, c_ast.TypeDecl):
        cur = cur.type
    if isinstance(cur, c_ast.TypeDecl):
        cur.declname = "__TF_NAME__"
    return gen.visit(c_ast.Decl(None, [], [], [], [], node, None, None))


def _type_text(node: c_ast.Node) -> str:
    """The C spelling of a declarator's type, without its name ("const float *")."""
    node = copy.deepcopy(node)
    cur = node
    while not isinstance(cur, c_ast.TypeDecl) and hasattr(cur, "type"):
        if isinstance(cur, c_ast.FuncDecl):
            break
        cur = cur.type
    if isinstance(cur, c_ast.TypeDecl):
        cur.declname = None
    return c_generator.CGenerator().visit(c_ast.Typename(name=None, quals=[], align=None, type=node)).strip()


def _resolve(name: str, decls: Declarations, seen: int = 0) -> tuple[str, bool, bool, int]:
    """Follow a typedef chain: (resolved name, is struct, is function pointer, extra pointer depth)."""
    if name in _SIZED or name not in decls.typedefs or seen > 32:
        return name, False, False, 0
    node = decls.typedefs[name]
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
