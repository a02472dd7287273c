"""What only the cell emulator knows about the reward classifier: its word on ``/rl/success`` against the sim's
ground truth, per frame and per episode (:class:`ClassifierTally`, in the cell's report)."""

from __future__ import annotations


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

    def add(self, said: bool, truth: bool) -> None:
        self.counts[f"{'true' if said == truth else 'false'}_{'positive' if said else 'negative'}"] += 1
        self.said_success |= said and self.in_scene

    def begin_scene(self) -> None:
        """The cell has placed a new scene."""
        self.in_scene, self.said_success = True, False

    def end_scene(self, succeeded: bool) -> None:
        """The scene in progress is over (a reset began); ``succeeded``: its task was truly done at some moment."""
        if self.in_scene and not succeeded:
            self.counts["failed_scenes"] += 1
            self.counts["failed_scenes_declared_success"] += self.said_success
        self.in_scene, self.said_success = False, False

    def rates(self) -> dict[str, float | None]:
        c = self.counts
        negatives, positives = c["true_negative"] + c["false_positive"], c["true_positive"] + c["false_negative"]
        failed = c["failed_scenes"]
        return {
            "false_positive_rate": c["false_positive"] / negatives if negatives else None,
            "false_negative_rate": c["false_negative"] / positives if positives else None,
            "false_success_per_failed_episode": c["failed_scenes_declared_success"] / failed if failed else None,
        }
