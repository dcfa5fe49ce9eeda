"""The research wing: what reproduces and studies the paper, apart from the method itself.

RuleWorld (a synthetic world and its backbone), ``calyrex reproduce``, ``calyrex study real``,
the training mixes of real data (``calyrex mix``) and the ablations. It stands on the library
(:mod:`calyrex.core`, ``span``, ``adapters``, ``backbones``, ``training``, ``eval``, …), which
never imports it (``tests/test_layers.py``): the library reaches RuleWorld's backbone and its
analysis data only through the entry points the package declares (``pyproject.toml``).
"""
