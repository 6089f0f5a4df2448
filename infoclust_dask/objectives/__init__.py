"""Objectives: values and gradients from reduced statistics, on the driver
(layer 3 of docs/ARCHITECTURE.md). One module per method."""
