"""ROS 2 side of robot_rl, in rooms, bottom up (a room imports only the rooms below it; ``tests/test_layers.py``):

- ``plumbing``: QoS profiles, message validation and conversion, senders, delivery numbers, node start-up;
- ``safety``: the safety node (the only publisher of the arm's command) and its parts;
- ``links``: the runtime's connections over topics (the env an actor plays, the transport between actor and learner);
- ``nodes``: the session's nodes (actor, learner, recorder, teleop, reward, reset, drivers);
- ``emulation``: the simulated robot and the emulated cell that stand in for a lab's hardware;
- ``console``: the operator's web page.

Importing this package does not import rclpy; each node module does.
"""
