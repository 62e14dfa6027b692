"""CLI command modules beyond `analyze`/`rules`. Each module imports ``gpugap.cli.app``
and registers its commands on it; gpugap.cli imports every module here at start-up, so
keep their top-level imports light (heavy ones go inside the command functions)."""
