"""Numerical functions the layers and models are made of (no Keras layers here): the exact LSTM
recurrence, the softmax losses, padding masks and chunked maps."""
