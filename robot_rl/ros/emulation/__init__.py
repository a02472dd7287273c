"""Stand-ins for a lab's hardware: the simulated robot, the emulated cell and the scripted operator and teleop."""
