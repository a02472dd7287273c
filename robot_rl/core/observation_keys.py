"""Keys of an observation dict that more than one layer reads (the envs that make it, the agents that consume it).

Besides these, an observation holds ``state`` (float32, the task's state layout) and one uint8 HxWx3 image per
camera, keyed by the camera's name."""

#: the simulator's clean state, seen by critics only (asymmetric actor-critic); :class:`robot_rl.runtime.envs.PrivilegedState`
#: adds it in simulation
PRIVILEGED_KEY = "privileged_state"
