"""The tournament desk."""
