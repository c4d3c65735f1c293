# SPDX-License-Identifier: MIT
"""Everything that can go wrong, in one place.

Every exception tensorffi raises derives from :class:`TensorFFIError` and also from
the builtin a caller would catch for that kind of mistake (``TypeError`` for a
wrong dtype, ``ValueError`` for a wrong shape or malformed text, ``OverflowError``
for a scalar that does not fit its C type, ``RuntimeError`` for a native failure).
"""
from __future__ import annotations


class TensorFFIError(Exception):
    """Base class of all tensorffi errors."""


class DTypeError(TensorFFIError, TypeError):
    """An array's element type does not match the C type it is passed as."""


class ArgumentTypeError(TensorFFIError, TypeError):
    """An argument is of a kind the parameter cannot take (a list for a pointer...)."""


class ArgumentValueError(TensorFFIError, ValueError):
    """An argument of the right type with a value the function cannot use (``threads=0``,
    ``skiprows=-1``)."""


class DeviceError(TensorFFIError, ValueError):
    """A tensor is not in CPU memory (CUDA, meta, fake): C cannot read it."""


class LayoutError(TensorFFIError, ValueError):
    """A buffer C writes is not contiguous, is expanded, overlaps itself or is sparse."""


class WritabilityError(TensorFFIError, ValueError):
    """C would write into a read-only array or a tensor that requires grad."""


class GradError(TensorFFIError, RuntimeError):
    """A tensor that requires grad reached C with grad mode on: autograd cannot follow
    a C function, so its result would be silently detached (torch's own ``.numpy()``
    refuses the same, with a ``RuntimeError``). Pass ``x.detach()`` if no gradient is
    meant, call under ``torch.no_grad()``, or make the function an operator with a
    backward (:func:`tensorffi.ops.register`). A tensor that requires grad and that C
    *writes* is a :class:`WritabilityError`, in grad mode or not."""


class ShapeError(TensorFFIError, ValueError):
    """Sizes do not agree with the function's contract."""


class ArgumentOverflowError(TensorFFIError, OverflowError):
    """A Python integer does not fit the C integer type of its parameter."""


class HandleClosedError(TensorFFIError, ValueError):
    """A handle was used after ``close()`` (its C object is destroyed)."""


class AllocationError(TensorFFIError, MemoryError):
    """An output the bridge allocates for a call does not fit in memory."""


class ContractError(TensorFFIError, ValueError):
    """A contract string is malformed or does not match the C declaration."""


class DeclarationError(ContractError):
    """A C declaration (a cdef, a header, a source file) cannot be read.

    ``file``, ``line`` and ``column`` (1-based) locate the problem in the user's own
    text (``"<cdef>"`` for a cdef string); ``text`` is that line.
    """

    def __init__(self, message: str, *, file: str = "<cdef>", line: int = 0, column: int = 0, text: str = "") -> None:
        super().__init__(message)
        self.file = file
        self.line = line
        self.column = column
        self.text = text


class BuildError(TensorFFIError, RuntimeError):
    """Compiling or loading user C code failed. ``output`` is the compiler's output, if any."""

    def __init__(self, message: str, output: str = "") -> None:
        super().__init__(message)
        self.output = output


class CacheError(BuildError):
    """The build cache cannot be used: refused (another user owns it, others may write
    to it) or unusable (not a folder, read-only, full). ``path`` is the folder and
    ``reason`` what is wrong with it. :func:`tensorffi.compile` builds in a private
    temporary folder instead where the cache is only unusable (a :class:`CacheWarning`);
    ``refused`` is true where using it would be unsafe or a setting is wrong (never a
    fallback)."""

    def __init__(self, message: str, path: str = "", reason: str = "", *, refused: bool = False) -> None:
        super().__init__(message)
        self.path = path
        self.reason = reason
        self.refused = refused  # a decision (ownership, permissions, a setting), not a failing disk


class BuildWarning(UserWarning):
    """The C compiler warned about a user's code that still built (the warnings that
    mean wrong code are errors: see :func:`tensorffi.compile`)."""


class UncheckedWarning(UserWarning):
    """A bound function takes arrays whose length the bridge cannot check (no shape in
    the contract, none inferred from the parameter names): C may read or write past
    their end. Said at the function's first call, at the caller's line;
    ``tensorffi.describe(lib.f)`` and its signature mark each such argument UNCHECKED. Give the shape in the contract (``buf: [n]``), or
    ``buf: unsized`` where no length applies; ``python -W error::tensorffi.UncheckedWarning``
    makes it an error."""


class CacheWarning(UserWarning):
    """The build cache is unusable (read-only, full, not a folder): the module was
    built in a private temporary folder and will be rebuilt by the next process."""


class LibraryMismatchError(BuildError):
    """A library handle was re-opened where its library is missing or differs from the
    one it was made from (``path``; ``expected`` and ``found`` are content hashes)."""

    def __init__(self, message: str, path: str = "", expected: str = "", found: str = "") -> None:
        super().__init__(message)
        self.path = path
        self.expected = expected
        self.found = found


