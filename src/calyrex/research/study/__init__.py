"""Studies: the paper's comparison run end to end, resumable, with intervals (``calyrex study``)."""
