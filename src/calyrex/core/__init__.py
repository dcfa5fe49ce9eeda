"""The method itself: the CAL block, its masks and cache, the layer that hosts it and the wrapped model.

Everything a reader must understand to trust CALYREX lives here; it knows nothing of training, evaluation or serving.
"""
