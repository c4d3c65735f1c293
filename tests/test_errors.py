# SPDX-License-Identifier: MIT
"""Exceptions: one base class, builtins a caller would catch, messages with context."""
from __future__ import annotations

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


@pytest.mark.parametrize("code", sorted(errors.CODE_CLASSES))
def test_status_codes_map_to_classes_with_message(code):
    exc = errors.error_for_status(code, "tf_demo", "something broke")
    assert isinstance(exc, errors.NativeError)
    assert type(exc) is errors.CODE_CLASSES[code]
    assert exc.code == code and exc.function == "tf_demo"
    assert "something broke" in str(exc) and errors.CODE_NAMES[code] in str(exc)


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
