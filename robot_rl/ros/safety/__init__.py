"""The safety node, the only publisher of the arm's command, and its parts: the tick loop, the fast critic's risk
model, the operator's e-stop watch, the report of a lost arm state, its outputs."""
