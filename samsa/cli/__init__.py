"""The `samsa` command."""
