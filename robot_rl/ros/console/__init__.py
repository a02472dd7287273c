"""The operator's web page (``console_node``) and its static files (``static/``)."""
