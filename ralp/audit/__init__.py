"""The placement audit: where every op of one real training step ran, and what crossed tasks."""
