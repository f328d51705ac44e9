"""A labelled corpus of real MCP tool errors, the rules' accuracy on it, and the model diagnosis measured against it."""
