# SPDX-License-Identifier: MIT
"""Call overhead of tensorffi operators (torch.ops.tensorffi.*) on a 16-element tensor.

Peers, measured in the same run and interleaved round by round:

* a C++ operator (``TORCH_LIBRARY``) doing the same work, built here with
  ``torch.utils.cpp_extension.load_inline`` (needs a C++ compiler and ninja);
* the same bridge call wrapped in ``torch.library.custom_op`` (with
  ``register_fake``, and ``register_autograd`` for the differentiable one);
* the bridge call itself, and the built-in torch operator, for scale.

Run ``python benchmarks/op_overhead.py [--quick]``; it prints a Markdown table.
``benchmarks/call_overhead.py`` imports :func:`measure` (timings in microseconds
per call, medians over rounds) and :func:`ratios`.
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

import tensorffi  # noqa: E402

N = 16

CPP_SOURCE = r"""
#include <torch/library.h>
#include <ATen/ATen.h>

// x *= a, in place (the work of tf_core_scale_f32)
void scale_(at::Tensor x, double a) {
    TORCH_CHECK(x.scalar_type() == at::kFloat && x.is_contiguous(), "x must be contiguous float32");
    float *p = x.data_ptr<float>();
    const float af = (float)a;
    for (int64_t i = 0, n = x.numel(); i < n; i++) p[i] *= af;
}

// y = a * x, a new tensor (the work of tf_core_scaled_f32)
at::Tensor scaled(const at::Tensor &x, double a) {
    TORCH_CHECK(x.scalar_type() == at::kFloat && x.is_contiguous(), "x must be contiguous float32");
    at::Tensor y = at::empty_like(x);
    const float *p = x.data_ptr<float>();
    float *q = y.data_ptr<float>();
    const float af = (float)a;
    for (int64_t i = 0, n = x.numel(); i < n; i++) q[i] = af * p[i];
    return y;
}

