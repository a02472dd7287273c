"""What only the cell emulator knows about the reward classifier: its word on ``/rl/success`` against the sim's
ground truth, per frame and per episode (:class:`ClassifierTally`, in the cell's report)."""

from __future__ import annotations

from typing import Any


class ClassifierTally:
    """The reward classifier's decisions on ``/rl/success`` against the sim's ground truth: per frame, and per scene
    (an episode): a scene whose task was never done, in which the classifier said success at least once, is a false
    success of a failed episode (what the classifier's calibration promises about, per episode).

    A scene is one the cell placed (:meth:`begin_scene`) until the reset that clears it (:meth:`end_scene`). Decisions
    between the two (the person putting the objects back: the old scene still in view) count per frame, against the
    truth then, but belong to no scene; nor does the scene the cell starts with, which the first reset clears before
    any episode is played on it."""

    def __init__(self):
        self.counts = {"true_positive": 0, "false_positive": 0, "true_negative": 0, "false_negative": 0}
        self.counts |= {"failed_scenes": 0, "failed_scenes_declared_success": 0}
        self.in_scene = False  # a placed scene is in progress
        self.said_success = False  # in the scene in progress
        self.first_false: dict[str, Any] | None = None  # the task's state at the scene's first false success

    def add(self, said: bool, truth: bool, task_state: dict[str, Any] | None = None) -> None:
        """A decision and the truth at it; ``task_state``: the sim's task state then (the task's ``task_info``),
        kept for the scene's first false success."""
        self.counts[f"{'true' if said == truth else 'false'}_{'positive' if said else 'negative'}"] += 1
        if said and not truth and self.in_scene and self.first_false is None:
            self.first_false = dict(task_state or {})
        self.said_success |= said and self.in_scene

    def begin_scene(self) -> None:
        """The cell has placed a new scene."""
        self.in_scene, self.said_success, self.first_false = True, False, None

    def end_scene(self, succeeded: bool) -> dict[str, Any] | None:
        """The scene in progress is over (a reset began); ``succeeded``: its task was truly done at some moment.
        Returns the task's state at its first false success when it was a failed scene declared a success (what a
        rehearsal reads to tell a near miss from a spike), else None."""
        declared = self.in_scene and not succeeded and self.said_success
        first_false = self.first_false if declared else None
        if self.in_scene and not succeeded:
            self.counts["failed_scenes"] += 1
            self.counts["failed_scenes_declared_success"] += declared
        self.in_scene, self.said_success, self.first_false = False, False, None
        return first_false

    def rates(self) -> dict[str, float | None]:
        c = self.counts
        negatives, positives = c["true_negative"] + c["false_positive"], c["true_positive"] + c["false_negative"]
        failed = c["failed_scenes"]
        return {
            "false_positive_rate": c["false_positive"] / negatives if negatives else None,
            "false_negative_rate": c["false_negative"] / positives if positives else None,
            "false_success_per_failed_episode": c["failed_scenes_declared_success"] / failed if failed else None,
        }


def described(task_state: dict[str, Any]) -> str:
    """A task state (``task_info``: SI units) as ``key=value`` words for the log, floats to the millimetre."""
    return (
        ", ".join(
            f"{key}={value:.3f}" if isinstance(value, float) else f"{key}={value}" for key, value in task_state.items()
        )
        or "no task state"
    )