class NativeError(TensorFFIError, RuntimeError):
    """A C function reported a failure. ``code`` is its status, ``function`` its name."""

    def __init__(self, message: str, code: int = 0, function: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.function = function


class InvalidArgumentError(NativeError, ValueError):
    """TF_EINVAL: the C function rejected an argument's value."""


class NativeShapeError(NativeError, ValueError):
    """TF_ESHAPE: the C function found sizes that do not agree."""


class NativeTypeError(NativeError, TypeError):
    """TF_ETYPE: unsupported element type."""


class NativeMemoryError(NativeError, MemoryError):
    """TF_ENOMEM: a C-side allocation failed."""


class NativeOverflowError(NativeError, OverflowError):
    """TF_EOVERFLOW: a value does not fit its type."""


class CancelledError(NativeError):
    """TF_EINTERRUPTED: the computation was stopped by a callback (cancellation)."""


class StorageChangedError(TensorFFIError, RuntimeError):
    """A progress callback resized, freed or replaced the storage of a tensor that the
    running C call reads or writes; the call was stopped before touching it again."""


class NativeIOError(NativeError, OSError):
    """TF_EIO: an operating-system I/O call failed, or the input changed while it was
    read (a file truncated meanwhile). ``errno`` and ``filename`` are set where the
    operating system gave them."""

    def __str__(self) -> str:
        # OSError formats "[Errno N] strerror: filename" once filename is set, dropping
        # our message (which names the function and the argument, and says more)
        return str(self.args[0]) if self.args else ""


class SourceNotFoundError(NativeIOError, FileNotFoundError):
    """A source path does not exist."""


class SourcePermissionError(NativeIOError, PermissionError):
    """A source path cannot be opened for reading (no read permission)."""


class SourceIsADirectoryError(NativeIOError, IsADirectoryError):
    """A source path is a directory."""


class ParseError(NativeError, ValueError):
    """Malformed text. ``line`` and ``column`` are 1-based, ``offset`` a 0-based byte offset."""

    def __init__(
        self,
        message: str,
        code: int = -5,
        function: str = "",
        *,
        line: int = 0,
        column: int = 0,
        offset: int = 0,
        text: str = "",
    ) -> None:
        super().__init__(message, code, function)
        self.line = line
        self.column = column
        self.offset = offset
        self.text = text


#: TF_E* status name -> exception class. The numbers come from the native module
#: (csrc/tensorffi.h) when it is loaded (:func:`register_codes`), never from Python.
CLASS_OF_NAME: dict[str, type[NativeError]] = {
    "TF_EINVAL": InvalidArgumentError,
    "TF_ESHAPE": NativeShapeError,
    "TF_ETYPE": NativeTypeError,
    "TF_ENOMEM": NativeMemoryError,
    "TF_EPARSE": ParseError,
    "TF_EOVERFLOW": NativeOverflowError,
    "TF_EINTERRUPTED": CancelledError,
    "TF_ECALLBACK": NativeError,
    "TF_EIO": NativeIOError,
    "TF_EINTERNAL": NativeError,
}

#: status code -> exception class, and -> its TF_E* name (filled by register_codes)
CODE_CLASSES: dict[int, type[NativeError]] = {}
CODE_NAMES: dict[int, str] = {}


def register_codes(codes: dict[str, int]) -> None:
    """Record the native module's status codes (``{"TF_EINVAL": -1, ...}``)."""
    for name, code in codes.items():
        CODE_NAMES[code] = name
        if name in CLASS_OF_NAME:
            CODE_CLASSES[code] = CLASS_OF_NAME[name]


def error_for_status(code: int, function: str, message: str = "", *, native: bool = True) -> NativeError:
    """The exception for a non-zero status ``code`` returned by C function ``function``.

    ``native``: a function of tensorffi's own library, whose TF_E* codes map to the
    classes above; a user library's codes mean what that library says, so they are
    a plain :class:`NativeError` carrying the code."""
    if not native:
        return NativeError(message or f"{function}() returned status {code}", code, function)
    cls = CODE_CLASSES.get(code, NativeError)
    name = CODE_NAMES.get(code, f"status {code}")
    text = message or f"{function} failed"
    return cls(f"{text} [{name}]", code, function)


__all__ = [
    name
    for name, obj in list(globals().items())
    if isinstance(obj, type) and issubclass(obj, Exception) and not issubclass(obj, Warning)
] + ["BuildWarning", "CacheWarning", "UncheckedWarning"] + ["error_for_status", "register_codes", "CODE_CLASSES", "CODE_NAMES", "CLASS_OF_NAME"]


def __dir__() -> list[str]:
    return sorted(__all__)  # the API only: tab completion does not offer imports (np, torch, ...)
