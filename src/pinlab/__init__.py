"""pinlab: find, apply and prove the best placement of a program's threads and memory."""
__version__ = "0.1.0"
