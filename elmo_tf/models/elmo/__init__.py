"""ELMo's model family: its configuration and presets, the biLM backbone, the released weight
files, and the biLM pre-training task."""
