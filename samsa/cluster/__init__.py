"""Cluster metadata: the metadata log, its image, and the controller that writes it."""
