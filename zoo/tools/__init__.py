"""Command-line tools around the core: nothing here is built from a config, and nothing in the core
imports it."""
