"""numpy's BLAS kernels for the CPU this process runs on: the safety filters' small matrix products every tick.

numpy's wheels bundle OpenBLAS, which picks its kernels from the CPU's model number when it loads. A CPU newer
than the bundled OpenBLAS is not recognised and gets the generic ``Prescott`` (SSE3) kernels: on a 5th-generation
Xeon (family 6, model 207) under numpy 1.26's OpenBLAS 0.3.23, a (5, 128) x (128, 128) float32 product, the fast-loop
critic's hidden layer, takes 16 us there and 4 us with the AVX-512 kernels the CPU has. Every tick of the safety
node's 1 kHz loop pays that.

:func:`choose_openblas_kernel` (run when ``robot_rl`` is imported, before numpy is) names the kernels from the CPU's
instruction-set flags (``/proc/cpuinfo``) in ``OPENBLAS_CORETYPE``, which OpenBLAS reads when it loads: ``SkylakeX``
with AVX-512, ``Haswell`` with AVX2 and FMA. It leaves a value the user set alone, and does nothing once numpy is
loaded (OpenBLAS has chosen by then) or when the flags are unknown (another OS or architecture). torch uses its own
BLAS and is not affected. ``robot-rl doctor`` shows the kernels numpy got (:func:`blas_kernels`).

A process that loaded numpy before ``robot_rl`` (pytest does: zarr's plugin imports numpy) keeps OpenBLAS's own
choice, and a child it spawns would make robot_rl's. Two kernel sets round differently (FMA or not, another order of
the sums): the same env stepped in a worker process gave an observation one bit off the parent's on an Intel Xeon,
where OpenBLAS's choice and robot_rl's differ. :func:`children_compute_as_this_process` starts children with the
kernels this process runs, so a worker computes what its parent computes, bit for bit.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")
AVX512 = frozenset({"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"})  # what OpenBLAS's SkylakeX needs
AVX2 = frozenset({"avx2", "fma"})  # what its Haswell kernels need
GENERIC_KERNELS = frozenset({"prescott", "core2", "nehalem", "atom", "katmai", "coppermine", "northwood", "banias"})


def cpu_flags(cpuinfo: Path = CPUINFO) -> frozenset[str]:
    """The instruction-set flags of the first CPU in ``cpuinfo`` (empty when it cannot be read)."""
    try:
        with open(cpuinfo, encoding="ascii", errors="replace") as lines:
            for line in lines:
                name, _, value = line.partition(":")
                if name.strip() == "flags":
                    return frozenset(value.split())
    except OSError:
        pass
    return frozenset()


def kernels_for(flags: frozenset[str]) -> str | None:
    """The OpenBLAS core type whose kernels ``flags`` can run: ``SkylakeX``, ``Haswell`` or None (let OpenBLAS
    choose)."""
    if AVX512 <= flags:
        return "SkylakeX"
    if AVX2 <= flags:
        return "Haswell"
    return None


def choose_openblas_kernel(
    environ: MutableMapping[str, str] = os.environ, flags: frozenset[str] | None = None
) -> str | None:
    """Set ``OPENBLAS_CORETYPE`` in ``environ`` for this CPU (``flags``: default from ``/proc/cpuinfo``) unless it
    is set or numpy is loaded already; the core type set, or None when nothing was set."""
    if "OPENBLAS_CORETYPE" in environ or "numpy" in sys.modules:
        return None
    kernels = kernels_for(cpu_flags() if flags is None else flags)
    if kernels is not None:
        environ["OPENBLAS_CORETYPE"] = kernels
    return kernels


def blas_kernels() -> tuple[str, str] | None:
    """(library, kernel architecture) of numpy's BLAS as threadpoolctl reports it, e.g. ("openblas", "SkylakeX");
    None when it reports no BLAS."""
    import numpy  # noqa: F401 - loads the BLAS threadpoolctl inspects
    from threadpoolctl import threadpool_info

    for library in threadpool_info():
        if library.get("user_api") == "blas":
            return str(library.get("internal_api")), str(library.get("architecture"))
    return None


def generic_kernels(architecture: str, flags: frozenset[str]) -> bool:
    """True when ``architecture`` is a generic kernel set although the CPU (``flags``) can run a faster one."""
    return architecture.lower() in GENERIC_KERNELS and kernels_for(flags) is not None


def kernels_for_children() -> dict[str, str]:
    """The environment a child process needs to load numpy's BLAS with the kernels this process runs:
    ``{"OPENBLAS_CORETYPE": <this process's kernels>}``, or empty where numpy reports no OpenBLAS kernels."""
    kernels = blas_kernels()
    if kernels is None or kernels[0] != "openblas" or kernels[1] in ("", "None"):
        return {}
    return {"OPENBLAS_CORETYPE": kernels[1]}


CHILD_ENVIRONMENT = threading.Lock()  # one start at a time changes os.environ


@contextmanager
def children_compute_as_this_process() -> Iterator[dict[str, str]]:
    """While open, a process started from this one (``multiprocessing`` spawn, ``subprocess``) inherits
    :func:`kernels_for_children` in its environment, so its numpy computes what this process's numpy computes; the
    environment is as it was afterwards. Yields what was set."""
    pinned = kernels_for_children()
    with CHILD_ENVIRONMENT:
        before = {name: os.environ.get(name) for name in pinned}
        os.environ.update(pinned)
        try:
            yield pinned
        finally:
            for name, value in before.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
