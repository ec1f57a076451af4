"""The graph track: graph data, self-supervised GNN encoders, and link-stealing attacks."""
