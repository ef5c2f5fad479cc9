"""The docs' result tables and paragraphs, generated from the recorded experiments' summary.json files
(``python -m experiments docs``; ``--check`` only compares)."""
