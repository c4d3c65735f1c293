# SPDX-License-Identifier: MIT
"""Contracts for struct fields (issue 36, part 4): a struct's pointer fields are checked
against its length fields (and the function's arguments) at every call that passes it,
with the errors of ordinary arguments. On 36e677b every case here reached C unchecked:
``data`` of 4 floats with ``n = 12`` had C write 8 floats past the end, a tensor resized
after its assignment left the struct pointing at freed memory, libsamplerate's
``SRC_DATA`` crashed."""
from __future__ import annotations

import ctypes.util
import string
import warnings

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tensorffi
from tensorffi import ArgumentTypeError, ContractError, LayoutError, ShapeError, UncheckedWarning

SOURCE = r"""
#include <stdint.h>
typedef struct span { float *data; int64_t n; } span;
typedef struct pair { const float *in; float *out; int64_t n; float gain; } pair;
typedef struct srcd {
    const float *data_in; float *data_out;
    long input_frames, output_frames;
    long input_frames_used, output_frames_gen;
    int end_of_input; double ratio;
} srcd;
typedef struct img { uint8_t *pixels; int width; int height; } img;
typedef struct obuf { float *buf; int gain; } obuf;
typedef struct outer { span inner; span *ref; } outer;

void span_fill(span *s, float v) { for (int64_t i = 0; i < s->n; i++) s->data[i] = v; }
double span_sum(const span *s) { double t = 0; for (int64_t i = 0; i < s->n; i++) t += s->data[i]; return t; }
void pair_run(const pair *p) { for (int64_t i = 0; i < p->n; i++) p->out[i] = p->gain * p->in[i]; }
/* copies min(input, output) frames of 'channels' interleaved samples, like src_simple at ratio 1 */
int src_copy(srcd *d, int channels) {
    long frames = d->input_frames < d->output_frames ? d->input_frames : d->output_frames;
    for (long i = 0; i < frames * channels; i++) d->data_out[i] = d->data_in[i];
    d->input_frames_used = frames; d->output_frames_gen = frames;
    return 0;
}
int64_t img_sum(const img *im) {
    int64_t t = 0;
    for (int64_t i = 0; i < (int64_t)im->width * im->height; i++) t += im->pixels[i];
    return t;
}
void obuf_scale(obuf *o, int64_t count) { for (int64_t i = 0; i < count; i++) o->buf[i] *= (float)o->gain; }
double outer_sum(const outer *o) { return span_sum(&o->inner) + (o->ref ? span_sum(o->ref) : 0.0); }
"""

SRC_TYPE = "data_in: [input_frames, _ch]; data_out: [output_frames, _ch]"
SRC_FN = "d.data_in: [input_frames * channels]; d.data_out: [output_frames * channels]"


@pytest.fixture(scope="module")
def lib(cache):
    return tensorffi.compile("structs_inferred", source=SOURCE)


@pytest.fixture(scope="module")
def typed(cache):
    """The same C with contracts: SRC's by type, src_copy's own with the channels argument."""
    return tensorffi.compile("structs_typed", source=SOURCE, contracts={
        "srcd": SRC_TYPE, "src_copy": SRC_FN, "obuf_scale": "o.buf: [count]", "img": "pixels: [height, width]"})


def arr(kind, values):
    return torch.from_numpy(values) if kind == "torch" else values


# --------------------------------------------------------------------------- #
# lengths inferred from the field names                                        #
# --------------------------------------------------------------------------- #


def test_a_length_field_larger_than_the_array_is_refused_before_c_runs(lib, kind, rng):
    data = rng.standard_normal(4).astype(np.float32)
    x = arr(kind, data.copy())
    s = lib.struct("span", data=x, n=12)
    with pytest.raises(ShapeError, match=r"argument 's': struct span field 'data' holds 4 elements, but field 'n' "
                                         r"is 12: C would access 12"):
        lib.span_fill(s, 1.0)
    np.testing.assert_array_equal(np.asarray(x), data)  # nothing written


