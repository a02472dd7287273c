"""Sim envs in worker processes (``train.vectorization=async``): N envs stepped in parallel.

Each worker process holds one env and the scripted human who plays on it (the expert reads the env's privileged
state, so the two live together); the driver keeps the policy, the safety filter, the transport and the recorder.
Per step the driver sends the action to execute and gets back what ``env.step`` returns, the task's progress
(its dense reward) and the human's decision for the next step: the scripted human judges from progress and the
env's state, never from the policy's proposal, so it decides as soon as a step is done, in the worker, and the
driver needs one round trip per step. :func:`robot_rl.runtime.actor.step_all` sends every env its action before it awaits
the first answer (``step_async`` / ``step_wait``, as gymnasium's ``AsyncVectorEnv``), so the physics of N envs runs
on N cores while the driver batches the policy call.

A worker computes what the driver computes, bit for bit: it is started with the driver's BLAS kernels
(:func:`robot_rl.core.blas.children_compute_as_this_process`; the env's numpy products round by them), and a
worker that reports other kernels is an error at its start. The physics is MuJoCo's, single-threaded in both.

Workers are spawned (not forked: the driver runs torch and a learner thread) and ignore Ctrl-C: the driver's stop
request ends the run, and :meth:`EnvWorker.close` (or the driver's exit: they are daemons) ends them. Messages are
pickled over the pipe between the driver and the workers it spawned, nothing else; a worker's exception comes back
as the driver's :class:`EnvWorkerError`.
"""

from __future__ import annotations

import multiprocessing
import signal
import traceback
from collections.abc import Callable
from typing import Any

import numpy as np

from robot_rl.core.blas import blas_kernels, children_compute_as_this_process
from robot_rl.runtime.actor import set_training_step
from robot_rl.runtime.evaluate import task_progress

Decision = tuple[bool, np.ndarray | None]  # a teleop source's (active, action)


class EnvWorkerError(RuntimeError):
    """A worker's env or human raised, or the worker is gone."""


def serve(connection, build: Callable[[], tuple[Any, Any]]) -> None:
    """A worker's loop: build (env, human), then answer the driver's requests until ``close`` or a closed pipe."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the driver's to handle
    env = None
    try:
        env, human = build()
        connection.send(("ok", describe(env)))
        while True:
            command, argument = connection.recv()
            if command == "close":
                break
            try:
                connection.send(("ok", answer(env, human, command, argument)))
            except Exception:  # noqa: BLE001 - the driver raises it, with the worker's traceback
                connection.send(("error", traceback.format_exc()))
    except (EOFError, BrokenPipeError, KeyboardInterrupt):
        pass  # the driver is gone
    except Exception:  # noqa: BLE001 - building failed: tell the driver
        connection.send(("error", traceback.format_exc()))
    finally:
        if env is not None:
            env.close()
        connection.close()


def describe(env) -> dict[str, Any]:
    """What the driver asks of an env besides stepping it: its spaces, state layout, whether it runs a fast-loop
    critic, and the BLAS kernels the worker's numpy computes with."""
    loop = getattr(env.unwrapped, "fast_loop", None)
    return {
        "blas_kernels": blas_kernels(),
        "observation_space": env.observation_space,
        "action_space": env.action_space,
        "state_layout": getattr(env.unwrapped, "state_layout", None),
        "fast_critic": loop is not None and loop.risk_filter is not None,
    }


def answer(env, human, command: str, argument: Any) -> Any:
    """One request in the worker: ``reset`` (seed, demo, training step), ``step`` (action, training step) or ``arm``
    (a fast critic's layers, activation and version). The training step (the run's online env steps, None: not
    told yet) goes to the env's curricula before it resets or steps."""
    if command == "reset":
        seed, demo, training_step = argument
        if training_step is not None:
            set_training_step(env, training_step)
        human.begin_episode(demo)  # before the reset, as in one process
        obs, info = env.reset(seed=seed)
        return obs, info, human(obs, None)
    if command == "step":
        action, training_step = argument
        if training_step is not None:
            set_training_step(env, training_step)
        next_obs, reward, terminated, truncated, info = env.step(action)
        progress = task_progress(env, reward)
        human.observe(progress)
        decision = (False, None) if terminated or truncated else human(next_obs, None)
        return (next_obs, reward, terminated, truncated, info), progress, decision
    if command == "arm":
        from robot_rl.safety.fast_critic import FastCriticModel

        layers, activation, version = argument
        env.unwrapped.fast_loop.risk_filter.swap(FastCriticModel(layers, activation), version)
        return None
    raise ValueError(f"unknown env worker request {command!r}")


