"""Drivers for real devices (cameras, arm bridges, teleop); filled by the real-robot issue."""
