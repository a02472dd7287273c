"""The command line: `robot-rl` (main), the launcher of node graphs, the doctor."""
