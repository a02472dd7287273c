"""The runtime's links over topics: the env an actor plays through the cell's topics (``topic_env``) and the
transport between actor and learner (``transport``)."""
