"""privssl: privacy attacks and defences on self-supervised learning, as a Snakemake workflow.

One module per concept: data, encoders, simclr, heads, sensitivity, mechanisms, protection,
mia, plotting; io holds the atomic file writes every script uses."""

__version__ = "0.1.0"
