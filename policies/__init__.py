"""Learning algorithms of robot_rl: the agents (``sac``: SAC in the RLPD / HIL-SERL style with gSDE, ``cqn`` and
``cqn_as``: coarse-to-fine Q-networks), what they share (``base``, ``encoders``, ``networks``, ``gripper``,
``gsde``), and the two learned models beside them (``safety_critic``, ``reward_classifier``). Built by
:func:`robot_rl.runtime.session.make_agent` from the ``agent`` config group."""
