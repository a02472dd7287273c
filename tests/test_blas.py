"""numpy's BLAS kernels: robot_rl names the ones the CPU runs before numpy loads (robot_rl.core.blas)."""

from __future__ import annotations

import os
import subprocess
import sys

from robot_rl.core.blas import AVX2, AVX512, choose_openblas_kernel, cpu_flags, generic_kernels, kernels_for

SSE = frozenset({"sse", "sse2", "sse3"})


def test_the_kernels_follow_the_instruction_sets():
    assert kernels_for(SSE | AVX2 | AVX512) == "SkylakeX"
    assert kernels_for(SSE | AVX2) == "Haswell"
    assert kernels_for(SSE | {"avx2"}) is None  # no FMA: let OpenBLAS choose
    assert kernels_for(frozenset()) is None  # /proc/cpuinfo unreadable (another OS) or another architecture
    assert generic_kernels("Prescott", SSE | AVX2) and not generic_kernels("SkylakeX", SSE | AVX2 | AVX512)
    assert not generic_kernels("Prescott", SSE)  # nothing faster to run


def test_a_users_choice_or_a_loaded_numpy_is_left_alone():
    chosen = {"OPENBLAS_CORETYPE": "Zen"}
    assert choose_openblas_kernel(chosen, SSE | AVX2 | AVX512) is None and chosen == {"OPENBLAS_CORETYPE": "Zen"}
    assert "numpy" in sys.modules  # this process: OpenBLAS has chosen its kernels already
    environ: dict[str, str] = {}
    assert choose_openblas_kernel(environ, SSE | AVX2 | AVX512) is None and environ == {}


def test_cpu_flags_are_read_from_cpuinfo(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: A CPU\nflags\t\t: fpu sse avx2 fma\n\nprocessor\t: 1\n")
    assert cpu_flags(cpuinfo) == {"fpu", "sse", "avx2", "fma"}
    assert cpu_flags(tmp_path / "absent") == frozenset()


def test_a_process_that_imports_robot_rl_first_gets_the_kernels_its_cpu_runs():
    """On a CPU the bundled OpenBLAS does not know (this machine's: family 6, model 207) numpy alone loads the
    generic Prescott kernels; importing robot_rl first gives the AVX-512 or AVX2 ones."""
    code = "import robot_rl; from robot_rl.core.blas import blas_kernels; print(blas_kernels()[1])"
    env = {key: value for key, value in os.environ.items() if key != "OPENBLAS_CORETYPE"}
    architecture = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True, timeout=120
    ).stdout.strip()
    flags = cpu_flags()
    assert not generic_kernels(architecture, flags), (architecture, kernels_for(flags))
    if kernels_for(flags) is not None:
        assert architecture == kernels_for(flags)
