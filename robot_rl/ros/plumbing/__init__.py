"""Plumbing every node shares: QoS profiles, message validation and conversion, senders, delivery numbers,
name claims, the sim clock and node start-up (``node_main``)."""
