"""`python -m robot_rl.cli ...`: the `robot-rl` command (robot_rl.cli.main)."""

import sys

from robot_rl.cli.main import main

sys.exit(main())