def test_inferred_lengths_are_lower_bounds(lib, kind, rng):
    data = rng.standard_normal(10).astype(np.float32)
    x = arr(kind, data.copy())
    for n in (10, 7, 0, -3):  # C accesses n (nothing for n <= 0)
        s = lib.struct("span", data=x, n=n)
        assert lib.span_sum(s) == pytest.approx(float(np.sum(data[:max(n, 0)], dtype=np.float64)), rel=1e-6)
    s = lib.struct("span", data=x, n=10)
    lib.span_fill(s, 2.5)
    np.testing.assert_array_equal(np.asarray(x), np.full(10, 2.5, np.float32))


def test_pointers_before_one_length_share_it(lib, rng):
    a = rng.standard_normal(6).astype(np.float32)
    out = np.zeros(6, np.float32)
    lib.pair_run(lib.struct("pair", **{"in": a, "out": out, "n": 6, "gain": 3.0}))
    np.testing.assert_allclose(out, 3.0 * a, rtol=1e-6)
    with pytest.raises(ShapeError, match=r"field 'out' holds 3 elements, but field 'n' is 6"):
        lib.pair_run(lib.struct("pair", **{"in": a, "out": np.zeros(3, np.float32), "n": 6}))
    with pytest.raises(ShapeError, match=r"field 'in' holds 2 elements"):
        lib.pair_run(lib.struct("pair", **{"in": a[:2], "out": out, "n": 6}))


def test_as_many_lengths_as_pointers_pair_in_order(lib, rng):
    """libsamplerate's SRC_DATA layout: data_in takes input_frames, data_out output_frames."""
    x = rng.standard_normal(8).astype(np.float32)
    y = np.zeros(5, np.float32)
    d = lib.struct("srcd", data_in=x, data_out=y, input_frames=8, output_frames=5, ratio=1.0)
    assert lib.src_copy(d, 1) == 0
    np.testing.assert_array_equal(y, x[:5])
    assert d.output_frames_gen == 5
    d.output_frames = 9
    with pytest.raises(ShapeError, match=r"field 'data_out' holds 5 elements, but field 'output_frames' is 9"):
        lib.src_copy(d, 1)


def test_two_adjacent_lengths_give_a_product(lib, rng):
    pix = rng.integers(0, 255, 12, dtype=np.uint8)
    assert lib.img_sum(lib.struct("img", pixels=pix, width=4, height=3)) == int(pix.astype(np.int64).sum())
    with pytest.raises(ShapeError, match=r"holds 12 elements, but field 'width' \* 'height' is 4 \* 4"):
        lib.img_sum(lib.struct("img", pixels=pix, width=4, height=4))


