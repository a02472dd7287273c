"""The training machinery: the in-process loop, the fleet, the actor, the learner, collection and pretraining. Built on sim, policies and hardware; knows nothing of ROS."""
