"""Documents: uploaded files read as text, split into passages, searched and cited (issue 26)."""
