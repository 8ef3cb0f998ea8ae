"""What users do with a stored conversation: rename and delete it, search, export, share, rate its answers, read its usage."""
