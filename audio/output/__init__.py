"""Outputs that live outside the web server's process (see `audio.output.process`)."""
