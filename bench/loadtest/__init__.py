"""The parts of bench/load.py: the stack it runs against, the traffic, the figures."""
