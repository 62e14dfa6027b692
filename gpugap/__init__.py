"""gpugap: find the holes in a GPU timeline, say why they are there, and how to fix them."""

__version__ = "0.1.0"