TORCH_LIBRARY(tfbench_cpp, m) {
    m.def("scale_(Tensor(a!) x, float a) -> ()");
    m.def("scaled(Tensor x, float a) -> Tensor");
}
TORCH_LIBRARY_IMPL(tfbench_cpp, CPU, m) {
    m.impl("scale_", &scale_);
    m.impl("scaled", &scaled);
}
"""


def build_cpp_op(verbose: bool = False) -> Any:
    """Build (or load from torch's extension cache) the C++ peer; returns torch.ops.tfbench_cpp."""
    if not hasattr(torch.ops, "tfbench_cpp") or not hasattr(torch.ops.tfbench_cpp, "scale_"):
        from torch.utils.cpp_extension import load_inline

        load_inline("tfbench_cpp", cpp_sources=CPP_SOURCE, is_python_module=False, verbose=verbose)
    return torch.ops.tfbench_cpp


_custom: dict[str, Any] = {}


def build_custom_ops() -> dict[str, Any]:
    """The same bridge calls wrapped in torch.library.custom_op (the slow, easy way)."""
    if _custom:
        return _custom

    @torch.library.custom_op("tfbench_py::scale_", mutates_args=("x",))
    def scale_(x: torch.Tensor, a: float) -> None:
        tensorffi.core.scale_(x, a)

    @torch.library.custom_op("tfbench_py::scaled", mutates_args=())
    def scaled(x: torch.Tensor, a: float) -> torch.Tensor:
        return tensorffi.core.scaled(x, a)

    scaled.register_fake(lambda x, a: torch.empty_like(x))

    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        ctx.a = inputs[1]

    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return scaled(grad.contiguous(), ctx.a), None

    scaled.register_autograd(backward, setup_context=setup_context)
    _custom.update(scale_=scale_, scaled=scaled)
    return _custom


def build_fixed_threads_op() -> Any:
    """tensorffi's scaled with a constant thread count: shows what
    tensorffi.core.get_num_threads() costs per call."""
    from tensorffi import ops

    if "tfbench_tf::scaled" not in ops.operators():
        ops.register(tensorffi.core._scaled, "tfbench_tf::scaled", hidden={"nthreads": 1})
    return torch.ops.tfbench_tf.scaled


def _cases(cpp: Any, custom: dict[str, Any]) -> dict[str, tuple[Callable[..., Any], tuple[Any, ...]]]:
    x = torch.ones(N)
    xg = torch.ones(N, requires_grad=True)
    return {
        # in place, no autograd: the headline comparison
        "cpp scale_": (cpp.scale_, (x, 1.0)),
        "tensorffi scale_": (torch.ops.tensorffi.scale_, (x, 1.0)),
        "custom_op scale_": (custom["scale_"], (x, 1.0)),
        "bridge scale_": (tensorffi.core.scale_, (x, 1.0)),
        "torch mul_": (torch.Tensor.mul_, (x, 1.0)),
        # out of place; tensorffi's and custom_op's have an autograd formula
        "cpp scaled": (cpp.scaled, (x, 1.0)),
        "tensorffi scaled": (torch.ops.tensorffi.scaled, (x, 1.0)),
        "tensorffi scaled, nthreads fixed": (build_fixed_threads_op(), (x, 1.0)),
        "custom_op scaled": (custom["scaled"], (x, 1.0)),
        "bridge scaled": (tensorffi.core.scaled, (x, 1.0)),
        "torch mul": (torch.mul, (x, 1.0)),
        # input requires grad: history recorded
        "tensorffi scaled (grad)": (torch.ops.tensorffi.scaled, (xg, 1.0)),
        "custom_op scaled (grad)": (custom["scaled"], (xg, 1.0)),
        "torch mul (grad)": (torch.mul, (xg, 1.0)),
    }


def measure(
    quick: bool = False, rounds: int | None = None, number: int | None = None, clock: str = "wall"
) -> dict[str, float]:
    """Median microseconds per call of every case, interleaved round by round.

    ``clock="cpu"`` times with the process CPU clock instead of the wall clock:
    steadier on a shared, busy machine (time spent descheduled is not counted).
    """
    timer = {"wall": time.perf_counter, "cpu": time.process_time}[clock]
    cpp = build_cpp_op()
    cases = _cases(cpp, build_custom_ops())
    rounds = rounds or (7 if quick else 31)
    number = number or (500 if quick else 3000)
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for fn, args in cases.values():  # warm up
        for _ in range(200):
            fn(*args)
    for _ in range(rounds):
        for name, (fn, args) in cases.items():
            t0 = timer()
            for _ in range(number):
                fn(*args)
            samples[name].append((timer() - t0) / number * 1e6)
    return {name: statistics.median(v) for name, v in samples.items()}


def ratios(t: dict[str, float]) -> dict[str, float]:
    """The issue's two figures: tensorffi op / C++ op (floor: <= 2) and
    custom_op / tensorffi op (floor: >= 4), for scale_ and scaled."""
    return {
        "scale_: tensorffi / C++": t["tensorffi scale_"] / t["cpp scale_"],
        "scale_: custom_op / tensorffi": t["custom_op scale_"] / t["tensorffi scale_"],
        "scaled: tensorffi / C++": t["tensorffi scaled"] / t["cpp scaled"],
        "scaled: custom_op / tensorffi": t["custom_op scaled"] / t["tensorffi scaled"],
        "scaled, nthreads fixed: tensorffi / C++": t["tensorffi scaled, nthreads fixed"] / t["cpp scaled"],
        "scaled (grad): custom_op / tensorffi": t["custom_op scaled (grad)"] / t["tensorffi scaled (grad)"],
    }


def machine() -> str:
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import numpy

    return (
        f"{model}, {os.cpu_count()} CPUs; Python {platform.python_version()}, torch {torch.__version__}, "
        f"numpy {numpy.__version__}, tensorffi {tensorffi.__version__} ({tensorffi.info()['simd']})"
    )


def table(t: dict[str, float]) -> str:
    lines = [
        f"Call overhead on a {N}-element float32 tensor (median µs per call; lower is better)",
        "",
        "| call | µs | × C++ op |",
        "|---|---:|---:|",
    ]
    for name, us in t.items():
        in_place = name.endswith("scale_") or name.endswith("mul_")
        base = t["cpp scale_"] if in_place else t["cpp scaled"]
        lines.append(f"| {name} | {us:.2f} | {us / base:.2f} |")
    lines += ["", "| ratio | value |", "|---|---:|"]
    lines += [f"| {k} | {v:.2f} |" for k, v in ratios(t).items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds (a smoke run)")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall", help="wall clock (default) or process CPU time")
    args = parser.parse_args(argv)
    build_cpp_op()
    print(machine())
    print()
    print(table(measure(quick=args.quick, clock=args.clock)))
    print(f"\n({args.clock} clock)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