def test_a_field_no_rule_covers_is_unchecked_and_said_once(lib):
    text = str(tensorffi.describe(lib.obuf_scale))
    assert "UNCHECKED" in text and "buf" in text
    o = lib.struct("obuf", buf=np.ones(4, np.float32), gain=2)
    with pytest.warns(UncheckedWarning, match=r"struct field obuf\.buf has no length.*contracts=\{'obuf': 'buf: \[n\]'\}"):
        lib.obuf_scale(o, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lib.obuf_scale(o, 4)  # once
    np.testing.assert_array_equal(o.buf, np.full(4, 4.0, np.float32))


def test_unsized_says_no_length_applies(cache):
    quiet = tensorffi.compile("structs_unsized", source=SOURCE, contracts={"obuf": "buf: unsized"})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        quiet.obuf_scale(quiet.struct("obuf", buf=np.ones(2, np.float32), gain=3), 2)
    assert "UNCHECKED" not in str(tensorffi.describe(quiet.obuf_scale))


# --------------------------------------------------------------------------- #
# contracts: the struct's, and a function's own clauses                        #
# --------------------------------------------------------------------------- #


def test_type_contract_ties_fields_by_a_free_size(typed, kind, rng):
    frames, ch = 50, 2
    x = rng.standard_normal((frames, ch)).astype(np.float32)
    y = np.zeros((40, ch), np.float32)
    d = typed.struct("srcd", data_in=arr(kind, x), data_out=arr(kind, y), input_frames=frames, output_frames=40)
    assert typed.src_copy(d, ch) == 0
    np.testing.assert_array_equal(np.asarray(d.data_out), x[:40])


def test_function_clause_uses_its_argument(typed, rng):
    x = rng.standard_normal((30, 2)).astype(np.float32)
    y = np.zeros((30, 2), np.float32)
    d = typed.struct("srcd", data_in=x, data_out=y, input_frames=30, output_frames=30)
    with pytest.raises(ShapeError, match=r"field 'data_in' holds an array of shape \[60\], but its contract says "
                                         r"\[input_frames\*channels\] = \[90\] \(input_frames = 30 \(field\), "
                                         r"channels = 3 \(argument\)\)"):
        typed.src_copy(d, 3)  # channels wrong: C would read 90 floats of 60
    np.testing.assert_array_equal(y, 0)


def test_type_contract_shape_mismatch(typed, cache, rng):
    bytype = tensorffi.compile("structs_bytype", source=SOURCE, contracts={"srcd": SRC_TYPE})
    x = rng.standard_normal((30, 2)).astype(np.float32)
    d = bytype.struct("srcd", data_in=x, data_out=np.zeros((30, 3), np.float32), input_frames=30, output_frames=30)
    with pytest.raises(ShapeError, match=r"field 'data_out' holds an array of shape \[30, 3\], but its contract says "
                                         r"\[output_frames, _ch\] = \[30, 2\]"):
        bytype.src_copy(d, 2)
    d.input_frames = 31
    d.data_out = np.zeros((30, 2), np.float32)
    with pytest.raises(ShapeError, match=r"field 'data_in' holds an array of shape \[30, 2\].*= \[31, 2\]"):
        bytype.src_copy(d, 2)


def test_multi_dimension_field_shape(typed, rng):
    pix = rng.integers(0, 255, (3, 4), dtype=np.uint8)
    assert typed.img_sum(typed.struct("img", pixels=pix, width=4, height=3)) == int(pix.astype(np.int64).sum())
    with pytest.raises(ShapeError, match=r"\[height, width\] = \[4, 3\]"):
        typed.img_sum(typed.struct("img", pixels=pix, width=3, height=4))


def test_function_clause_with_the_count_argument(typed):
    o = typed.struct("obuf", buf=np.ones(4, np.float32), gain=2)
    with pytest.raises(ShapeError, match=r"field 'buf' holds an array of shape \[4\], but its contract says \[count\]"):
        typed.obuf_scale(o, 9)
    typed.obuf_scale(o, 4)
    np.testing.assert_array_equal(o.buf, np.full(4, 2.0, np.float32))


# --------------------------------------------------------------------------- #
# what the bridge cannot check, said; memory that moves                        #
# --------------------------------------------------------------------------- #


def test_null_field_where_c_reads_is_refused(lib):
    s = lib.struct("span", n=5)
    with pytest.raises(ArgumentTypeError, match=r"field 'data' is NULL, but field 'n' is 5"):
        lib.span_sum(s)
    assert lib.span_sum(lib.struct("span", n=0)) == 0.0  # C reads nothing


def test_optional_field_may_be_null(cache):
    opt = tensorffi.compile("structs_opt", source=SOURCE, contracts={"span_sum": "s.data: ?"})
    assert opt.span_sum(opt.struct("span", n=0)) == 0.0
    assert "may be NULL" in str(tensorffi.describe(opt.span_sum))


def test_a_tensor_resized_after_assignment_is_refused(lib, rng):
    x = torch.tensor(rng.standard_normal(4), dtype=torch.float32)
    s = lib.struct("span", data=x, n=4)
    x.resize_(100_000)  # a new allocation: the struct would point at the freed one
    with pytest.raises(LayoutError, match=r"field 'data': the array assigned to it has moved"):
        lib.span_sum(s)
    x.uniform_()
    s.data = x  # assigned again: fine
    s.n = 100_000
    assert lib.span_sum(s) == pytest.approx(float(x.double().sum()), rel=1e-5)


def test_a_storage_shrunk_after_assignment_is_refused(lib):
    x = torch.ones(1000)
    s = lib.struct("span", data=x, n=1000)
    x.untyped_storage().resize_(0)
    with pytest.raises(LayoutError):
        lib.span_sum(s)


def test_a_numpy_array_moved_after_assignment_is_refused(lib):
    a = np.ones(8, np.float32)
    s = lib.struct("span", data=a, n=8)
    a.resize(1 << 20, refcheck=False)  # the owner moved it (refcheck off: NumPy cannot see the struct)
    with pytest.raises(LayoutError, match="has moved"):
        lib.span_sum(s)


def test_a_pointer_c_stored_is_said_unchecked_once(lib, rng):
    """An init function storing a pointer into the struct (``job_init(j, data, n)``) is
    legitimate C the bridge cannot measure: the call runs, and says so once."""
    s = lib.struct("span", data=np.ones(4, np.float32), n=4)
    raw = lib.ffi.new("float[]", [1.5, 2.5])
    s.cdata.data, s.cdata.n = raw, 2
    with pytest.warns(UncheckedWarning, match=r"field 'data' no longer points to the array assigned to it"):
        assert lib.span_sum(s) == 4.0
    fresh = lib.struct("span", n=2)
    fresh.cdata.data = raw
    with pytest.warns(UncheckedWarning, match=r"holds a pointer the struct did not set"):
        assert lib.span_fill(fresh, 0.5) is None
    assert list(raw) == [0.5, 0.5]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert lib.span_sum(s) == 1.0  # once per function and field
    s.data = np.full(3, 2.0, np.float32)  # assigned through the struct again: checked again
    s.n = 3
    assert lib.span_sum(s) == 6.0
    s.n = 4
    with pytest.raises(ShapeError):
        lib.span_sum(s)


def test_a_raw_cffi_struct_warns_once(lib):
    raw = lib.ffi.new("span *")
    buf = lib.ffi.new("float[]", [1.0, 2.0])
    raw.data, raw.n = buf, 2
    with pytest.warns(UncheckedWarning, match=r"raw cffi pointer to span.*lib\.struct\('span'"):
        assert lib.span_sum(raw) == 3.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert lib.span_sum(raw) == 3.0


def test_nested_structs_are_checked_with_their_rules(lib, rng):
    a = rng.standard_normal(5).astype(np.float32)
    b = rng.standard_normal(3).astype(np.float32)
    o = lib.struct("outer", inner=lib.struct("span", data=a, n=5), ref=lib.struct("span", data=b, n=3))
    assert lib.outer_sum(o) == pytest.approx(float(a.sum(dtype=np.float64) + b.sum(dtype=np.float64)), rel=1e-5)
    o.ref = lib.struct("span", data=b, n=30)
    with pytest.raises(ShapeError, match=r"field 'ref': struct span field 'data' holds 3 elements, but field 'n' is 30"):
        lib.outer_sum(o)
    o.ref = None
    o.inner = lib.struct("span", data=a, n=50)  # by value: the copy C sees is checked
    with pytest.raises(ShapeError, match=r"field 'inner': struct span field 'data' holds 5 elements"):
        lib.outer_sum(o)


def test_describe_lists_the_field_rules(typed, lib):
    text = str(tensorffi.describe(typed.src_copy))
    assert "data_in float32 [input_frames*channels]" in text and "data_out float32 [output_frames*channels]" in text
    text = str(tensorffi.describe(lib.src_copy))
    assert "holds at least input_frames" in text and "holds at least output_frames" in text


# --------------------------------------------------------------------------- #
# mistakes in a struct contract, at bind time                                  #
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("contracts, message", [
    ({"srcd": "dat_in: [input_frames]"}, r"struct srcd has no field 'dat_in'; did you mean 'data_in'"),
    ({"srcd": "data_in: [input_frame, _c]"}, r"size 'input_frame' .*did you mean 'input_frames'"),
    ({"src_copy": "d.data_in: [input_frames * chanels]"}, r"size 'chanels' .*did you mean 'channels'"),
    ({"src_copy": "dd.data_in: [input_frames]"}, r"describes fields of 'dd', which is not a struct parameter.*its "
                                                 r"struct parameters: d"),
    ({"srcd": "ratio: [input_frames]"}, r"field 'ratio' \(double\) is not a pointer to numbers"),
    ({"srcd": "data_in: [input_frames * _k]"}, r"size ._k. is not an integer field of srcd.*no field's dimension fixes"),
    ({"srcd": "data_in: [m]"}, r"size 'm' appears only once.*length field\(s\) input_frames, output_frames"),
    ({"srcd": "data_in: [ratio]"}, r"size 'ratio' is field 'ratio' of srcd \(double\), not an integer"),
    ({"srcd": "data_in: out [input_frames]"}, r"cannot be 'out'"),
    ({"srcd": "input_frames = 3"}, r"says what its pointer fields hold"),
    ({"srcd": "data_in: inout [input_frames]"}, r"C cannot write it"),
])
def test_contract_mistakes_are_refused_at_bind_time(cache, contracts, message):
    with pytest.raises(ContractError, match=message):
        tensorffi.compile("structs_bad", source=SOURCE, contracts=contracts)


NAMES = ["data_in", "data_out", "input_frames", "output_frames"]


def _one_edit(draw, word: str) -> str:
    i = draw(st.integers(0, len(word) - 1))
    op = draw(st.sampled_from(["drop", "swap", "sub", "insert", "case"]))
    letter = draw(st.sampled_from(string.ascii_lowercase))
    if op == "drop":
        return word[:i] + word[i + 1:]
    if op == "swap" and i + 1 < len(word):
        return word[:i] + word[i + 1] + word[i] + word[i + 2:]
    if op == "sub":
        return word[:i] + letter + word[i + 1:]
    if op == "case":
        return word.upper()
    return word[:i] + letter + word[i:]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_typo_in_a_struct_contract_is_refused(data, cache):
    """hypothesis: one edit of a field or size name in SRC's contract never binds quietly."""
    target = data.draw(st.sampled_from(NAMES))
    typo = _one_edit(data.draw, target)
    if typo in NAMES or typo == target:
        return
    text = SRC_TYPE.replace(target, typo, 1) if target in SRC_TYPE else SRC_TYPE
    with pytest.raises(ContractError):
        tensorffi.compile("structs_typo", source=SOURCE, contracts={"srcd": text})


# --------------------------------------------------------------------------- #
# libsamplerate's own SRC_DATA (gallery)                                       #
# --------------------------------------------------------------------------- #

SAMPLERATE = ctypes.util.find_library("samplerate")


@pytest.mark.skipif(SAMPLERATE is None, reason="libsamplerate is not installed (Debian: libsamplerate0-dev)")
def test_libsamplerate_src_simple_checks_src_data(rng):
    lib = tensorffi.load(SAMPLERATE, """
        typedef struct { const float *data_in; float *data_out; long input_frames, output_frames;
                         long input_frames_used, output_frames_gen; int end_of_input; double src_ratio; } SRC_DATA;
        int src_simple(SRC_DATA *data, int converter_type, int channels);
        const char *src_strerror(int error);
    """, contracts={"src_simple": "data.data_in: [input_frames * channels]; data.data_out: [output_frames * channels];"
                                  "return: status(src_strerror)"})
    frames, ch = 400, 2
    x = torch.from_numpy(rng.standard_normal((frames, ch)).astype(np.float32))
    y = torch.zeros(2 * frames, ch)
    d = lib.struct("SRC_DATA", data_in=x, data_out=y, input_frames=frames, output_frames=2 * frames,
                   end_of_input=1, src_ratio=2.0)
    lib.src_simple(d, 2, ch)  # SRC_SINC_FASTEST
    assert d.input_frames_used == frames and d.output_frames_gen > 1.9 * frames
    assert float(y[: d.output_frames_gen].abs().max()) > 0.1
    d.output_frames = 10 * frames  # more frames than data_out holds: libsamplerate would write past it
    with pytest.raises(ShapeError, match=r"field 'data_out' holds an array of shape \[1600\].*= \[8000\]"):
        lib.src_simple(d, 2, ch)
    with pytest.raises(ShapeError, match=r"field 'data_in'"):
        d.output_frames = 2 * frames
        lib.src_simple(d, 2, 3)  # channels the data does not have
