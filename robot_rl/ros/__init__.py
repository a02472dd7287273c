"""ROS 2 nodes of robot_rl. Importing this package does not import rclpy; each node module does."""
