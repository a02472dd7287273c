"""Learning algorithms of robot_rl (agents, encoders, critics); filled by the learning issues."""
