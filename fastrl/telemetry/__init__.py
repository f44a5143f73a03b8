"""Evaluation / logging layer: TensorBoard scalars and the console progress line."""
