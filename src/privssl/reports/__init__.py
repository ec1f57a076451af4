"""Figures and tables of every branch: the paper's Fig. 1–5 and Tables 1–2, the contrastive
claims table and figures, the training-time DP figure and tables, and the checks of the frames
they are drawn from. Reports read results; they compute only summaries (pooled intervals,
verdicts from intervals)."""
