"""The ground floor's own modules: configuration, geometry, checkpoints' format, folders, interrupts, the transport contract. Imports nothing above robot_rl.data and robot_rl.safety."""
