"""Checkpoints: the safe, strict loader and verified downloads (`loading`), whether a file is a whole zip archive
(`archive`), the released files' links (`released`)."""