class WorkerHuman:
    """The worker's human as the driver sees it: their decision for the coming step, made in the worker once the
    last step was done (:class:`~robot_rl.runtime.teleop.TeleopSource`'s calls; what they observe, they observed there)."""

    def __init__(self) -> None:
        self.demo = False
        self.decision: Decision = (False, None)

    def begin_episode(self, demo: bool) -> None:
        self.demo = demo  # goes to the worker with the reset that follows

    def __call__(self, obs: dict[str, np.ndarray], policy_action: np.ndarray) -> Decision:
        return self.decision

    def observe(self, progress: float) -> None:
        """The worker's human observed the step already."""


class RemoteRiskFilter:
    """The worker env's fast-loop critic as :meth:`~robot_rl.runtime.session.ActorSession.arm_fast_loop` sees it: the model
    it was last handed, and ``swap`` sends a new one."""

    def __init__(self, worker: EnvWorker):
        self.worker, self.current = worker, None

    def swap(self, model, version: int) -> None:
        self.worker.request("arm", (model.layers, model.activation, version))
        self.current = (model, version)


class RemoteFastLoop:
    """``env.unwrapped.fast_loop`` of a worker env, as far as the driver reaches it: its critic."""

    def __init__(self, risk_filter: RemoteRiskFilter):
        self.risk_filter = risk_filter


class EnvWorker:
    """The driver's side of one worker: an env (``reset``, ``step``, ``step_async``/``step_wait``, ``close``,
    spaces) whose teleop source is :attr:`human`. ``build`` makes the worker's (env, human) and must pickle (a
    module-level function, or a ``functools.partial`` of one, with plain arguments)."""

    def __init__(self, build: Callable[[], tuple[Any, Any]], name: str = "env-worker"):
        context = multiprocessing.get_context("spawn")
        self.connection, child = context.Pipe()
        self.process = context.Process(target=serve, args=(child, build), name=name, daemon=True)
        with children_compute_as_this_process():
            self.process.start()
        child.close()
        self.human = WorkerHuman()
        self.training_step: int | None = None  # the run's online env steps, sent with the next reset or step
        self.progress = 0.0  # the task's progress after the last step (task_progress reads it as the dense reward)
        self.waiting = False
        description = self.receive()
        if description["blas_kernels"] != blas_kernels():
            self.close()
            raise EnvWorkerError(
                f"env worker {name} computes with BLAS kernels {description['blas_kernels']}, this process with "
                f"{blas_kernels()}: its episodes would differ from this process's in the last bits"
            )
        self.observation_space, self.action_space = description["observation_space"], description["action_space"]
        self.state_layout = description["state_layout"]
        self.fast_loop = RemoteFastLoop(RemoteRiskFilter(self)) if description["fast_critic"] else None

    @property
    def unwrapped(self) -> EnvWorker:
        return self

    def dense_reward(self) -> float:
        return self.progress

    def gone(self) -> EnvWorkerError:
        self.process.join(timeout=1)
        return EnvWorkerError(f"env worker {self.process.name} is gone (exit code {self.process.exitcode})")

    def send(self, command: str, argument: Any) -> None:
        try:
            self.connection.send((command, argument))
        except OSError as error:  # a broken pipe: the worker died
            raise self.gone() from error

    def receive(self) -> Any:
        try:
            status, value = self.connection.recv()
        except (EOFError, OSError) as error:
            raise self.gone() from error
        if status == "error":
            raise EnvWorkerError(f"env worker {self.process.name} failed:\n{value}")
        return value

    def request(self, command: str, argument: Any) -> Any:
        self.send(command, argument)
        return self.receive()

    def set_training_step(self, step: int) -> None:
        """Where the run is, for the worker env's curricula: sent with the next request, no round trip of its own."""
        self.training_step = step

    def reset(self, seed: int | None = None) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        obs, info, self.human.decision = self.request("reset", (seed, self.human.demo, self.training_step))
        self.progress = 0.0
        return obs, info

    def step_async(self, action: np.ndarray) -> None:
        self.send("step", (np.asarray(action), self.training_step))
        self.waiting = True

    def step_wait(self) -> tuple:
        self.waiting = False
        answer, self.progress, self.human.decision = self.receive()
        return answer

    def step(self, action: np.ndarray) -> tuple:
        self.step_async(action)
        return self.step_wait()

    def close(self) -> None:
        if self.process.is_alive():
            try:
                if self.waiting:
                    self.receive()  # the step in flight (a run cut mid-step)
                self.connection.send(("close", None))
            except (EnvWorkerError, OSError):
                pass
            self.process.join(timeout=10)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        self.connection.close()
