# SPDX-License-Identifier: MIT
"""Exceptions: one base class, builtins a caller would catch, messages with context."""
from __future__ import annotations

import numpy as np
import pytest

import tensorffi
from tensorffi import errors


@pytest.mark.parametrize(
    "cls, builtin",
    [
        (errors.DTypeError, TypeError),
        (errors.ArgumentTypeError, TypeError),
        (errors.DeviceError, ValueError),
        (errors.LayoutError, ValueError),
        (errors.WritabilityError, ValueError),
        (errors.ShapeError, ValueError),
        (errors.ArgumentOverflowError, OverflowError),
        (errors.ContractError, ValueError),
        (errors.BuildError, RuntimeError),
        (errors.NativeError, RuntimeError),
        (errors.InvalidArgumentError, ValueError),
        (errors.ParseError, ValueError),
        (errors.NativeMemoryError, MemoryError),
        (errors.NativeOverflowError, OverflowError),
    ],
)
def test_every_error_is_a_tensorffi_error_and_a_builtin(cls, builtin):
    assert issubclass(cls, errors.TensorFFIError)
    assert issubclass(cls, builtin)


# The status -> exception table, written out here (not read from tensorffi.errors):
# what a caller catches for each TF_E* code of csrc/tensorffi.h.
STATUS_TABLE = [
    (-1, "TF_EINVAL", errors.InvalidArgumentError, ValueError),
    (-2, "TF_ESHAPE", errors.NativeShapeError, ValueError),
    (-3, "TF_ETYPE", errors.NativeTypeError, TypeError),
    (-4, "TF_ENOMEM", errors.NativeMemoryError, MemoryError),
    (-5, "TF_EPARSE", errors.ParseError, ValueError),
    (-6, "TF_EOVERFLOW", errors.NativeOverflowError, OverflowError),
    (-7, "TF_EINTERRUPTED", errors.CancelledError, RuntimeError),
    (-8, "TF_ECALLBACK", errors.NativeError, RuntimeError),
    (-9, "TF_EIO", errors.NativeIOError, OSError),
    (-10, "TF_EINTERNAL", errors.NativeError, RuntimeError),
]


@pytest.mark.parametrize("code, name, cls, builtin", STATUS_TABLE)
def test_status_codes_map_to_classes_with_message(code, name, cls, builtin):
    exc = errors.error_for_status(code, "tf_demo", "something broke")
    assert type(exc) is cls and isinstance(exc, builtin) and isinstance(exc, errors.NativeError)
    assert exc.code == code and exc.function == "tf_demo"
    assert "something broke" in str(exc) and name in str(exc)


def test_the_table_covers_every_code():
    assert sorted(errors.CODE_CLASSES) == sorted(c for c, *_ in STATUS_TABLE)
    assert {c: n for c, n, *_ in STATUS_TABLE} == {c: n for c, n in errors.CODE_NAMES.items() if c}


@pytest.fixture(scope="module")
def status_lib(tmp_path_factory):
    """A user's C function that returns whatever status it is given, compiled."""
    return tensorffi.compile(
        "errors_status", "int give_status(int code);", source="int give_status(int code) { return code; }",
        contracts={"give_status": "return: status"}, cache=tmp_path_factory.mktemp("tfcache-errors"),
    )


@pytest.mark.parametrize("code, name, cls, builtin", STATUS_TABLE)
def test_a_users_c_function_returning_each_status_raises_native_error_with_its_code(
    status_lib, code, name, cls, builtin
):
    # A user library's status codes mean what that library says (its -2 is not
    # tensorffi's TF_ESHAPE): a plain NativeError carrying the code, never a class
    # chosen by tensorffi's own table.
    with pytest.raises(errors.NativeError) as info:
        status_lib.give_status(code)
    assert type(info.value) is errors.NativeError, (code, type(info.value))
    assert info.value.code == code and info.value.function == "give_status"
    assert f"status {code}" in str(info.value)
    assert status_lib.give_status(0) is None  # 0 is no error


def test_native_kernels_raise_the_class_of_their_status():
    """Real statuses from tensorffi's own C: TF_EINVAL, TF_ESHAPE, TF_EPARSE, TF_EINTERRUPTED."""
    from tensorffi import io as tio
    from tensorffi._lib import lib, native

    with pytest.raises(errors.InvalidArgumentError, match="n must be >= 0"):
        tensorffi.core.raw.tf_core_iota_i64(tensorffi.core.iota(n=2), -3)
    # TF_ESHAPE: the IIR kernel given a negative size through its raw binding.
    sosfilt = native("tf_signal_sosfilt_f64", "zi: in? [k]; zf: inout? [k]")
    sos = np.array([[1.0, 0, 0, 1.0, 0, 0]])
    x = np.zeros(4)
    y = np.zeros(4)
    with pytest.raises(errors.NativeShapeError, match="negative size") as info:
        sosfilt(sos, 1, x, y, 1, -4, 1, 1)  # zi, zf: NULL
    assert info.value.code == lib.TF_ESHAPE
    with pytest.raises(errors.ParseError, match="line 2"):
        tio.read_csv(b"1,2\n3,x\n")
    # TF_EINTERRUPTED: the wait-flag self-test gives up on a flag nobody sets.
    with pytest.raises(errors.CancelledError) as info:
        tensorffi.core.raw.tf_core_wait_flag(np.zeros(1, np.int32), 1)
    assert info.value.code == lib.TF_EINTERRUPTED


def test_c_status_codes_agree_with_python_table():
    from tensorffi._lib import lib

    for code, name in errors.CODE_NAMES.items():
        assert getattr(lib, name) == code


def test_native_failure_carries_the_c_message():
    with pytest.raises(errors.InvalidArgumentError) as err:
        tensorffi.core.raw.tf_core_iota_i64(tensorffi.core.iota(n=2), -3)
    assert "n must be >= 0, got -3" in str(err.value)
    assert err.value.code == -1
    assert err.value.function == "tf_core_iota_i64"


def test_parse_error_carries_position():
    exc = errors.ParseError("bad token", line=3, column=7, offset=42, text="1.2.3")
    assert (exc.line, exc.column, exc.offset, exc.text) == (3, 7, 42, "1.2.3")
    assert isinstance(exc, ValueError)


@pytest.mark.parametrize(
    "contract, match",
    [
        ("x: [n", "cannot read|expected"),
        ("return: maybe", "return must be one of"),
        ("x: [n]; x: [m]", "described twice"),
        ("nope: [n]", "not a parameter"),
        ("n: [3]", "scalar"),
    ],
)
def test_bad_contracts_are_refused_at_bind_time(contract, match):
    from tensorffi._lib import native

    with pytest.raises(errors.ContractError, match=match):
        native("tf_core_scale_f32", contract)
