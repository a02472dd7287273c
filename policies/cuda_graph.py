"""Learning steps replayed from CUDA graphs: one launch per step instead of hundreds.

A SAC or CQN step on a GPU is bound by kernel launches, not arithmetic: on an H100 the pixel update at batch 256,
UTD 4 took 40 ms eagerly for 11 ms of GPU work (``benchmarks/learner_speed.py``). :class:`GraphedSteps` records
each kind of step (say "critic" and "critic + actor") once as a CUDA graph and then replays it:

- the batch (a :class:`~robot_rl.data.batches.Batch` on the agent's device) is copied into the graph's own input
  tensors (same fields, shapes and dtypes; a batch of another signature gets a graph of its own), the graph replays, and the step's metrics (0-d tensors, float32 once
  recorded) are copied out of the graph's outputs in one kernel, so they keep their values through later replays;
- the first ``warmup`` steps of each signature run eagerly on a side stream (real steps: they learn like any
  other), so the optimizers hold their state and the libraries have chosen their kernels before the recording;
- random draws come from the agent's own generator, registered with every graph: a replay draws the numbers
  the eager step would have drawn at that point of the generator's stream;
- the recording is thread-local (``capture_error_mode="thread_local"``), so an actor thread acting with the same
  networks meanwhile is not disturbed;
- a step that cannot be recorded (an operation that reads the device back, say) runs eagerly from then on, with
  one warning naming the error.

What a step may do, to be replayed correctly: compute only on tensors (no reads back to the host, no Python
branches on tensor values), update parameters and optimizer state in place (a fused Adam built with
``capturable=True``), and read nothing that changes between calls except through its batch and the registered
generator. Whoever replaces an optimizer's state or the generator's state tensors (loading a checkpoint) calls
:meth:`GraphedSteps.clear` to record again.
"""

from __future__ import annotations

import logging
import warnings
from collections import Counter
from collections.abc import Callable, Hashable
from dataclasses import dataclass

import torch

from robot_rl.data.batches import Batch

log = logging.getLogger(__name__)

Step = Callable[[Batch], dict[str, torch.Tensor]]


def signature(batch: Batch) -> Hashable:
    """What a graph recorded for ``batch`` depends on: which tensors it holds, their shapes and dtypes."""
    return tuple((name, tuple(tensor.shape), tensor.dtype) for name, tensor in batch.tensors())


def static_copy(batch: Batch) -> Batch:
    """A copy of ``batch`` in fresh tensors: a graph's inputs."""
    return batch.map(torch.clone)


def copy_into(static: Batch, batch: Batch) -> None:
    """Write ``batch`` into a graph's inputs ``static`` (of the same signature)."""
    for (_, into), (_, value) in zip(static.tensors(), batch.tensors(), strict=True):
        into.copy_(value, non_blocking=True)


@dataclass
class Recording:
    """One recorded step: the graph, the tensors it reads its batch from and the tensors it writes its metrics to."""

    graph: torch.cuda.CUDAGraph
    inputs: Batch
    outputs: dict[str, torch.Tensor]


class GraphedSteps:
    """Steps of one agent on one CUDA ``device``, each kind recorded once and replayed (module docstring)."""

    def __init__(self, device: torch.device, generator: torch.Generator, warmup: int = 3):
        self.device, self.generator, self.warmup = device, generator, warmup
        self.recordings: dict[Hashable, Recording] = {}
        self.eager_steps: Counter[Hashable] = Counter()
        self.failed: str | None = None  # the error that stopped the recording, when one did
        self.replays = 0
        self._stream: torch.cuda.Stream | None = None

    def __call__(self, kind: Hashable, step: Step, batch: Batch) -> dict[str, torch.Tensor]:
        """``step(batch)``'s metrics for a step of ``kind`` (steps of one kind compute the same thing), computed
        by replaying its recording when there is one."""
        if self.failed is not None:
            return step(batch)
        key = (kind, signature(batch))
        recording = self.recordings.get(key)
        if recording is None:
            if self.eager_steps[key] < self.warmup:
                self.eager_steps[key] += 1
                return self._on_side_stream(step, batch)
            recording = self._record(key, step, batch)
            if recording is None:
                return step(batch)
        else:
            copy_into(recording.inputs, batch)
        recording.graph.replay()
        self.replays += 1
        values = torch.stack(list(recording.outputs.values()))  # the next replay overwrites the outputs
        return dict(zip(recording.outputs, values.unbind()))

    def clear(self) -> None:
        """Forget every recording (after the state they read was replaced); the next steps warm up and record."""
        self.recordings.clear()
        self.eager_steps.clear()

    def _on_side_stream(self, step: Step, batch: Batch) -> dict[str, torch.Tensor]:
        """An eager step on a side stream, as CUDA graph warm-ups are made (the caller's stream waits for it)."""
        stream = self._stream = self._stream or torch.cuda.Stream(self.device)
        current = torch.cuda.current_stream(self.device)
        stream.wait_stream(current)
        with torch.cuda.stream(stream):
            outputs = step(batch)
        current.wait_stream(stream)
        return outputs

    def _record(self, key: Hashable, step: Step, batch: Batch) -> Recording | None:
        """Record ``step`` on a copy of ``batch`` (which the first replay then computes); None, and eager steps
        from then on, if it cannot be recorded."""
        inputs = static_copy(batch)
        graph = torch.cuda.CUDAGraph()
        try:
            graph.register_generator_state(self.generator)
            with torch.cuda.graph(graph, capture_error_mode="thread_local"):
                outputs = {name: value.float() for name, value in step(inputs).items()}  # one dtype: one stack
        except Exception as error:  # noqa: BLE001 - any failure to record leaves the eager step, which works
            self.failed = f"{type(error).__name__}: {error}"
            self.recordings.clear()
            warnings.warn(f"agent.cuda_graph: a learning step could not be recorded, it runs eagerly: {self.failed}")
            return None
        recording = self.recordings[key] = Recording(graph, inputs, outputs)
        log.info("recorded a CUDA graph of the %s step", key[0])
        return recording
