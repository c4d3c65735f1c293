# SPDX-License-Identifier: MIT
"""The planted bugs: each a small, realistic mistake a user would suffer from.

A mutant is an exact text snippet of one file and its replacement. When the code
under a snippet changes, the harness reports the mutant ``stale`` (and fails): copy
the new lines into ``find``, re-plant the same mistake in ``replace``, and check the
mutant is still killed (``python -m tests.mutation --only ID``). ``tests`` is the
pytest selection that must catch it, kept small (the mutant runs only these).

``owner`` is the area's owner (COORDINATION.md); mutants in code under rewrite are
expected to go stale when the rewrite lands.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mutant:
    id: str
    file: str  # relative to the repository root
    find: str  # exact text, present exactly once in the file
    replace: str
    effect: str  # what a user would suffer
    tests: tuple[str, ...]  # pytest arguments (files, node ids, -k expressions)
    owner: str = ""

    @property
    def native(self) -> bool:
        """A C mutant: tensorffi._native is rebuilt in the scratch copy."""
        return self.file.startswith(("csrc/", "cdefs/")) or self.file == "build_ffi.py"


REGRESSIONS = "tests/test_regressions_plan.py"

MUTANTS: list[Mutant] = [
    # ---- the operator layer and the contract plan (lead; under rewrite) ---- #
    Mutant(
        "op-out-factor-dropped",
        "csrc/bridge_call.c",
        "    int64_t v = d->factor;\n    for (int k = 0; k < d->nsym; k++) {",
        "    int64_t v = d->nsym ? 1 : d->factor;\n    for (int k = 0; k < d->nsym; k++) {",
        "heap overflow: an operator allocates y: out [2*n] with n elements, C writes 2*n",
        (REGRESSIONS + "::test_factor_output_operator_eager_matches_reference",),
        "lead",
    ),
    Mutant(
        "fake-factor-ignored",
        "tensorffi/_bridge/generate.py",
        '            dims = ", ".join(self.dim_expr(d) for d in o.shape)\n            results.append(',
        '            dims = ", ".join(" * ".join(self.z(s) for s in d.symbols) or str(d.factor) for d in o.shape)\n            results.append(',
        "torch.compile / meta shapes wrong for an output [2*n]",
        (REGRESSIONS + "::test_factor_output_operator_shape_rule",),
        "lead",
    ),
    Mutant(
        "ndarray-copy-not-kept-alive",
        "tensorffi/_bridge/arrays.py",
        '            a = np.array(a, order="C", copy=True)\n        except MemoryError as exc:\n'
        '            raise _copy_failed(where, tuple(a.shape), a.itemsize, exc) from None\n'
        '    return Prepared(_numpy_address(a), a, a.shape, "numpy", None, storage)',
        '            c = np.array(a, order="C", copy=True)\n        except MemoryError as exc:\n'
        '            raise _copy_failed(where, tuple(a.shape), a.itemsize, exc) from None\n'
        '    return Prepared(_numpy_address(c), a, c.shape, "numpy", None, storage)',
        "C reads freed memory: the contiguous copy of a non-contiguous NumPy input dies before the call",
        (REGRESSIONS + "::test_noncontiguous_numpy_copy_stays_alive_during_the_call",),
        "lead",
    ),
    Mutant(
        "fast-path-dtype-unchecked",
        "csrc/bridge_call.c",
        "    if (p->dtype != 0 && (d.dtype.code != tfb_dtypes[p->dtype].code || d.dtype.bits != tfb_dtypes[p->dtype].bits))",
        "    if (p->dtype != 0 && (d.dtype.code != tfb_dtypes[p->dtype].code || d.dtype.bits != tfb_dtypes[p->dtype].bits) && p->rank == -2)",
        "silent reinterpretation: a float64 tensor is handed to float * by the native path",
        (REGRESSIONS + "::test_wrong_dtype_into_float_pointer_is_refused",),
        "lead",
    ),
    Mutant(
        "written-noncontiguous-accepted",
        "tensorffi/_bridge/arrays.py",
        "        elif not t.is_contiguous():\n            raise LayoutError(",
        "        elif False:\n            raise LayoutError(",
        "C writes a strided view as if dense: wrong elements overwritten",
        ("tests/test_bridge.py", "-k", "contiguous or written"),
        "lead",
    ),
    Mutant(
        "readonly-numpy-written",
        "tensorffi/_bridge/arrays.py",
        "        if not flags.writeable:",
        "        if False:",
        "C writes a read-only array (a broadcast view, bytes' memory)",
        ("tests/test_bridge.py", "-k", "read_only or readonly or writable"),
        "lead",
    ),
    Mutant(
        "requires-grad-written",
        "tensorffi/_bridge/arrays.py",
        '        if t.requires_grad and not grad_writes_ok:',
        '        if False:',
        "autograd silently wrong: C writes a leaf that requires grad",
        ("tests/test_bridge.py", "-k", "grad"),
        "lead",
    ),
    Mutant(
        "factor-multiple-unchecked",
        "tensorffi/_bridge/generate.py",
        '            bind = [] if k == 1 else [',
        '            bind = [] if k >= 1 else [',
        "an input of 7 elements is taken as [2*n] with n=3: the last element silently ignored",
        (REGRESSIONS + "::test_factor_input_size_must_be_a_multiple",),
        "lead",
    ),
    Mutant(
        "version-counter-not-bumped",
        "tensorffi/_bridge/generate.py",
        '            self.emit(f"if {written[0]} is not None: _bump(({written[0]},))")',
        '            self.emit("pass")',
        "autograd uses a tensor C overwrote without noticing (no version bump)",
        (REGRESSIONS + "::test_in_place_write_is_seen_by_autograd",),
        "lead",
    ),
    Mutant(
        "numel-fill-first-dim",
        "tensorffi/_bridge/generate.py",
        '        return f"_numel({array_var[src.name]})"',
        '        return f"len({array_var[src.name]})"',
        "numel(x) passes the first dimension: C processes part of a 2-D array",
        (REGRESSIONS + "::test_numel_fill_counts_every_element",),
        "lead",
    ),
    Mutant(
        "int-range-off-by-one",
        "tensorffi/_bridge/scalars.py",
        "    if not lo <= i <= hi:",
        "    if not lo <= i <= hi + 1:",
        "an integer one past the C type's maximum wraps silently (255 + 1 into uint8_t)",
        ("tests/test_bridge.py", "-k", "overflow or range or fit"),
        "lead",
    ),
    Mutant(
        "status-2-wrong-class",
        "tensorffi/errors.py",
        '    "TF_ESHAPE": NativeShapeError,',
        '    "TF_ESHAPE": InvalidArgumentError,',
        "TF_ESHAPE raised as InvalidArgumentError: `except ShapeError`-style handlers miss it",
        ("tests/test_errors.py",),
        "testsci",
    ),
    Mutant(
        "callback-exception-swallowed",
        "tensorffi/_callbacks.py",
        "        except BaseException as exc:  # noqa: BLE001 - re-raised after C returns\n            self.error = exc\n",
        "        except BaseException as exc:  # noqa: BLE001 - re-raised after C returns\n            del exc\n",
        "an exception raised in a progress callback is lost: the caller sees a CancelledError",
        ("tests/test_callbacks.py", "tests/test_callback_errors.py"),
        "lead",
    ),
    # ---- bring your own C (byo; under rewrite) ---- #
    Mutant(
        "cache-key-without-define-macros",
        "tensorffi/byo.py",
        "    material = dict(\n        recipe=recipe.as_dict(),",
        '    material = dict(\n        recipe={k: v for k, v in recipe.as_dict().items() if k != "define_macros"},',
        "a changed -D silently reuses the old binary",
        (REGRESSIONS + "::test_compile_cache_key_includes_define_macros",),
        "byo",
    ),
    Mutant(
        "cache-key-without-depends",
        "tensorffi/byo.py",
        "            if data is None or _sha(data) != sha:\n                break",
        "            if data is None:\n                break",
        "an edited header (or depends= file) silently reuses the old binary",
        ("tests/test_byo_build.py::test_an_edited_header_rebuilds",
         "tests/test_byo_build.py::test_a_header_found_through_include_dirs_is_tracked",
         REGRESSIONS + "::test_compile_cache_key_includes_depends"),
        "byo",
    ),
    # ---- C: core runtime (runtime; under rewrite) ---- #
    Mutant(
        "parallel-for-drops-remainder",
        "csrc/runtime.c",
        "    int64_t begin = p->n * unit / p->units, end = p->n * (unit + 1) / p->units;",
        "    int64_t begin = p->n * unit / p->units, end = p->n * (unit + 1) / p->units - (unit + 1 == p->units);",
        "multi-threaded kernels skip the last element whenever n % nthreads != 0",
        (REGRESSIONS + "::test_threaded_kernels_cover_every_element", "tests/test_threads.py"),
        "runtime",
    ),
    # ---- C: CSV parsing (parse; under rewrite) ---- #
    Mutant(
        "parse-quote-only-right-after-delimiter",
        "csrc/parse_syntax.c",
        "        if (c == '\"') {\n            p = tf_quote_close(sx, p + 1);\n            if (!p) return sx->end;\n            continue;\n        }\n",
        "        if (c == '\"' && (p == sx->data || p[-1] == (uint8_t)sx->delim || p[-1] == '\\n' || p[-1] == '\\r')) {\n"
        "            p = tf_quote_close(sx, p + 1);\n            if (!p) return sx->end;\n            continue;\n        }\n"
        "        if (c == '\"') { p++; continue; }\n",
        "a quoted field after a blank (1, \"a<newline>b\") is cut at its newline: wrong records, wrong error lines",
        (REGRESSIONS + "::test_parse_error_line_after_quoted_newline",),
        "parse",
    ),
    Mutant(
        "parse-crlf-counted-twice",
        "csrc/parse_syntax.c",
        "        if (*p == '\\n' || (*p == '\\r' && !(p + 1 < sx->end && p[1] == '\\n'))) {",
        "        if (*p == '\\n' || *p == '\\r') {",
        "ParseError in a CRLF file names twice the real line",
        (REGRESSIONS + "::test_parse_error_position_for_every_line_ending",),
        "parse",
    ),
    Mutant(
        "parse-bom-is-a-column",
        "csrc/parse_syntax.c",
        "        ls = data + 3; /* the byte order mark is not a column */",
        "        ls = data; /* the byte order mark is not a column */",
        "ParseError on the first line of a file with a BOM names the wrong column",
        (REGRESSIONS + "::test_parse_error_position_for_every_line_ending",),
        "parse",
    ),
    Mutant(
        "parse-reciprocal-power-of-ten",
        "csrc/parse_number.h",
        "        double d = (double)w; /* exact, and so is 10^|q|: one rounding */\n"
        "        d = q < 0 ? d / tf_p10_f64[-q] : d * tf_p10_f64[q];",
        "        double d = (double)w; /* exact, and so is 10^|q|: one rounding */\n"
        "        d = q < 0 ? d * (1.0 / tf_p10_f64[-q]) : d * tf_p10_f64[q];",
        "decimals parsed one ulp off (multiplying by a rounded 1/10^k is not one rounding)",
        ("tests/test_io.py", "-k", "round or exact or decimal"),
        "parse",
    ),
    Mutant(
        "parse-int-bound-off-by-one",
        "csrc/parse_number.h",
        "    if (__builtin_expect(w > max + (uint64_t)neg, 0)) return 0;",
        "    if (__builtin_expect(w > max + 1, 0)) return 0;",
        "int64 9223372036854775808 read as -9223372036854775808 (int32 2147483648 as -2147483648): silently wrapped",
        ("tests/test_io_int.py", "-k", "overflow or never_wraps or hypothesis"),
        "parse",
    ),
    Mutant(
        "parse-int-vector-twenty-digits",
        "csrc/parse_field.h",
        "        if (__builtin_expect(len >= 32 || nd == 0 || nd > 19 || _mm_popcnt_u64(dotm & fm) > dot, 0)) return NULL;",
        "        if (__builtin_expect(len >= 32 || nd == 0 || nd > 20 || _mm_popcnt_u64(dotm & fm) > dot, 0)) return NULL;",
        "20-digit integers wrap modulo 2^64 in the vector reader: 18446744073709551621 read as 5",
        ("tests/test_io_int.py", "-k", "never_wraps or vector or hypothesis"),
        "parse",
    ),
    Mutant(
        "parse-compress-keeps-separators",
        "csrc/parse_field.h",
        "_mm256_maskz_compress_epi8((__mmask32)(dm & fm), t));",
        "_mm256_maskz_compress_epi8((__mmask32)((dm | sm) & fm), t));",
        "at the AVX-512 level a thousands separator is gathered as a digit: 1,234.5 read as a wrong number "
        "(killed where the CPU has AVX-512 VBMI2; elsewhere that reader does not run)",
        ("tests/test_io_options.py", "-k", "vector_reader or hypothesis_tokens_with_marks"),
        "parse",
    ),
    Mutant(
        "parse-vector-count-forgets-last-byte",
        "csrc/parse_syntax.c",
        "    st->prev_content = content >> 63;",
        "    st->prev_content = 0;",
        "a record whose line end opens a 64-byte block is not counted by the vector record counter: rows lost",
        ("tests/test_io.py",),
        "parse",
    ),
    # ---- C: IIR filtering (signal; under rewrite) ---- #
    Mutant(
        "signal-avx2-fma-sign",
        "csrc/signal.c",
        '#define SFX f32_avx2\n#define IO float\n#define CT float\n#define VT tf_v8f\n#define NL 8\n#define VFMA FMA8F',
        '#define SFX f32_avx2\n#define IO float\n#define CT float\n#define VT tf_v8f\n#define NL 8\n#define VFMA(a, b, c) ((tf_v8f)_mm256_fmsub_ps((__m256)(a), (__m256)(b), (__m256)(c)))',
        "wrong float32 filter output on AVX2 CPUs (one FMA sign flipped)",
        ("tests/test_signal.py", "-k", "simd"),
        "signal",
    ),
    Mutant(
        "signal-avx2-backward-fma-sign",
        "csrc/signal.c",
        '#define SFX f64_avx2\n#define EXACT 1\n#define IO double\n#define CT double\n#define VT tf_v4d\n#define NL 4\n#define VFMA FMA4D',
        '#define SFX f64_avx2\n#define EXACT 1\n#define IO double\n#define CT double\n#define VT tf_v4d\n#define NL 4\n#define VFMA(a, b, c) ((tf_v4d)_mm256_fmsub_pd((__m256d)(a), (__m256d)(b), (__m256d)(c)))',
        "wrong float64 gradients of sosfilt on AVX2 CPUs (the backward's FMA sign flipped; the forward is unfused)",
        (REGRESSIONS + "::test_sosfilt_gradient_at_every_simd_level",),
        "signal",
    ),
    Mutant(
        "signal-streamed-store-one-row",
        "csrc/signal_transpose.h",
        "            for (int l = 0; l < TR_NF; l++) TR_STREAM_PS(TR_ROW(y, l), r[l]);",
        "            for (int l = 0; l < TR_NF; l++) TR_STREAM_PS(TR_ROW(y, 0), r[l]);",
        "large float32 outputs (the non-temporal store path) get every lane's samples in the first row",
        ("tests/test_signal.py", "-k", "large_outputs"),
        "signal",
    ),
    Mutant(
        "signal-f32-radius-too-generous",
        "csrc/signal.c",
        "#define TF_SOS_F32_MAX_RADIUS 0.9\n",
        "#define TF_SOS_F32_MAX_RADIUS 0.99999\n",
        "float32 signals through near-unit-circle poles filtered in float32: large roundoff",
        ("tests/test_signal.py",),
        "signal",
    ),
    # ---- C: physics (runtime; under rewrite) ---- #
    Mutant(
        "physics-softening-not-squared",
        "csrc/physics_impl.h",
        "    c.eps2 = (P_REAL)(params->softening * params->softening);",
        "    c.eps2 = (P_REAL)(params->softening);",
        "softened n-body forces wrong (eps used where eps^2 belongs)",
        ("tests/test_physics.py", "-k", "reference or simd"),
        "runtime",
    ),
    Mutant(
        "physics-lanes-last-body-skipped",
        "csrc/physics_simd.h",
        "        for (int64_t j = i + 1; j < n; j++) {\n            K_LANE_J(j);",
        "        for (int64_t j = i + 1; j < n - 1; j++) {\n            K_LANE_J(j);",
        "batches of systems side by side: the last body's pairs left out (AVX2, odd rows on AVX-512)",
        ("tests/test_physics.py", "-k", "side_by_side"),
        "lead",
    ),
    Mutant(
        "native-numpy-dtype-unchecked",
        "csrc/bridge_call.c",
        "    if (code < 0 || (p->dtype != 0 && code != p->dtype))",
        "    if (code < 0 || (p->dtype != 0 && code != p->dtype && p->rank == -2))",
        "silent reinterpretation: a float64 NumPy array is handed to float * by the native path",
        ("tests/test_bridge.py", "-k", "wrong_dtype"),
        "lead",
    ),
    # ---- this round: the contract plan, memory under C, strings, scalars, handles (lead) ---- #
    Mutant(
        "plan-self-defined-size-accepted",
        "tensorffi/plan.py",
        "        for dep in sorted(deps[node] & defining):\n            visit(dep, stack + [node])",
        "        for dep in sorted(deps[node] & defining - {node}):\n            visit(dep, stack + [node])",
        "heap overflow: 'n = 2*n' binds; y is allocated for n elements while C is told 2n",
        ("tests/test_plan.py", "-k", "circular or circle"),
        "lead",
    ),
    Mutant(
        "plan-optional-only-size-not-a-keyword",
        "tensorffi/plan.py",
        "    free = sorted(s for s in symbols if s not in param_names and s not in input_bound)",
        "    free = sorted(s for s in symbols if s not in param_names and s not in input_bound "
        "and not any(p.optional and p.shape and any(s in d.symbols for d in p.shape) for p in params))",
        "f() says 'pass m=...' and f(m=1) is a TypeError when m is bound only by an optional array",
        ("tests/test_plan.py::test_a_size_bound_only_by_an_optional_array_is_a_keyword",),
        "lead",
    ),
    Mutant(
        "storage-extent-unchecked",
        "tensorffi/_bridge/arrays.py",
        "    if not addr or low < lo or low + span > lo + st.nbytes():",
        "    if not addr:",
        "heap overflow: C writes a 65,536-float tensor whose storage was resized to 16 bytes (the native "
        "path hands it over; the Python path must refuse it)",
        ("tests/test_plan.py", "-k", "storage"),
        "lead",
    ),
    Mutant(
        "aliased-written-arguments-accepted",
        "tensorffi/_bridge/generate.py",
        '                    pairs.append(f"(_a{i} < _a{j} + _b{j} and _a{j} < _a{i} + _b{i} and _b{i} and _b{j})")',
        '                    pairs.append("False")',
        "silent garbage: nbody_(a, a, ...) or axpy_(x, x) with the same memory read and written",
        ("tests/test_plan.py::test_aliased_written_arguments_are_refused",),
        "lead",
    ),
    Mutant(
        "c-string-none-is-null",
        "tensorffi/_bridge/structs.py",
        "    if value is None:\n        if optional:\n            return ffi.NULL, None, None",
        "    if value is None:\n        if True:\n            return ffi.NULL, None, None",
        "SIGSEGV in strlen: None reaches a const char * as NULL",
        ("tests/test_plan.py::test_c_strings",),
        "lead",
    ),
    Mutant(
        "float32-scalar-overflow-silent",
        "tensorffi/_bridge/scalars.py",
        "    if bits == 32 and math.isfinite(f) and f != 0.0:",
        "    if bits == 0 and math.isfinite(f) and f != 0.0:",
        "1e300 becomes inf and 1e-50 becomes 0 in a float parameter, silently",
        ("tests/test_plan.py", "-k", "float_parameters"),
        "lead",
    ),
    Mutant(
        "handle-destroyed-twice",
        "tensorffi/handles.py",
        "            if self.closed:\n                return\n            self.closed = True\n"
        "            now = self.users == 0 and not self.destroyed",
        "            self.closed = True\n            now = self.users == 0",
        "double free: closing a handle twice calls the C destructor twice",
        ("tests/test_handles.py", "-k", "exactly_once and compile"),
        "lead",
    ),
    Mutant(
        "kept-buffer-resizable-accepted",
        "tensorffi/handles.py",
        "    if block is not None:\n        return block\n    if isinstance(value, T.Tensor):",
        "    if block is not None or isinstance(value, T.Tensor):\n        return block if block is not None else value\n"
        "    if isinstance(value, T.Tensor):",
        "use after free: C keeps writing a registered tensor whose storage can be resized or freed",
        ("tests/test_handles.py", "-k", "only_buffer_memory_may_be_kept"),
        "lead",
    ),
    Mutant(
        "callback-exception-lost",
        "tensorffi/handles.py",
        "        with self.lock:\n            self.errors.append(exc)",
        "        with self.lock:\n            pass",
        "an exception raised by a callback on the SDK's thread is swallowed",
        ("tests/test_handles.py", "-k", "exception_in_a_callback and compile"),
        "lead",
    ),
    Mutant(
        "callback-until-return-not-held",
        "tensorffi/_bridge/generate.py",
        "                self.keep_return.append(f\"{holder}._state.hold(('callback', {v}), _x{i})\")",
        "                pass",
        "use after free: libsamplerate calls back into a closure freed when src_callback_new returned (SIGSEGV)",
        ("tests/test_gallery.py", "-k", "callback_is_kept_by_the_converter"),
        "lead",
    ),
    Mutant(
        "released-callback-freed",
        "tensorffi/handles.py",
        "            entry[1].disarm()\n            self.retired.append(entry[1])",
        "            entry[1].disarm()",
        "use after free: C that calls a listener after its unregister call returned jumps into freed code",
        ("tests/test_callbacks_kept.py", "-k", "released_callback_does_not_crash"),
        "lead",
    ),
    # ---- the bridge's native call path (csrc/bridge_call.c, issue 19) ---- #
    Mutant(
        "native-storage-extent-unchecked",
        "csrc/bridge_call.c",
        "        if (lo == 0 || x < lo || x - lo > (uintptr_t)nb || span > (uintptr_t)nb - (x - lo)) {",
        "        if (lo == 0 || (x < lo && span == 0)) {",
        "heap overflow: C writes a view whose storage was shrunk under it (an FSDP-style resize_)",
        ("tests/test_bridge_native.py", "-k", "shrunk or past_its_storage"),
        "lead",
    ),
    Mutant(
        "native-read-only-numpy-written",
        "csrc/bridge_call.c",
        "    if (!(f & TFB_NPY_C_CONTIGUOUS) || !(f & TFB_NPY_ALIGNED) || (written && !(f & TFB_NPY_WRITEABLE)))",
        "    if (!(f & TFB_NPY_C_CONTIGUOUS) || !(f & TFB_NPY_ALIGNED) || (written && (f & TFB_NPY_WRITEABLE) && 0))",
        "C writes into a read-only NumPy array (np.frombuffer of bytes: an immutable object changes)",
        ("tests/test_bridge_native.py", "-k", "hostile and read"),
        "lead",
    ),
    Mutant(
        "native-version-not-bumped",
        "csrc/bridge_call.c",
        "    if (nw) {\n        bumped = PyTuple_New(nw);",
        "    if (0) {\n        bumped = PyTuple_New(nw);",
        "autograd misses C's write: a tensor saved for backward changes and the gradient is silently wrong",
        ("tests/test_bridge_native.py", "-k", "version"),
        "lead",
    ),
    Mutant(
        "native-requires-grad-written",
        "csrc/bridge_call.c",
        "        t = tfb_attr_true(&cfg.requires_grad, v);\n        if (t == 1 && !written)",
        "        t = 0;\n        if (t == 1 && !written)",
        "autograd cannot see C's in-place write to a leaf that requires grad",
        ("tests/test_bridge_native.py", "-k", "requires"),
        "lead",
    ),
    # ---- per-tensor checks torch does not make (issue 36: grad, read-only buffers) ---- #
    Mutant(
        "grad-read-detached",
        "tensorffi/_bridge/arrays.py",
        "    if not written and t.requires_grad and not grad_writes_ok and T.is_grad_enabled():",
        "    if False:",
        "training silently wrong: C reads a tensor that requires grad and its result has no gradient",
        ("tests/test_tensor_checks.py", "-k", "TestGrad and python_call"),
    ),
    Mutant(
        "native-grad-read-detached",
        "csrc/bridge_call.c",
        "            t = tfb_grad_mode(grad_mode);",
        "            t = tfb_grad_mode(grad_mode) * 0;",
        "training silently wrong: the native path reads a tensor that requires grad with grad mode on",
        ("tests/test_tensor_checks.py", "-k", "TestGrad and (compile or load)"),
    ),
    Mutant(
        "readonly-buffer-written",
        "tensorffi/_bridge/arrays.py",
        "        if t.numel() and readonly.overlaps(t.data_ptr(), t.numel() * t.element_size()):",
        "        if False:",
        "C writes into an immutable bytes object (torch.frombuffer(bytes)), or SIGSEGV on a read-only mmap",
        ("tests/test_tensor_checks.py", "-k", "TestImmutable and python_call"),
    ),
    Mutant(
        "native-readonly-buffer-written",
        "csrc/bridge_call.c",
        "            int ro = tfb_readonly(addr, numel * itemsize);",
        "            int ro = tfb_readonly(addr, numel * itemsize) * 0;",
        "the native path writes into an immutable bytes object, or SIGSEGV on a read-only mmap",
        ("tests/test_tensor_checks.py", "-k", "TestImmutable and (compile or load)"),
    ),
    Mutant(
        "readonly-frombuffer-not-noted",
        "tensorffi/_bridge/readonly.py",
        "        if type(buffer) is not bytearray and not compiling() and not _writable_buffer(buffer):",
        "        if False:",
        "a tensor over bytes or a read-only mmap is written by C (nothing knows it is read-only)",
        ("tests/test_tensor_checks.py", "-k", "TestImmutable and compile"),
    ),
    Mutant(
        "struct-min-len-off",
        "tensorffi/_bridge/structs.py",
        "            if need and need > owner.nbytes // size:",
        "            if need and need > owner.nbytes // size + 8:",
        "C writes past a struct's array: data of 4 floats with n = 12 reaches C (heap overwrite)",
        ("tests/test_struct_contracts.py", "-k", "inferred or length"),
    ),
    Mutant(
        "struct-moved-memory-unseen",
        "tensorffi/_bridge/structs.py",
        "            if addr != kept.addr or _current_address(owner) != addr:",
        "            if addr != kept.addr:",
        "a tensor resized after its assignment to a struct field: C reads the freed memory",
        ("tests/test_struct_contracts.py", "-k", "moved or resized"),
    ),
    Mutant(
        "struct-field-symbol-typo-allowed",
        "tensorffi/plan.py",
        "            near = [q for q in int_fields + list(ints) if _near(sym, q)]",
        "            near = []",
        "a typo in a struct field's size (input_frame) binds quietly as a size of its own",
        ("tests/test_struct_contracts.py", "-k", "mistakes or typo"),
    ),
]
