"""The nodes of a session: actor, learner, recorder, teleop, reward, home reset, tracker, camera and servo
bridge (each runs as ``python -m robot_rl.ros.nodes.<name>``)."""
