from gpugap.cli import entry

entry()
