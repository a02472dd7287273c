"""A running node's claim to its name, for the namesake that discovery showed too late.

At start-up every node looks at the ROS graph for a node of its own name (:func:`robot_rl.ros.plumbing.node_main.name_taken`):
two safety nodes would both command the arm. That look waits for discovery only so long, and on loaded cores or a busy
network discovery can take longer (a second safety node once started beside the first and ran, both holding the arm on
the other's foreign commands). So every node that passed it also publishes its claim, latched, on ``/rl/node_claims``
(its fully qualified name, its start time and a random token) and reads everyone else's from its start. A namesake's
claim heard during the look names a namesake that runs (a killed process's lingering entry sends none), so the look
refuses at once instead of waiting out the namesake's lease. Once running, a node that reads a namesake's claim older
than its own is the one that must go. It logs why, stops itself as SIGTERM would
(its own clean-up runs whole) and its process exits with code 2 and the same line as a refusal at start-up
(:attr:`NameClaim.refused`). The older one reads the younger's claim and goes on. Start times are wall-clock seconds
(``time.time()``): nodes on different machines compare them, so a cell's clocks must agree (NTP) to well within the
time between two starts; equal times fall to the token.
"""

from __future__ import annotations

import json
import math
import os
import signal
import time
import uuid

from ...data.wire import MessageError
from .guard import InputGuard

CLAIMS_TOPIC = "/rl/node_claims"  # absolute: every namespace's nodes (a fleet's robots) read one topic
MAX_CLAIM_BYTES = 1024  # a claim is ~150 bytes


def namesake_error(name: str) -> str:
    """The one line naming a namesake that already runs (at start-up and found later alike)."""
    domain = os.environ.get("ROS_DOMAIN_ID", "0")
    return (
        f"a node named {name} already runs in this ROS graph (ROS_DOMAIN_ID={domain}); stop it first, or "
        "start this one under another name or namespace (--ros-args -r __node:=<name> -r __ns:=/<namespace>)"
    )


def parse_claim(data: str) -> tuple[str, float, str]:
    """(name, start time in s since the epoch, token) of a claim's JSON text; :class:`MessageError` if malformed."""
    if len(data) > MAX_CLAIM_BYTES:
        raise MessageError(f"a claim of {len(data)} characters; expected at most {MAX_CLAIM_BYTES}")
    try:
        claim = json.loads(data)
    except json.JSONDecodeError as error:
        raise MessageError(f"a claim that is not JSON ({error})") from None
    if not isinstance(claim, dict) or set(claim) != {"name", "started", "token"}:
        raise MessageError("a claim without exactly the keys name, started and token")
    name, started, token = claim["name"], claim["started"], claim["token"]
    if not (isinstance(name, str) and isinstance(token, str) and isinstance(started, (int, float))):
        raise MessageError("a claim whose name and token are not text or whose start is not a number")
    if isinstance(started, bool) or not math.isfinite(started):
        raise MessageError(f"a claim started at {started!r}; expected a finite time")
    return name, float(started), token


class NameClaim:
    """``node``'s claim to its name (made by :meth:`claim` once its start-up look at the graph passed), and the watch
    over the others' claims from its start. ``namesake_heard``: a namesake's claim came during that look, so the
    namesake runs (the look need not wait out its lease); ``refused``: why this node must go (a namesake that started
    before it), else None."""

    def __init__(self, node):
        from std_msgs.msg import String

        from . import qos

        self.node, self.name = node, node.get_fully_qualified_name()
        self.started, self.token = math.inf, ""  # no claim made yet (:meth:`claim`)
        self.refused: str | None = None
        self.namesake_heard = False  # a namesake's claim came before this node made its own: that namesake runs
        self.guard = InputGuard(node)
        self.guard.subscribe(String, CLAIMS_TOPIC, self._on_claim, qos.LATCHED_READER)  # every node's claim
        self.publisher = node.create_publisher(String, CLAIMS_TOPIC, qos.LATCHED)

    def claim(self) -> None:
        """Make this node's claim, once its start-up look at the graph passed."""
        from std_msgs.msg import String

        self.started, self.token = time.time(), uuid.uuid4().hex
        claim = {"name": self.name, "started": self.started, "token": self.token}
        self.publisher.publish(String(data=json.dumps(claim)))

    def _on_claim(self, msg) -> None:
        name, started, token = parse_claim(msg.data)
        if name != self.name or token == self.token or self.refused is not None:
            return  # another node's, or this node's own
        if not self.token:  # still starting: only a running process sends a claim, a killed one's lingering entry none
            self.namesake_heard = True
            return
        if (started, token) < (self.started, self.token):  # the namesake is older: this one goes
            self.refused = namesake_error(self.name)
            self.node.get_logger().error(
                f"{self.refused}; it started {self.started - started:.1f} s before this one, which discovery showed "
                "only now: stopping"
            )
            os.kill(os.getpid(), signal.SIGTERM)  # as a stop: the node's own clean-up runs, then ros_node exits 2
