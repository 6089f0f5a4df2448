"""Objectives: values and gradients from reduced statistics, on the driver
(layer 3 of DESIGN.md). One module per method."""
