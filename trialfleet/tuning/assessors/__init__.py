"""The built-in assessors: Medianstop and Curvefitting (with its curve models)."""
