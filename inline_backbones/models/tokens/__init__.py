"""Tokens and their maps: :class:`~.token_map.TokenMap` (a stage's grid, regions and masks), the window plans and
region masks (:mod:`.masks`), and whether a graph is being captured (:mod:`.graph_mode`)."""
